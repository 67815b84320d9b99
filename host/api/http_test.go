package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/tools"
)

func do(t *testing.T, h *testHost, method, path, token, body string, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestCallEndpointStatuses(t *testing.T) {
	h := newTestHost(t, Options{})
	cases := []struct {
		tool, args string
		status     int
		code       string
	}{
		{"lines", `{"n":2}`, 200, ""},
		{"fail", `{}`, 422, "no_luck"},
		{"lines", `{"n":"two"}`, 400, "bad_args"},
		{"nope", `{}`, 404, "unknown_tool"},
		{"ghost", `{}`, 503, "plugin_unavailable"},
		{"lines", strings.Repeat(" ", maxBody+1), 413, "too_large"},
	}
	for _, c := range cases {
		status, body, _ := do(t, h, "POST", "/api/v1/tools/"+c.tool+"/call", "", c.args)
		if status != c.status || errCode(body) != c.code {
			t.Errorf("%s %s: %d %v; want %d %q", c.tool, c.args[:min(len(c.args), 20)], status, body, c.status, c.code)
		}
	}
	status, body, _ := do(t, h, "POST", "/api/v1/tools/fail/call", "", `{}`)
	if status != 422 || body["printed"] != "trying" || body["run"] == nil {
		t.Errorf("a run error: %d %v", status, body)
	}
}

func TestRunRecord(t *testing.T) {
	h := newTestHost(t, Options{})
	_, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "", `{"n":2,"stderr":true}`, "Idempotency-Key", "k-9", "Toolhost-Session", "conv-9")
	run := body["run"].(string)
	status, rec, _ := do(t, h, "GET", "/api/v1/runs/"+run, "", "")
	if status != 200 || rec["principal"] != "local" || rec["session"] != "conv-9" || rec["idempotency_key"] != "k-9" ||
		rec["done"] != true || rec["stderr"] != "warning 0\nwarning 1\n" || rec["result"] == nil || rec["last_seq"] != 6.0 {
		t.Fatalf("run record: %d %v", status, rec)
	}
	if events, _ := rec["events"].([]any); len(events) != 7 {
		t.Errorf("the record has %d events, want 7", len(events))
	}
	if _, rec, _ := do(t, h, "GET", "/api/v1/runs/"+run+"?events=false", "", ""); rec["events"] != nil || rec["stdout"] == "" {
		t.Errorf("?events=false: %v", rec)
	}
	if status, rec, _ := do(t, h, "GET", "/api/v1/runs/rnope", "", ""); status != 404 || errCode(rec) != "unknown_run" {
		t.Errorf("an unknown run: %d %v", status, rec)
	}
}

func TestHTTPTokens(t *testing.T) {
	h := newTestHost(t, Options{Tokens: auth.New([]config.Token{
		{Name: "ed", SHA256: sum("ed-token"), Role: "editor"},
		{Name: "ed2", SHA256: sum("ed2-token"), Role: "editor"},
		{Name: "vic", SHA256: sum("vic-token"), Role: "viewer"},
	})})
	for _, tok := range []string{"", "nope"} {
		status, body, header := do(t, h, "GET", "/api/v1/tools", tok, "")
		if status != 401 || errCode(body) != "unauthorized" || body["tools"] != nil || !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("token %q: %d %v", tok, status, body)
		}
	}
	if status, body, _ := do(t, h, "GET", "/api/v1/tools", "vic-token", ""); status != 200 || len(body["tools"].([]any)) != len(fakeTools()) {
		t.Errorf("a viewer lists tools: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "vic-token", `{"n":1}`); status != 403 || errCode(body) != "forbidden" {
		t.Errorf("a viewer calls: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/check", "vic-token", `name = "x"`); status != 403 || errCode(body) != "forbidden" {
		t.Errorf("a viewer checks a tool: %d %v", status, body)
	}
	status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`)
	if status != 200 {
		t.Fatalf("an editor calls: %d %v", status, body)
	}
	run := "/api/v1/runs/" + body["run"].(string)
	if status, rec, _ := do(t, h, "GET", run, "ed-token", ""); status != 200 || rec["principal"] != "ed" {
		t.Errorf("the owner reads the run: %d %v", status, rec)
	}
	for _, tok := range []string{"ed2-token", "vic-token"} {
		if status, _, _ := do(t, h, "GET", run, tok, ""); status != 403 {
			t.Errorf("%s reads another's run: %d", tok, status)
		}
	}
	if status, _, _ := do(t, h, "GET", "/healthz", "", ""); status != 200 {
		t.Errorf("/healthz without a token: %d", status)
	}
}

func TestWithoutTokensOnlyLoopbackCallersAreServed(t *testing.T) {
	s := New(Options{Registry: tools.NewRegistry()})
	for addr, want := range map[string]int{"10.0.0.7:5000": 403, "[2001:db8::1]:5000": 403, "127.0.0.1:5000": 200, "[::1]:5000": 200} {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.RemoteAddr = addr
		req.Host = "127.0.0.1:8080"
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("a caller at %s: %d, want %d", addr, w.Code, want)
		}
	}
	// A page of another site that rebinds its name to 127.0.0.1 is
	// refused: the Host is not a local name.
	for host, want := range map[string]int{"evil.example:8080": 403, "localhost:8080": 200, "app.localhost": 200, "[::1]:8080": 200, "127.0.0.1": 200, "127.0.0.1.nip.io:8080": 403} {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.RemoteAddr = "127.0.0.1:5000"
		req.Host = host
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
}

func TestRequestsFromOtherSitesAreRefused(t *testing.T) {
	h := newTestHost(t, Options{AllowedOrigins: []string{"https://chat.example.com"}})
	for origin, want := range map[string]int{"": 200, "https://evil.example": 403, "https://chat.example.com": 200, "null": 403, h.srv.URL: 200} {
		status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "", `{"n":1}`, "Origin", origin, "Content-Type", "text/plain")
		if status != want {
			t.Errorf("a call from origin %q: %d %v, want %d", origin, status, body, want)
		}
	}
}

func TestUnknownPathsAndMethods(t *testing.T) {
	h := newTestHost(t, Options{UI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "the ui") })})
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/", 200}, {"GET", "/app.js", 200}, {"POST", "/", 404}, {"GET", "/api/v1/nope", 404}, {"DELETE", "/api/v1/tools", 404}} {
		if status, _, _ := do(t, h, c.method, c.path, "", ""); status != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, status, c.status)
		}
	}
}

// TestDrainingHealthzSays503WhileCallsAreServed: once the host drains,
// /healthz answers 503 "draining" (a load balancer's check fails), and
// calls over HTTP and the websocket are served as before.
func TestDrainingHealthzSays503WhileCallsAreServed(t *testing.T) {
	h := newTestHost(t, Options{Version: "v-test", Reloads: func() (uint64, uint64) { return 3, 1 }})
	if status, body, _ := do(t, h, "GET", "/healthz", "", ""); status != 200 || body["status"] != "ok" {
		t.Fatalf("/healthz before draining: %d %v", status, body)
	}
	h.api.Drain()
	status, body, _ := do(t, h, "GET", "/healthz", "", "")
	if status != http.StatusServiceUnavailable || body["status"] != "draining" {
		t.Errorf("/healthz while draining: %d %v, want 503 and status draining", status, body)
	}
	// `toolhost reload` reads the counts; a load balancer may show the version.
	if body["version"] != "v-test" || body["reloads"] != float64(3) || body["reloads_refused"] != float64(1) {
		t.Errorf("/healthz while draining lost its fields: %v", body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "", `{"n":1}`); status != 200 {
		t.Errorf("an HTTP call while draining: %d %v", status, body)
	}
	c := h.dial(t, nil)
	c.send(map[string]any{"type": "call", "id": "c1", "tool": "lines", "args": map[string]any{"n": 1}})
	if frames, _ := c.follow("c1", 10*time.Second); frames[len(frames)-1].Type != "result" {
		t.Errorf("a websocket call while draining ended with %+v", frames[len(frames)-1])
	}
}
