package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
)

func tokens(entries ...string) *auth.Tokens {
	var list []config.Token
	for i := 0; i+1 < len(entries); i += 2 {
		list = append(list, config.Token{Name: entries[i], SHA256: sum(entries[i] + "-token"), Role: entries[i+1]})
	}
	return auth.New(list)
}

func bearer(name string) http.Header {
	return http.Header{"Authorization": {"Bearer " + name + "-token"}}
}

// expectClosing reads the frame that says why the host closes the
// connection, then the close frame: policy violation, with the code as
// its reason.
func (c *wsClient) expectClosing(code, mentions string) {
	c.t.Helper()
	c.expectClose(code, mentions, websocket.ClosePolicyViolation)
}

// expectClose reads the closing frame (after any run's events queued
// before it), then the close frame: closeCode, with the code as its
// reason.
func (c *wsClient) expectClose(code, mentions string, closeCode int) {
	c.t.Helper()
	f := c.read(5 * time.Second)
	for f.Type != "closing" && f.Seq != nil {
		f = c.read(5 * time.Second) // events queued before it
	}
	if f.Type != "closing" || f.Error == nil || f.Error.Code != code || !strings.Contains(f.Error.Message, mentions) {
		c.t.Fatalf("got %+v (error %+v); want a closing frame with code %s mentioning %q", f, f.Error, code, mentions)
	}
	_, err := c.tryRead(5 * time.Second)
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != closeCode || ce.Text != code {
		c.t.Fatalf("after the closing frame: %v; want a close frame %d %q", err, closeCode, code)
	}
}

// TestSetTokensClosesTheWebsocketsOfRevokedTokens: a token removed, one
// lowered in role and one signed in by hello are told why and closed; a
// token whose role was raised goes on in its new role; a connection not
// yet signed in signs in under the new tokens. The runs of the closed
// connections go on, and an admin follows and cancels them; the removed
// token gets 401 from then on.
func TestSetTokensClosesTheWebsocketsOfRevokedTokens(t *testing.T) {
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor", "ed2", "editor", "bro", "editor", "vic", "viewer", "ada", "admin", "new", "admin")})

	ed := h.dial(t, bearer("ed"))
	ed.send(map[string]any{"type": "call", "id": "c", "tool": "block"})
	started := ed.read(5 * time.Second)
	if started.Type != "started" {
		t.Fatalf("ed's call: %+v", started)
	}
	ed2 := h.dial(t, bearer("ed2"))
	bro := h.dial(t, nil)
	bro.send(map[string]any{"type": "hello", "id": "h", "token": "bro-token"})
	if f := bro.read(5 * time.Second); f.hello.Principal != "bro" {
		t.Fatalf("bro's hello: %+v", f)
	}
	vic := h.dial(t, bearer("vic"))
	later := h.dial(t, nil) // not signed in yet

	h.api.SetTokens(tokens("ed2", "viewer", "vic", "admin", "ada", "admin", "later", "editor"))

	ed.expectClosing("token_revoked", `the token "ed" was removed from the config`)
	bro.expectClosing("token_revoked", `the token "bro" was removed`)
	ed2.expectClosing("token_downgraded", `the role of the token "ed2" was lowered from editor to viewer`)

	// vic, now an admin, goes on at once, and may call.
	vic.send(map[string]any{"type": "call", "id": "v", "tool": "lines", "args": map[string]any{"n": 1}})
	if frames, _ := vic.follow("v", 5*time.Second); frames[len(frames)-1].Type != "result" {
		t.Fatalf("vic's call after its role was raised: %+v", frames)
	}
	later.send(map[string]any{"type": "hello", "id": "h", "token": "later-token"})
	if f := later.read(5 * time.Second); f.hello.Principal != "later" || f.hello.Role != "editor" {
		t.Fatalf("a sign-in after the change: %+v", f)
	}

	// The removed token is refused everywhere from now on.
	if status, _, _ := do(t, h, "GET", "/api/v1/tools", "ed-token", ""); status != 401 {
		t.Errorf("ed lists tools: %d, want 401", status)
	}
	if _, resp, err := websocket.DefaultDialer.Dial(h.url, bearer("ed")); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("ed opens a websocket: %v; want 401", err)
	}
	if status, _, _ := do(t, h, "GET", "/api/v1/runs/"+started.Run, "ed-token", ""); status != 401 {
		t.Errorf("ed reads its run: %d, want 401", status)
	}

	// ed's run goes on; an admin follows it and cancels it.
	ada := h.dial(t, bearer("ada"))
	ada.send(map[string]any{"type": "attach", "id": "a", "run": started.Run})
	if f := ada.read(5 * time.Second); f.Type != "started" || f.Run != started.Run {
		t.Fatalf("the admin attaches to ed's run: %+v", f)
	}
	ada.send(map[string]any{"type": "cancel", "run": started.Run})
	if f := ada.read(5 * time.Second); f.Type != "error" || f.Error.Code != "cancelled" || f.Seq == nil {
		t.Fatalf("the admin cancels ed's run: %+v", f)
	}
}

// TestTokensTurnedOnOrOffCloseTheWebsocketsOfTheOldWay: adding the first
// tokens closes the connections of local callers; removing every token
// closes those signed in with one.
func TestTokensTurnedOnOrOffCloseTheWebsocketsOfTheOldWay(t *testing.T) {
	h := newTestHost(t, Options{})
	local := h.dial(t, nil)
	local.send(map[string]any{"type": "ping", "id": "p"})
	if f := local.read(5 * time.Second); f.Type != "pong" {
		t.Fatalf("ping: %+v", f)
	}
	h.api.SetTokens(tokens("ada", "admin"))
	local.expectClosing("token_revoked", "this host now needs a token")
	if status, _, _ := do(t, h, "GET", "/api/v1/tools", "", ""); status != 401 {
		t.Errorf("a call without a token once tokens are on: %d, want 401", status)
	}

	ada := h.dial(t, bearer("ada"))
	h.api.SetTokens(auth.New(nil))
	ada.expectClosing("token_revoked", `the token "ada" was removed from the config, with every other`)
}

// TestAClosedConnectionActsOnNothingMore: frames a client sends after its
// token was removed are not acted on, even before the close reaches it.
func TestAClosedConnectionActsOnNothingMore(t *testing.T) {
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor")})
	ed := h.dial(t, bearer("ed"))
	h.api.SetTokens(tokens("ada", "admin"))
	// Sent at once, before reading the closing frame.
	_ = ed.conn.WriteJSON(map[string]any{"type": "call", "id": "c", "tool": "block"})
	ed.expectClosing("token_revoked", `"ed"`)
	if n := len(h.runs.List()); n != 0 {
		t.Errorf("%d runs were started after the token was removed", n)
	}
}

// TestTooManyRunsOverTheWebsocketAndHTTP: past the caller's limit a call
// is refused with too_many_runs (429 over HTTP), and taken again once a
// run has ended.
func TestTooManyRunsOverTheWebsocketAndHTTP(t *testing.T) {
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor")})
	h.runs.SetCallers(func(p string) runs.Caller {
		return runs.Caller{MaxRunning: 2, Who: fmt.Sprintf("the token %q", p), Setting: "its max_running"}
	})
	ed := h.dial(t, bearer("ed"))
	for _, id := range []string{"a", "b"} {
		ed.send(map[string]any{"type": "call", "id": id, "tool": "block"})
		if f := ed.read(5 * time.Second); f.Type != "started" {
			t.Fatalf("call %s: %+v", id, f)
		}
	}
	const want = `the token "ed" already has 2 runs going (its max_running); wait for one to finish or cancel one`
	ed.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": 1}})
	if f := ed.read(5 * time.Second); f.Type != "error" || f.ID != "c" || f.Error.Code != "too_many_runs" || f.Error.Message != want {
		t.Fatalf("a third call over the websocket: %+v %+v", f, f.Error)
	}
	status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`)
	if e, _ := body["error"].(map[string]any); status != http.StatusTooManyRequests || e["code"] != "too_many_runs" || e["message"] != want {
		t.Fatalf("a third call over HTTP: %d %v", status, body)
	}

	ed.send(map[string]any{"type": "cancel", "id": "a"})
	if f := ed.read(5 * time.Second); f.Type != "error" || f.Error.Code != "cancelled" {
		t.Fatalf("cancelling a: %+v", f)
	}
	ed.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": 1}})
	if frames, _ := ed.follow("c", 5*time.Second); frames[len(frames)-1].Type != "result" {
		t.Fatalf("the call after one ended: %+v", frames)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`); status != 200 {
		t.Fatalf("the HTTP call after one ended: %d %v", status, body)
	}
}

// TestMetricsNeedsWhatEveryRouteNeeds: with no tokens, callers on this
// machine only, at a local name; with tokens, a token of any role.
func TestMetricsNeedsWhatEveryRouteNeeds(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "toolhost_up 1\n") })
	local := New(Options{Registry: tools.NewRegistry(), Metrics: metrics})
	for _, c := range []struct {
		remote, host string
		want         int
	}{
		{"10.0.0.7:5000", "127.0.0.1:8080", 403},
		{"[2001:db8::1]:5000", "[::1]:8080", 403},
		{"127.0.0.1:5000", "evil.example:8080", 403},
		{"127.0.0.1:5000", "localhost:8080", 200},
	} {
		for _, path := range []string{"/api/v1/tools", "/metrics"} {
			req := httptest.NewRequest("GET", path, nil)
			req.RemoteAddr, req.Host = c.remote, c.host
			w := httptest.NewRecorder()
			local.ServeHTTP(w, req)
			if w.Code != c.want {
				t.Errorf("no tokens: GET %s from %s for Host %s: %d, want %d", path, c.remote, c.host, w.Code, c.want)
			}
		}
	}
	withTokens := New(Options{Registry: tools.NewRegistry(), Metrics: metrics, Tokens: tokens("vic", "viewer")})
	for token, want := range map[string]int{"": 401, "nope": 401, "vic-token": 200} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.RemoteAddr = "10.0.0.7:5000"
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		withTokens.ServeHTTP(w, req)
		if w.Code != want || (want == 200 && w.Body.String() != "toolhost_up 1\n") {
			t.Errorf("with tokens: GET /metrics with token %q: %d %q, want %d", token, w.Code, w.Body.String(), want)
		}
	}
}

// TestAnHTTPCallWaitingWhenItsTokenIsRemovedGetsNoMore: the call waiting
// for its run is answered 401 token_revoked at once; the run goes on.
func TestAnHTTPCallWaitingWhenItsTokenIsRemovedGetsNoMore(t *testing.T) {
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor")})
	type answer struct {
		status int
		body   map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		status, body, _ := do(t, h, "POST", "/api/v1/tools/block/call", "ed-token", `{}`)
		done <- answer{status, body}
	}()
	var run *runs.Run
	for run == nil {
		if list := h.runs.List(); len(list) == 1 {
			run = list[0]
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	h.api.SetTokens(tokens("ada", "admin"))
	select {
	case a := <-done:
		if e, _ := a.body["error"].(map[string]any); a.status != 401 || e["code"] != "token_revoked" || !strings.Contains(e["message"].(string), `"ed" was removed`) {
			t.Fatalf("the waiting call: %d %v; want 401 token_revoked", a.status, a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call of a removed token was still waiting")
	}
	if run.Done() {
		t.Fatal("the run of the removed token was stopped; it should go on for an admin to read")
	}
	run.Cancel()
}
