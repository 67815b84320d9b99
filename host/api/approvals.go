package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
)

// This file is approvals over HTTP and the websocket: GET
// /api/v1/approvals lists the approvals waiting that the caller may
// decide, POST /api/v1/approvals/{id} and the websocket's approve message
// decide one, and a POST …/call whose run asks answers 202 at once.

func (s *Server) approvalRoutes() {
	s.mux.HandleFunc("GET /api/v1/approvals", s.authed(s.listApprovals))
	s.mux.HandleFunc("POST /api/v1/approvals/{id}", s.authed(s.decideApproval))
}

// decider is who decides, as the dispatcher knows it.
func decider(id auth.Identity) runs.Decider {
	return runs.Decider{Name: id.Name, Admin: id.Role == auth.Admin, Viewer: id.Role == auth.Viewer, Approver: id.Approver, Local: id.IsLocal()}
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if id.Role == auth.Viewer && !id.Approver {
		forbidden(w, fmt.Sprintf("%s is a viewer and may not decide approvals", id.Name))
		return
	}
	list, err := s.opts.Dispatcher.ListApprovals(r.Context(), decider(id))
	if err != nil {
		s.opts.Logger.Warn("the approvals could not be listed", "error", err)
		we := wireError(err)
		writeError(w, http.StatusInternalServerError, we.Code, we.Message)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	var body struct {
		Decision string `json:"decision"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadArgs, `send {"decision": "approve"} or {"decision": "decline"}: `+describeJSONError(err))
		return
	}
	a, err := s.opts.Dispatcher.Decide(r.PathValue("id"), decider(id), body.Decision)
	if err != nil {
		// A store's failure keeps its code (store_unavailable: 503) and
		// its message for people; the log has the rest.
		we := wireError(err)
		status, ok := map[string]int{
			wire.CodeBadArgs: http.StatusBadRequest, wire.CodeNotFound: http.StatusNotFound,
			wire.CodeForbidden: http.StatusForbidden, wire.CodeSelfApproval: http.StatusForbidden,
			wire.CodeAlreadyDecided: http.StatusConflict,
		}[we.Code]
		if !ok {
			status = http.StatusInternalServerError
			s.opts.Logger.Warn("an approval could not be decided", "approval", r.PathValue("id"), "error", err)
		}
		writeError(w, status, we.Code, we.Message)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approval": a})
}

// waitOrAsked waits for a run's end, or for it to ask for an approval:
// then it returns the approval_required event.
func waitOrAsked(ctx context.Context, run *runs.Run) (last wire.Event, asked *wire.Event, err error) {
	for from := uint64(0); ; {
		evs, err := run.Next(ctx, from)
		if err != nil {
			return wire.Event{}, nil, err
		}
		if evs == nil {
			last, err := run.Wait(ctx)
			return last, nil, err
		}
		for _, e := range evs {
			switch {
			case e.Type == wire.TypeApprovalRequired:
				return wire.Event{}, &e, nil
			case e.Terminal():
				return e, nil, nil
			}
			from = e.Seq + 1
		}
	}
}

// askedJSON is the 202 answer of a call that waits for an approval. It
// says who decides, not how: the answer may reach a model, and the way to
// approve is the person's (the web UI's approvals panel, or their client).
func askedJSON(run *runs.Run, e *wire.Event) map[string]any {
	return map[string]any{
		"run": run.ID,
		"approval": map[string]any{
			"id": e.Approval, "tool": e.Tool, "args": e.Args, "why": e.Why,
			"waits_for": "a person with the right to approve ([approvals] by) approves or declines it",
			"result":    "GET /api/v1/runs/" + run.ID,
		},
	}
}

// decide is the websocket's approve message.
func (c *wsConn) decide(m wire.Message) {
	a, err := c.s.opts.Dispatcher.Decide(m.Approval, decider(c.who()), m.Decision)
	if err != nil {
		we := wireError(err)
		c.sendError(m.ID, a.Run, we.Code, we.Message)
		return
	}
	c.send(wire.Decided{Type: wire.TypeDecided, ID: m.ID, Approval: a.ID, Run: a.Run, Decision: m.Decision})
}
