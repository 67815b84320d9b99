package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer answers GET /n/{id} and counts the requests it got.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path": %q, "count": %d}`, r.URL.Path, c)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func countTool(base string) string {
	return fmt.Sprintf(`name = "hit"
description = "Hit the counting server."
effect = "read"

[[params]]
name = "id"
kind = "text"
required = true

[run]
type = "http"
url = "%s/n/{{id}}"
`, base)
}

// keyedCall posts a call with an Idempotency-Key and decodes the answer.
func keyedCall(t *testing.T, h *Host, key, args string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.URL("/api/v1/tools/hit/call"), strings.NewReader(args))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("the answer isn't JSON: %v\n%s", err, b)
	}
	return resp.StatusCode, m
}

func errorOf(m map[string]any) (code, message string) {
	e, _ := m["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

// TestIdempotencyKeysThroughTheHost: through the real host and http
// plugin, a call sent twice with its key (over HTTP, then the websocket)
// reaches the server once; ten at once reach it once; the key with other
// arguments is a 409 naming it; and a host restarted in the same folder
// answers a retry from the store without sending the request again.
func TestIdempotencyKeysThroughTheHost(t *testing.T) {
	srv, hits := countingServer(t)
	dir, addr := t.TempDir(), freePort(t)
	spec := hostSpec{Config: "[http]\nallow_private = true\n", Tools: map[string]string{"hit.toml": countTool(srv.URL)}}
	h := startHostIn(t, dir, addr, spec)

	status, first := keyedCall(t, h, "order-1", `{"id":"a"}`)
	if status != 200 || hits.Load() != 1 {
		t.Fatalf("first call: %d %v, %d requests", status, first, hits.Load())
	}
	status, again := keyedCall(t, h, "order-1", `{ "id" : "a" }`)
	if status != 200 || again["run"] != first["run"] || fmt.Sprint(again["result"]) != fmt.Sprint(first["result"]) {
		t.Errorf("the retry got %d %v; want the first run %v", status, again, first)
	}
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "w1", "tool": "hit", "args": map[string]any{"id": "a"}, "idempotency_key": "order-1"})
	frames := ws.UntilEnd("w1", 30*time.Second)
	if last := frames[len(frames)-1]; last.Str("type") != "result" || last.Str("id") != "w1" || last.Str("run") != first["run"] {
		t.Errorf("the websocket retry got %v", frames)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the server got %d requests for one key; want 1", n)
	}

	status, conflict := keyedCall(t, h, "order-1", `{"id":"b"}`)
	if code, msg := errorOf(conflict); status != 409 || code != "idempotency_conflict" || !strings.Contains(msg, `"order-1"`) {
		t.Errorf("another call under the key got %d %v; want 409 idempotency_conflict naming the key", status, conflict)
	}

	// Ten at once with a new key: one request.
	before := hits.Load()
	var wg sync.WaitGroup
	runs := make([]any, 10)
	for i := range runs {
		wg.Go(func() {
			status, m := keyedCall(t, h, "burst", `{"id":"c"}`)
			if status != 200 {
				t.Errorf("call %d: %d %v", i, status, m)
			}
			runs[i] = m["run"]
		})
	}
	wg.Wait()
	if n := hits.Load() - before; n != 1 {
		t.Errorf("ten calls with one key sent %d requests; want 1", n)
	}
	for _, r := range runs {
		if r != runs[0] {
			t.Errorf("the ten calls got runs %v; want one", runs)
			break
		}
	}

	// Without a key, each call runs.
	keyedCall(t, h, "", `{"id":"a"}`)
	keyedCall(t, h, "", `{"id":"a"}`)
	if n := hits.Load() - before; n != 3 {
		t.Errorf("two calls without a key sent %d requests; want 2", n-1)
	}

	h.Stop(t)
	h = startHostIn(t, dir, addr, spec)
	before = hits.Load()
	status, replayed := keyedCall(t, h, "order-1", `{"id":"a"}`)
	if status != 200 || replayed["run"] != first["run"] || fmt.Sprint(replayed["result"]) != fmt.Sprint(first["result"]) {
		t.Errorf("after a restart the retry got %d %v; want the recorded %v", status, replayed, first)
	}
	if n := hits.Load() - before; n != 0 {
		t.Errorf("after a restart the retry sent %d requests; want none", n)
	}
	status, conflict = keyedCall(t, h, "order-1", `{"id":"z"}`)
	if code, _ := errorOf(conflict); status != 409 || code != "idempotency_conflict" {
		t.Errorf("after a restart another call under the key got %d %v", status, conflict)
	}
}

// TestBudgetsThroughTheHost: with [runs] runs_per_hour_per_token = 2, the
// third call is refused with 429 budget before it reaches the server,
// GET /api/v1/me shows the use, and a restart does not reset it.
func TestBudgetsThroughTheHost(t *testing.T) {
	srv, hits := countingServer(t)
	dir, addr := t.TempDir(), freePort(t)
	spec := hostSpec{Config: "[runs]\nruns_per_hour_per_token = 2\n\n[http]\nallow_private = true\n", Tools: map[string]string{"hit.toml": countTool(srv.URL)}}
	h := startHostIn(t, dir, addr, spec)
	for i := range 2 {
		if status, m := keyedCall(t, h, "", `{"id":"a"}`); status != 200 {
			t.Fatalf("call %d: %d %v", i, status, m)
		}
	}
	status, refused := keyedCall(t, h, "", `{"id":"a"}`)
	if code, msg := errorOf(refused); status != 429 || code != "budget" || !strings.Contains(msg, "runs_per_hour") || !strings.Contains(msg, "2 runs of 2") || !strings.Contains(msg, "resets at") {
		t.Errorf("the third call got %d %v; want 429 budget", status, refused)
	}
	if hits.Load() != 2 {
		t.Errorf("the server got %d requests; want 2", hits.Load())
	}
	me := getMe(t, h)
	if me["principal"] != "local" || me["role"] != "admin" || me["max_running"] != 8.0 || me["going"] != 0.0 {
		t.Errorf("/api/v1/me = %v", me)
	}
	budgets, _ := me["budgets"].([]any)
	if len(budgets) != 2 || fmt.Sprint(budgets[0].(map[string]any)["used"]) != "2" || fmt.Sprint(budgets[0].(map[string]any)["limit"]) != "2" {
		t.Errorf("/api/v1/me budgets = %v", budgets)
	}
	h.Stop(t)
	h = startHostIn(t, dir, addr, spec)
	if status, m := keyedCall(t, h, "", `{"id":"a"}`); status != 429 {
		t.Errorf("after a restart the call got %d %v; want the budget kept", status, m)
	}
}

func getMe(t *testing.T, h *Host) map[string]any {
	t.Helper()
	resp, err := http.Get(h.URL("/api/v1/me"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/api/v1/me: %d %v", resp.StatusCode, err)
	}
	return m
}
