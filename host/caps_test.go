package host

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/sessions/sessionstest"
)

// metricLine is the line of name{labels} in the host's /metrics, as the
// admin reads it; "" when there is none.
func metricLine(t *testing.T, th *testHost, series string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", th.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer ada-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, series+" ") {
			return l
		}
	}
	return ""
}

// TestSessionCapsInTheHost: the caps of [sessions] from the config file
// refuse a new session by a call (before it runs) and by an upload (429
// both), and
// each refusal is counted in /metrics by its cap. A reload that lowers
// the caps refuses new sessions only: the sessions already there keep
// their runs and uploads.
func TestSessionCapsInTheHost(t *testing.T) {
	th := startSessionsHost(t, sessionsPluginHead(t), filepath.Join(t.TempDir(), "state"), sessionstest.New(),
		"max_sessions_per_principal = 2\nmax_sessions = 3\n")
	for _, series := range []string{"sessions.max_sessions_per_principal", "sessions.max_sessions", "sessions.max_transfers_per_principal", "sessions.max_transfers"} {
		want := fmt.Sprintf(`toolhost_cap_refusals_total{cap=%q} 0`, series)
		if got := metricLine(t, th, fmt.Sprintf(`toolhost_cap_refusals_total{cap=%q}`, series)); got != want {
			t.Errorf("before any refusal: %q, want %q", got, want)
		}
	}
	run := func(token, session string) (int, map[string]any) {
		t.Helper()
		return th.do(t, "POST", "/api/v1/tools/run_python/call?session="+session, token, `{"code":"exit 0"}`)
	}
	upload := func(token, session string) (int, map[string]any) {
		t.Helper()
		return th.do(t, "PUT", "/api/v1/sessions/"+session+"/files/a.txt", token, "a")
	}
	for _, s := range []string{"s1", "s2"} {
		if status, body := run("ed-token", s); status != 200 {
			t.Fatalf("ed's %s: %d %v", s, status, body)
		}
	}
	// Refused before it runs: 429, no run.
	status, body := run("ed-token", "s3")
	e, _ := body["error"].(map[string]any)
	if status != 429 || body["run"] != nil || e["code"] != "too_many_sessions" || !strings.Contains(fmt.Sprint(e["message"]), `the token "ed" already has 2 sessions`) ||
		!strings.Contains(fmt.Sprint(e["message"]), "max_sessions_per_principal in "+th.file) {
		t.Errorf("ed's third session by a run: %d %v", status, body)
	}
	if status, body := upload("ed-token", "s3"); status != 429 || errCodeOf(body) != "too_many_sessions" {
		t.Errorf("ed's third session by an upload: %d %v", status, body)
	}
	if status, body := upload("eve-token", "e1"); status != 200 {
		t.Fatalf("eve's first session: %d %v", status, body)
	}
	if status, body := upload("ada-token", "a1"); status != 429 || !strings.Contains(fmt.Sprint(body), "this host already keeps 3 sessions") {
		t.Errorf("ada's session past the host's cap: %d %v", status, body)
	}
	if got := metricLine(t, th, `toolhost_cap_refusals_total{cap="sessions.max_sessions_per_principal"}`); !strings.HasSuffix(got, " 2") {
		t.Errorf("refusals by max_sessions_per_principal: %q, want 2", got)
	}
	if got := metricLine(t, th, `toolhost_cap_refusals_total{cap="sessions.max_sessions"}`); !strings.HasSuffix(got, " 1") {
		t.Errorf("refusals by max_sessions: %q, want 1", got)
	}

	// A reload lowers both caps below what is there.
	text, err := os.ReadFile(th.file)
	if err != nil {
		t.Fatal(err)
	}
	lowered := strings.Replace(strings.Replace(string(text), "max_sessions_per_principal = 2", "max_sessions_per_principal = 1", 1), "max_sessions = 3", "max_sessions = 2", 1)
	if lowered == string(text) {
		t.Fatal("the caps are not in the test's config")
	}
	cfg := loadConfig(t, th.dir, lowered)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pr := th.h.Reload(ctx, cfg); !pr.Empty() {
		t.Fatalf("the reload had problems: %+v", pr)
	}
	for _, c := range []struct{ token, session string }{{"ed-token", "s1"}, {"ed-token", "s2"}, {"eve-token", "e1"}} {
		if status, body := run(c.token, c.session); status != 200 {
			t.Errorf("a run in %s's %s after the reload: %d %v", c.token, c.session, status, body)
		}
		if status, body := upload(c.token, c.session); status != 200 {
			t.Errorf("an upload to %s's %s after the reload: %d %v", c.token, c.session, status, body)
		}
	}
	if status, body := upload("eve-token", "e2"); status != 429 || !strings.Contains(fmt.Sprint(body), `the token "eve" already has 1 sessions`) {
		t.Errorf("eve's second session after the reload: %d %v", status, body)
	}
	if status, body := upload("ada-token", "a1"); status != 429 || !strings.Contains(fmt.Sprint(body), "this host already keeps 3 sessions, the most it may ([sessions] max_sessions") {
		t.Errorf("ada's first session after the reload: %d %v", status, body)
	}
	if got := metricLine(t, th, `toolhost_cap_refusals_total{cap="sessions.max_sessions"}`); !strings.HasSuffix(got, " 2") {
		t.Errorf("refusals by max_sessions after the reload: %q, want 2", got)
	}
}

func errCodeOf(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}
