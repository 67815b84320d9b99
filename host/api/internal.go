package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/cluster"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
)

// What the other hosts sharing the store ask of this one (package
// cluster): a conversation's calls this host holds, and the events of its
// runs, streamed; cancelling them. Each request must carry a signature
// made with the hosts' shared secret; a host with no secret serves none.

func (s *Server) internalRoutes() {
	s.mux.HandleFunc("POST "+cluster.CallsPath, s.fromHost(s.hostCall))
	s.mux.HandleFunc("GET "+cluster.RunPrefix+"{id}/events", s.fromHost(s.hostFollow))
	s.mux.HandleFunc("POST "+cluster.RunPrefix+"{id}/cancel", s.fromHost(s.hostCancel))
}

// atItsHost serves h on the host that holds the conversation the path
// names: here, or, when another host sharing the store holds it, there,
// the request forwarded as it came (the caller's token with it: every
// host knows the same tokens) and signed, so that host serves it itself.
func (s *Server) atItsHost(h sessionHandler) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, id auth.Identity, svc *sessions.Service) {
		rt, signer := s.router.Load(), s.cluster.Load()
		if rt == nil || signer == nil {
			h(w, r, id, svc)
			return
		}
		if _, err := signer.Verify(r); err == nil {
			h(w, r, id, svc) // forwarded here by the host that routed it
			return
		}
		session := r.PathValue("id")
		principal, ok := owner(r, id)
		if sessions.CheckID(session) != nil || !ok {
			h(w, r, id, svc) // which answers why not
			return
		}
		peer, err := rt.Where(r.Context(), principal, session)
		switch {
		case err != nil:
			s.writeSessionError(w, err)
		case peer == nil:
			h(w, r, id, svc)
		default:
			peer.Forward(w, r, s.opts.Logger)
		}
	}
}

// fromHost serves h to requests another host signed, and refuses the rest.
func (s *Server) fromHost(h func(http.ResponseWriter, *http.Request, cluster.Forwarded)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		signer := s.cluster.Load()
		if signer == nil {
			writeError(w, http.StatusNotFound, wire.CodeNotFound, "this host takes no requests from other hosts: it has no [cluster] secret")
			return
		}
		f, err := signer.Verify(r)
		if err != nil {
			s.opts.Logger.Warn("refused a request signed as from another host", "peer", r.RemoteAddr, "path", r.URL.Path, "why", err.Error())
			writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "this request is not signed by a host sharing this one's [cluster] secret: "+err.Error())
			return
		}
		h(w, r, f)
	}
}

// hostCall starts a call forwarded by another host for the principal it
// signed, and streams its run.
func (s *Server) hostCall(w http.ResponseWriter, r *http.Request, f cluster.Forwarded) {
	if f.Principal == "" {
		writeError(w, http.StatusBadRequest, wire.CodeBadFrame, "a forwarded call must be signed for its principal")
		return
	}
	var req cluster.CallRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 2*maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadFrame, "a forwarded call's body must be a call: "+err.Error())
		return
	}
	run, err := s.opts.Dispatcher.Start(runs.Request{
		Tool: req.Tool, Args: req.Args, Principal: f.Principal, Session: req.Session,
		IdempotencyKey: req.IdempotencyKey, Forwarded: true,
	})
	if err != nil {
		we := wireError(err)
		writeError(w, callErrorStatus(we.Code), we.Code, we.Message)
		return
	}
	s.opts.Logger.Debug("took a call forwarded by another host", "run", run.ID, "host", f.Host, "principal", f.Principal, "session", req.Session)
	s.streamRun(w, r.Context(), run, 0)
}

// hostFollow streams a run of this host's from seq ?from= on.
func (s *Server) hostFollow(w http.ResponseWriter, r *http.Request, _ cluster.Forwarded) {
	run, ok := s.opts.Dispatcher.Get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, wire.CodeUnknownRun, "this host has no run with that id")
		return
	}
	from, err := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
	if err != nil && r.URL.Query().Get("from") != "" {
		writeError(w, http.StatusBadRequest, wire.CodeBadFrame, "from must be a seq, a whole number from 0")
		return
	}
	s.streamRun(w, r.Context(), run, from)
}

// hostCancel cancels a run of this host's, for the host that relays it.
func (s *Server) hostCancel(w http.ResponseWriter, r *http.Request, f cluster.Forwarded) {
	run, ok := s.opts.Dispatcher.Get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, wire.CodeUnknownRun, "this host has no run with that id")
		return
	}
	var req cluster.CancelRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, wire.CodeBadFrame, "a forwarded cancel's body must be {\"reason\": …}: "+err.Error())
		return
	}
	s.opts.Logger.Debug("a run is cancelled for another host", "run", run.ID, "host", f.Host)
	if req.Reason != "" {
		run.CancelBecause(req.Reason)
	} else {
		run.Cancel()
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// streamRun writes the run's RunInfo, then its events from seq from on as
// they come, a JSON object a line, until its end or the reader goes away.
// The run goes on whatever happens here.
func (s *Server) streamRun(w http.ResponseWriter, ctx context.Context, run *runs.Run, from uint64) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	rc := http.NewResponseController(w)
	info := runs.RunInfo{Run: run.ID, Tool: run.Tool, Principal: run.Principal, Session: run.Session, IdempotencyKey: run.IdempotencyKey, Len: run.Len()}
	if enc.Encode(info) != nil || rc.Flush() != nil {
		return
	}
	for {
		evs, err := run.Next(ctx, from)
		if err != nil {
			if ctx.Err() == nil {
				s.opts.Logger.Warn("a run's events could not be read for another host", "run", run.ID, "error", err)
			}
			return
		}
		if evs == nil {
			return
		}
		for _, e := range evs {
			e.ID = ""
			if enc.Encode(e) != nil {
				return
			}
			from = e.Seq + 1
		}
		if rc.Flush() != nil {
			return
		}
	}
}
