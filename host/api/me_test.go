package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/runs"
)

// TestBudgetsOverTheWebsocketAndHTTPAndMe: a token past its runs_per_hour
// is refused with budget over both, and GET /api/v1/me shows each caller
// its role, budgets, use and places.
func TestBudgetsOverTheWebsocketAndHTTPAndMe(t *testing.T) {
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor", "vic", "viewer")})
	h.runs.SetCallers(func(p string) runs.Caller {
		return runs.Caller{MaxRunning: 3, Who: fmt.Sprintf("the token %q", p), Setting: "its max_running"}
	})
	h.runs.SetBudgets(func(p string) runs.Budget {
		return runs.Budget{RunsPerHour: 2, Who: fmt.Sprintf("the token %q", p), RunsSetting: "its runs_per_hour"}
	})
	for range 2 {
		if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`); status != 200 {
			t.Fatalf("a call under the budget: %d %v", status, body)
		}
	}
	status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`)
	if status != http.StatusTooManyRequests || errCode(body) != "budget" {
		t.Fatalf("a call past the budget over HTTP: %d %v", status, body)
	}
	ed := h.dial(t, bearer("ed"))
	ed.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": 1}})
	if f := ed.read(5 * time.Second); f.Type != "error" || f.ID != "c" || f.Error.Code != "budget" {
		t.Fatalf("a call past the budget over the websocket: %+v %+v", f, f.Error)
	}

	status, me, _ := do(t, h, "GET", "/api/v1/me", "ed-token", "")
	budgets, _ := me["budgets"].([]any)
	if status != 200 || me["principal"] != "ed" || me["role"] != "editor" || me["max_running"] != 3.0 || me["going"] != 0.0 || len(budgets) != 2 {
		t.Fatalf("/api/v1/me of ed: %d %v", status, me)
	}
	if b := budgets[0].(map[string]any); b["name"] != "runs_per_hour" || b["limit"] != 2.0 || b["used"] != 2.0 || b["resets"] == nil {
		t.Errorf("ed's runs_per_hour: %v", b)
	}
	_, me, _ = do(t, h, "GET", "/api/v1/me", "vic-token", "")
	if b := me["budgets"].([]any)[0].(map[string]any); me["role"] != "viewer" || b["used"] != 0.0 || b["resets"] != nil {
		t.Errorf("/api/v1/me of vic: %v", me)
	}
	if status, _, _ := do(t, h, "GET", "/api/v1/me", "", ""); status != http.StatusUnauthorized {
		t.Errorf("/api/v1/me without a token: %d", status)
	}
}

// TestAKeyedRetryAttachesToTheRunGoingOn: a websocket call sent again
// with its key while its run goes on gets that run's events under the
// retry's own id; an HTTP retry waits for the same run; one end for all.
func TestAKeyedRetryAttachesToTheRunGoingOn(t *testing.T) {
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor")})
	ed := h.dial(t, bearer("ed"))
	ed.send(map[string]any{"type": "call", "id": "a", "tool": "block", "idempotency_key": "k"})
	first := ed.read(5 * time.Second)
	if first.Type != "started" || first.ID != "a" {
		t.Fatalf("first call: %+v", first)
	}
	ed.send(map[string]any{"type": "call", "id": "b", "tool": "block", "idempotency_key": "k"})
	again := ed.read(5 * time.Second)
	if again.Type != "started" || again.ID != "b" || again.Run != first.Run {
		t.Fatalf("the retry got %+v; want the run %s under the id b", again, first.Run)
	}
	type answer struct {
		status int
		body   map[string]any
	}
	httpRetry := make(chan answer, 1)
	go func() {
		status, body, _ := do(t, h, "POST", "/api/v1/tools/block/call", "ed-token", `{}`, "Idempotency-Key", "k")
		httpRetry <- answer{status, body}
	}()
	if n := len(h.runs.List()); n != 1 {
		t.Errorf("%d runs; want 1", n)
	}
	ed.send(map[string]any{"type": "cancel", "id": "a"})
	ends := map[string]string{}
	for len(ends) < 2 {
		f := ed.read(5 * time.Second)
		if f.Type == "error" && f.Run == first.Run {
			ends[f.ID] = f.Error.Code
		}
	}
	if ends["a"] != "cancelled" || ends["b"] != "cancelled" {
		t.Errorf("the ends: %v", ends)
	}
	got := <-httpRetry
	if got.status != http.StatusUnprocessableEntity || got.body["run"] != first.Run || errCode(got.body) != "cancelled" {
		t.Errorf("the HTTP retry got %d %v; want the run's end", got.status, got.body)
	}
}
