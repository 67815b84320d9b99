package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api/apitest"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
	"github.com/toolhost/toolhost/host/tools"
)

// newApprovalsHost serves the fake tools and "publish", a change tool of
// the fake kind (it prints n lines and returns {"lines": n}).
func newApprovalsHost(t *testing.T, opts Options) *testHost {
	t.Helper()
	publish := &tools.Tool{Tool: config.Tool{Name: "publish", Description: "Publish.", Effect: "change",
		Params: []config.Param{{Name: "n", Type: "integer"}}}, Kind: "fake", Run: json.RawMessage(`{"type":"fake"}`)}
	h := apitest.Start(t, apitest.Setup{Tools: append(fakeTools(), publish)}, func(reg *tools.Registry, d *runs.Dispatcher) *Server {
		opts.Registry, opts.Dispatcher = reg, d
		return New(opts)
	})
	return &testHost{srv: h.Srv, api: h.API, runs: h.Runs, url: "ws" + h.Srv.URL[len("http"):] + "/api/v1/ws"}
}

// callAsked POSTs a call of publish and expects 202 with the run and the
// approval.
func callAsked(t *testing.T, h *testHost, token string) (run, approval string) {
	t.Helper()
	status, body, _ := do(t, h, "POST", "/api/v1/tools/publish/call", token, `{"n":2}`)
	a, _ := body["approval"].(map[string]any)
	run, _ = body["run"].(string)
	approval, _ = a["id"].(string)
	if status != http.StatusAccepted || run == "" || approval == "" || a["tool"] != "publish" {
		t.Fatalf("call of a change tool: %d %v", status, body)
	}
	if args, _ := json.Marshal(a["args"]); string(args) != `{"n":2}` {
		t.Errorf("args: %s", args)
	}
	// The answer may reach a model: it says who decides, never how.
	if raw, _ := json.Marshal(body); strings.Contains(string(raw), "/api/v1/approvals") {
		t.Errorf("the 202 answer names the approvals endpoint, for a model to approve itself with: %s", raw)
	}
	return run, approval
}

// TestApprovalsOverHTTP: 202 at once, the run waits; the caller approves;
// GET /api/v1/runs/{id} gives the result; a second decision is 409.
func TestApprovalsOverHTTP(t *testing.T) {
	h := newApprovalsHost(t, Options{Tokens: tokens("ed", "editor")})
	run, id := callAsked(t, h, "ed-token")
	status, body, _ := do(t, h, "GET", "/api/v1/approvals", "ed-token", "")
	list, _ := body["approvals"].([]any)
	if status != 200 || len(list) != 1 || list[0].(map[string]any)["id"] != id || list[0].(map[string]any)["run"] != run {
		t.Fatalf("list: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/approvals/"+id, "ed-token", `{"decision":"yes"}`); status != 400 || errCode(body) != "bad_args" {
		t.Errorf("a bad decision: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/approvals/"+id, "ed-token", `{"decision":"approve"}`); status != 200 {
		t.Fatalf("approve: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/approvals/"+id, "ed-token", `{"decision":"approve"}`); status != 409 || errCode(body) != "already_decided" {
		t.Errorf("approve twice: %d %v", status, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, rec, _ := do(t, h, "GET", "/api/v1/runs/"+run+"?events=false", "ed-token", "")
		if rec["done"] == true {
			if r, _ := json.Marshal(rec["result"]); string(r) != `{"lines":2}` {
				t.Fatalf("the run: %v", rec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %v", rec)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Decline over HTTP ends the run with declined.
	run, id = callAsked(t, h, "ed-token")
	if status, _, _ := do(t, h, "POST", "/api/v1/approvals/"+id, "ed-token", `{"decision":"decline"}`); status != 200 {
		t.Fatal(status)
	}
	r, _ := h.runs.Get(run)
	if last := waitEnd(t, r); last.Error == nil || last.Error.Code != "declined" {
		t.Errorf("declined run ended %+v", last)
	}
}

func waitEnd(t *testing.T, r *runs.Run) runs.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// TestApprovalsRoleMatrix: who lists and decides, under by = caller and by
// = admins; a viewer never; a call of a change tool by a viewer is
// refused before it asks.
func TestApprovalsRoleMatrix(t *testing.T) {
	for _, by := range []string{runs.ByCaller, runs.ByAdmins} {
		t.Run(by, func(t *testing.T) {
			h := newApprovalsHost(t, Options{Tokens: tokens("ed", "editor", "eve", "editor", "vic", "viewer", "ada", "admin")})
			h.runs.SetApprovals(runs.ApprovalPolicy{By: by})
			if status, body, _ := do(t, h, "POST", "/api/v1/tools/publish/call", "vic-token", `{"n":1}`); status != 403 {
				t.Errorf("viewer calls: %d %v", status, body)
			}
			_, id := callAsked(t, h, "ed-token")
			listed := func(who string) int {
				status, body, _ := do(t, h, "GET", "/api/v1/approvals", who+"-token", "")
				if status != 200 {
					return -status
				}
				l, _ := body["approvals"].([]any)
				return len(l)
			}
			wantEd := 1
			if by == runs.ByAdmins {
				wantEd = 0
			}
			if got := [4]int{listed("ed"), listed("eve"), listed("vic"), listed("ada")}; got != [4]int{wantEd, 0, -403, 1} {
				t.Errorf("listed (ed, eve, vic, ada) = %v", got)
			}
			decide := func(who string) (int, string) {
				status, body, _ := do(t, h, "POST", "/api/v1/approvals/"+id, who+"-token", `{"decision":"approve"}`)
				return status, errCode(body)
			}
			for _, c := range []struct {
				who    string
				status int
				code   string
			}{{"vic", 403, "forbidden"}, {"eve", 404, "not_found"}} {
				if status, code := decide(c.who); status != c.status || code != c.code {
					t.Errorf("%s decides: %d %s, want %d %s", c.who, status, code, c.status, c.code)
				}
			}
			if by == runs.ByAdmins {
				if status, code := decide("ed"); status != 403 || code != "self_approval" {
					t.Errorf("the caller under by=admins: %d %s", status, code)
				}
				if status, code := decide("ada"); status != 200 {
					t.Errorf("admin: %d %s", status, code)
				}
			} else if status, code := decide("ed"); status != 200 {
				t.Errorf("the caller: %d %s", status, code)
			}
			if status, code := decide("ada"); status != 409 || code != "already_decided" {
				t.Errorf("after the decision: %d %s", status, code)
			}
			// Unknown approvals, and no token at all.
			if status, _, _ := do(t, h, "POST", "/api/v1/approvals/anope", "ada-token", `{"decision":"approve"}`); status != 404 {
				t.Errorf("unknown: %d", status)
			}
			if status, _, _ := do(t, h, "GET", "/api/v1/approvals", "", ""); status != 401 {
				t.Errorf("no token: %d", status)
			}
		})
	}
}

// TestApprovalsByApproverToken: under by = "approvers" the token that
// started a run gets 403 self_approval; an approver-only token (a viewer
// with approver = true) lists and decides it; another editor still gets
// not_found. Under by = "caller" the caller decides its own run.
func TestApprovalsByApproverToken(t *testing.T) {
	toks := auth.New([]config.Token{
		{Name: "agent", SHA256: sum("agent-token"), Role: "editor"},
		{Name: "eve", SHA256: sum("eve-token"), Role: "editor"},
		{Name: "alice", SHA256: sum("alice-token"), Role: "viewer", Approver: true},
	})
	h := newApprovalsHost(t, Options{Tokens: toks})
	h.runs.SetApprovals(runs.ApprovalPolicy{By: runs.ByApprovers})
	run, id := callAsked(t, h, "agent-token")
	decide := func(who string) (int, string) {
		status, body, _ := do(t, h, "POST", "/api/v1/approvals/"+id, who+"-token", `{"decision":"approve"}`)
		return status, errCode(body)
	}
	if status, code := decide("agent"); status != 403 || code != "self_approval" {
		t.Errorf("the run's own token decides: %d %s", status, code)
	}
	if status, code := decide("eve"); status != 404 || code != "not_found" {
		t.Errorf("another editor decides: %d %s", status, code)
	}
	status, body, _ := do(t, h, "GET", "/api/v1/approvals", "alice-token", "")
	if l, _ := body["approvals"].([]any); status != 200 || len(l) != 1 {
		t.Fatalf("the approver lists: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/publish/call", "alice-token", `{"n":1}`); status != 403 {
		t.Errorf("an approver-only token calls: %d %v", status, body)
	}
	if status, code := decide("alice"); status != 200 {
		t.Fatalf("the approver decides: %d %s", status, code)
	}
	r, _ := h.runs.Get(run)
	if last := waitEnd(t, r); last.Type != "result" {
		t.Errorf("the approved run ended %+v", last)
	}
	h.runs.SetApprovals(runs.ApprovalPolicy{By: runs.ByCaller})
	_, id = callAsked(t, h, "agent-token")
	if status, code := decide("agent"); status != 200 {
		t.Errorf("by caller, the caller decides: %d %s", status, code)
	}
}

// TestApprovalsOverTheWebsocket: approval_required reaches the caller in
// seq; approve decides; the run ends with its result. A bad approve frame
// is a bad_frame; another editor's approve is refused.
func TestApprovalsOverTheWebsocket(t *testing.T) {
	h := newApprovalsHost(t, Options{Tokens: tokens("ed", "editor", "eve", "editor")})
	ed := h.dial(t, bearer("ed"))
	ed.send(map[string]any{"type": "call", "id": "c1", "tool": "publish", "args": map[string]any{"n": 1}})
	var asked frame
	for i := 0; ; i++ {
		f := ed.read(10 * time.Second)
		if f.Type == "approval_required" {
			asked = f
			break
		}
		if i > 5 || f.Terminal() {
			t.Fatalf("no approval_required: %+v", f)
		}
	}
	if asked.ID != "c1" || asked.Seq == nil || *asked.Seq != 1 || asked.Approval == "" || string(asked.Args) != `{"n":1}` || asked.Tool != "publish" {
		t.Fatalf("approval_required: %+v", asked)
	}
	ed.send(map[string]any{"type": "approve", "id": "x", "approval": asked.Approval, "decision": "maybe"})
	if f := ed.read(5 * time.Second); f.Error == nil || f.Error.Code != "bad_frame" {
		t.Errorf("bad decision: %+v", f)
	}
	eve := h.dial(t, bearer("eve"))
	eve.send(map[string]any{"type": "approve", "id": "e", "approval": asked.Approval, "decision": "approve"})
	if f := eve.read(5 * time.Second); f.Error == nil || f.Error.Code != "not_found" {
		t.Errorf("eve approves: %+v", f)
	}
	ed.send(map[string]any{"type": "approve", "id": "d", "approval": asked.Approval, "decision": "approve"})
	var decided, result bool
	for !decided || !result {
		f := ed.read(10 * time.Second)
		switch {
		case f.Type == "decided":
			decided = f.ID == "d" && f.Approval == asked.Approval
		case f.Type == "result":
			result = f.ID == "c1" && string(f.Result) == `{"lines":1}`
		case f.Type == "error":
			t.Fatalf("%+v %+v", f, f.Error)
		}
	}
}

// TestAnApprovalSurvivesTheCallerReconnecting: the caller goes away; a new
// connection attaches, sees approval_required again, approves, and the
// run finishes.
func TestAnApprovalSurvivesTheCallerReconnecting(t *testing.T) {
	h := newApprovalsHost(t, Options{Tokens: tokens("ed", "editor")})
	ed := h.dial(t, bearer("ed"))
	ed.send(map[string]any{"type": "call", "id": "c1", "tool": "publish", "args": map[string]any{"n": 1}})
	var run string
	for run == "" {
		if f := ed.read(10 * time.Second); f.Type == "approval_required" {
			run = f.Run
		}
	}
	_ = ed.conn.Close()
	ed2 := h.dial(t, bearer("ed"))
	ed2.send(map[string]any{"type": "attach", "id": "a", "run": run})
	var approval string
	for approval == "" {
		f := ed2.read(10 * time.Second)
		if f.Type == "approval_required" {
			approval = f.Approval
		}
		if f.Terminal() {
			t.Fatalf("ended before the approval: %+v", f)
		}
	}
	ed2.send(map[string]any{"type": "approve", "id": "d", "approval": approval, "decision": "approve"})
	for {
		f := ed2.read(10 * time.Second)
		if f.Type == "result" && f.ID == "a" {
			break
		}
		if f.Type == "error" {
			t.Fatalf("%+v", f.Error)
		}
	}
}

// TestApprovalsWhileTheStoreIsDown: with approvals kept in a PostgreSQL
// store whose server then stops, listing and deciding answer 503
// store_unavailable in the caller's words (not the database's address);
// once the server is back the approval waiting is decided and its run
// runs.
func TestApprovalsWhileTheStoreIsDown(t *testing.T) {
	ctx := context.Background()
	st, srv := sessionstest.Postgres(t)
	h := newApprovalsHost(t, Options{Tokens: tokens("ed", "editor")})
	h.runs.SetApprovalStore(st.Approvals(), st.Clock())
	run, id := callAsked(t, h, "ed-token")
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	const said = "the store's database can't be reached; try again shortly"
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/approvals", ""},
		{"POST", "/api/v1/approvals/" + id, `{"decision":"approve"}`},
	} {
		status, body, header := do(t, h, c.method, c.path, "ed-token", c.body)
		if e, _ := body["error"].(map[string]any); status != http.StatusServiceUnavailable || errCode(body) != "store_unavailable" ||
			e["message"] != said || header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the store down: %d %v", c.method, c.path, status, body)
		}
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/approvals/"+id, "ed-token", `{"decision":"approve"}`); status != 200 {
		t.Fatalf("approve once the store is back: %d %v", status, body)
	}
	r, _ := h.runs.Get(run)
	if last := waitEnd(t, r); last.Type != "result" {
		t.Errorf("the run ended %+v", last)
	}
}
