package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
	"github.com/toolhost/toolhost/host/tools"
)

// TestStoreUnavailableAnswers: while the store's PostgreSQL server is
// stopped, a call is refused with store_unavailable (HTTP 503 with
// Retry-After, and on the websocket) saying so in the caller's words, not
// the database's address; /api/v1/me too; /healthz answers 503 saying the
// store is unavailable, keeping the reload counts. Once the server is back
// the same calls work and /healthz answers 200, without a restart.
func TestStoreUnavailableAnswers(t *testing.T) {
	ctx := context.Background()
	st, srv := sessionstest.Postgres(t)
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor"), Store: st.Ping,
		Reloads: func() (uint64, uint64) { return 3, 1 }})
	h.runs.SetLedger(st, st.Clock())

	health := func(want int, store string) map[string]any {
		t.Helper()
		status, body, header := do(t, h, "GET", "/healthz", "", "")
		if status != want || body["store"] != store || body["reloads"] != 3.0 || body["reloads_refused"] != 1.0 {
			t.Fatalf("/healthz: %d %v; want %d with store %q and the reload counts", status, body, want, store)
		}
		if want == http.StatusServiceUnavailable && header.Get("Retry-After") == "" {
			t.Errorf("/healthz at 503 without Retry-After")
		}
		return body
	}
	health(http.StatusOK, "ok")
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`); status != http.StatusOK {
		t.Fatalf("a call with the store up: %d %v", status, body)
	}

	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	const said = "the store's database can't be reached; try again shortly"
	status, body, header := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`)
	if e, _ := body["error"].(map[string]any); status != http.StatusServiceUnavailable || errCode(body) != "store_unavailable" ||
		e["message"] != said || header.Get("Retry-After") == "" {
		t.Fatalf("a call over HTTP with the store down: %d %v (Retry-After %q)", status, body, header.Get("Retry-After"))
	}
	ed := h.dial(t, bearer("ed"))
	ed.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": 1}})
	if f := ed.read(10 * time.Second); f.Type != "error" || f.ID != "c" || f.Error.Code != "store_unavailable" || f.Error.Message != said {
		t.Fatalf("a call over the websocket with the store down: %+v %+v", f, f.Error)
	}
	if status, body, _ := do(t, h, "GET", "/api/v1/me", "ed-token", ""); status != http.StatusServiceUnavailable || errCode(body) != "store_unavailable" {
		t.Errorf("/api/v1/me with the store down: %d %v", status, body)
	}
	body = health(http.StatusServiceUnavailable, "unavailable")
	if body["status"] != "store_unavailable" || !strings.Contains(body["store_error"].(string), "can't be reached") {
		t.Errorf("/healthz with the store down says: %v", body)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	health(http.StatusOK, "ok")
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`); status != http.StatusOK {
		t.Fatalf("a call once the store is back: %d %v", status, body)
	}
}

// TestHealthTellsTheStoresErrorToThisMachineOnly: /healthz needs no token,
// so a caller elsewhere reads that the store is unavailable, not where its
// database is.
func TestHealthTellsTheStoresErrorToThisMachineOnly(t *testing.T) {
	const where = "reaching the database failed: the sessions database postgres://toolhost@db.internal:5432/toolhost can't be reached"
	down := func(context.Context) error { return &wrapped{msg: where, err: sessions.ErrUnavailable} }
	s := New(Options{Registry: tools.NewRegistry(), Store: down})
	for _, c := range []struct{ from, want string }{
		{"127.0.0.1:5000", where},
		{"203.0.113.7:5000", "the store's database can't be reached; try again shortly"},
	} {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.RemoteAddr = c.from
		rec := httptest.NewRecorder()
		s.health(rec, req)
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusServiceUnavailable || body["store_error"] != c.want {
			t.Errorf("from %s: %d %v; want store_error %q", c.from, rec.Code, body, c.want)
		}
	}
}

// wrapped is an error of its own words wrapping err.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
