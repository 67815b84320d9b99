package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
)

// httpPlugin builds the http kind's plugin once per test binary and returns
// its folder and pin.
var httpPlugin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolhost-host-test-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "toolhost-plugin-http"), "../plugins/http")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the http plugin: %v\n%s", err, out)
	}
	return dir, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if dir, err := httpPlugin(); err == nil {
		os.RemoveAll(dir)
	}
	if head, err := builtinPlugins(); err == nil {
		if _, rest, ok := strings.Cut(head, "dir = "); ok {
			if dir, err := strconv.Unquote(strings.SplitN(rest, "\n", 2)[0]); err == nil {
				os.RemoveAll(dir)
			}
		}
	}
	os.Exit(code)
}

func sum(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

// testHost is a Host serving over httptest, with its config file in a
// folder of its own.
type testHost struct {
	h    *Host
	srv  *httptest.Server
	dir  string
	file string
}

// loadConfig writes text as the toolhost.toml of dir and loads it.
func loadConfig(t *testing.T, dir, text string) *config.Config {
	t.Helper()
	file := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("the test config does not load:\n%v", err)
	}
	return cfg
}

// newTestHost starts a host on the config text; withPlugin adds the http
// kind's plugin, pinned.
func newTestHost(t *testing.T, text string, withPlugin bool) *testHost {
	t.Helper()
	dir := t.TempDir()
	if withPlugin {
		pdir, err := httpPlugin()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(pdir, "toolhost-plugin-http"))
		if err != nil {
			t.Fatal(err)
		}
		pin := sha256.Sum256(b)
		text = fmt.Sprintf("[plugins]\ndir = %q\n[plugins.sha256]\nhttp = %q\n[http]\nallow_private = true\n", pdir, hex.EncodeToString(pin[:])) + text
	}
	cfg := loadConfig(t, dir, text)
	h := New(cfg, hclog.NewNullLogger())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pr := h.Start(ctx); !pr.Empty() {
		t.Fatalf("the test host did not start cleanly: %+v", pr)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		h.Stop()
	})
	return &testHost{h: h, srv: srv, dir: dir, file: cfg.File}
}

// reload loads text as the new config and gives it to the host, as
// SIGHUP does.
func (th *testHost) reload(t *testing.T, text string) {
	t.Helper()
	old, err := os.ReadFile(th.file)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the plugin part the test host started with.
	head, _, _ := strings.Cut(string(old), "# --\n")
	cfg := loadConfig(t, th.dir, head+"# --\n"+text)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pr := th.h.Reload(ctx, cfg); !pr.Empty() {
		t.Fatalf("the reload had problems: %+v", pr)
	}
}

func (th *testHost) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, th.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

type wsFrame struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Run       string `json:"run"`
	Principal string `json:"principal"`
	Role      string `json:"role"`
	Error     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (th *testHost) dial(t *testing.T, token string) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(th.srv.URL, "http") + "/api/v1/ws"
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	conn, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dialling with %s: %v (status %d)", token, err, status)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func readFrame(t *testing.T, conn *websocket.Conn) wsFrame {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var f wsFrame
	if err := conn.ReadJSON(&f); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return f
}

// expectClosing reads the frame saying why the host closes the
// connection, then the close itself.
func expectClosing(t *testing.T, conn *websocket.Conn, code, mentions string) {
	t.Helper()
	f := readFrame(t, conn)
	if f.Type != "closing" || f.Error == nil || f.Error.Code != code || !strings.Contains(f.Error.Message, mentions) {
		t.Fatalf("got %+v (error %+v); want a closing frame with code %s mentioning %q", f, f.Error, code, mentions)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := conn.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != websocket.ClosePolicyViolation {
		t.Fatalf("after the closing frame: %v; want a close with code %d", err, websocket.ClosePolicyViolation)
	}
}

// slowUpstream answers /slow only when released.
func slowUpstream(t *testing.T) (url string, release func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(func() { release(); srv.Close() })
	return srv.URL, release
}

func tokensTOML(entries ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(entries); i += 2 {
		fmt.Fprintf(&b, "[[tokens]]\nname = %q\nsha256 = %q\nrole = %q\n", entries[i], sum(entries[i]+"-token"), entries[i+1])
	}
	return b.String()
}

// TestReloadRevokesAndDowngradesTokens: after a reload that removes a token,
// its next request is refused and its open websocket is told why and
// closed; a token whose role was lowered is closed too and may come back in
// its new role. Runs they started go on, and an admin reads them.
func TestReloadRevokesAndDowngradesTokens(t *testing.T) {
	upstream, release := slowUpstream(t)
	tool := fmt.Sprintf("[[tool]]\nname = \"slow\"\ndescription = \"Wait for the upstream.\"\n[tool.run]\ntype = \"http\"\nurl = \"%s/slow\"\n", upstream)
	th := newTestHost(t, "# --\n"+tool+tokensTOML("ed", "editor", "ed2", "editor", "ada", "admin"), true)

	if status, _ := th.do(t, "GET", "/api/v1/tools", "ed-token", ""); status != 200 {
		t.Fatalf("ed lists tools before the reload: %d", status)
	}
	ed := th.dial(t, "ed-token")
	ed.WriteJSON(map[string]any{"type": "call", "id": "c", "tool": "slow"})
	started := readFrame(t, ed)
	if started.Type != "started" {
		t.Fatalf("ed's call: %+v", started)
	}
	ed2 := th.dial(t, "ed2-token")

	// ed is removed, ed2 becomes a viewer.
	th.reload(t, tool+tokensTOML("ed2", "viewer", "ada", "admin"))

	expectClosing(t, ed, "token_revoked", `"ed"`)
	expectClosing(t, ed2, "token_downgraded", `"ed2"`)
	if status, body := th.do(t, "GET", "/api/v1/tools", "ed-token", ""); status != 401 {
		t.Errorf("ed lists tools after its token was removed: %d %v; want 401", status, body)
	}
	if status, _ := th.do(t, "POST", "/api/v1/tools/slow/call", "ed2-token", "{}"); status != 403 {
		t.Errorf("ed2, now a viewer, calls a tool: %d; want 403", status)
	}
	again := th.dial(t, "ed2-token")
	again.WriteJSON(map[string]any{"type": "hello", "id": "h"})
	if f := readFrame(t, again); f.Principal != "ed2" || f.Role != "viewer" {
		t.Errorf("ed2 comes back: %+v; want the viewer ed2", f)
	}

	// ed's run goes on; an admin reads it, and sees its end.
	path := "/api/v1/runs/" + started.Run
	if status, rec := th.do(t, "GET", path, "ada-token", ""); status != 200 || rec["done"] != false {
		t.Fatalf("the admin reads ed's run while it runs: %d %v", status, rec)
	}
	release()
	run, ok := th.h.runs.Get(started.Run)
	if !ok {
		t.Fatal("ed's run is gone")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if last, err := run.Wait(ctx); err != nil || last.Type != "result" {
		t.Fatalf("ed's run after the reload: %+v, %v; want its result", last, err)
	}
	if status, rec := th.do(t, "GET", path, "ada-token", ""); status != 200 || rec["done"] != true || rec["result"] == nil {
		t.Errorf("the admin reads ed's run after it ended: %d %v", status, rec)
	}
}

// TestMetricsHasTheGuardsOfEveryRoute: /metrics is refused to whom
// /api/v1/tools is refused.
func TestMetricsHasTheGuardsOfEveryRoute(t *testing.T) {
	local := New(loadConfig(t, t.TempDir(), ""), hclog.NewNullLogger())
	t.Cleanup(local.Stop)
	for _, c := range []struct {
		remote, host string
		want         int
	}{
		{"10.0.0.7:5000", "127.0.0.1:8080", 403},
		{"127.0.0.1:5000", "evil.example:8080", 403},
		{"127.0.0.1:5000", "127.0.0.1:8080", 200},
	} {
		for _, path := range []string{"/api/v1/tools", "/metrics"} {
			req := httptest.NewRequest("GET", path, nil)
			req.RemoteAddr, req.Host = c.remote, c.host
			w := httptest.NewRecorder()
			local.Handler().ServeHTTP(w, req)
			if w.Code != c.want {
				t.Errorf("no tokens: GET %s from %s for Host %s: %d, want %d", path, c.remote, c.host, w.Code, c.want)
			}
		}
	}

	withTokens := New(loadConfig(t, t.TempDir(), tokensTOML("vic", "viewer")), hclog.NewNullLogger())
	t.Cleanup(withTokens.Stop)
	for token, want := range map[string]int{"": 401, "nope": 401, "vic-token": 200} {
		for _, path := range []string{"/api/v1/tools", "/metrics"} {
			req := httptest.NewRequest("GET", path, nil)
			req.RemoteAddr = "10.0.0.7:5000"
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			w := httptest.NewRecorder()
			withTokens.Handler().ServeHTTP(w, req)
			if w.Code != want {
				t.Errorf("with tokens: GET %s with token %q: %d, want %d", path, token, w.Code, want)
			}
		}
	}
}

// TestMaxRunningFromTheConfig: a token's max_running, and [runs]
// max_running_per_token for the local caller of a host with no tokens,
// bound the runs going at once; a call past it is refused with a sentence
// saying what to do, and taken once a run has ended.
func TestMaxRunningFromTheConfig(t *testing.T) {
	for _, c := range []struct {
		name, config, token, want string
	}{
		{"a token's max_running", tokensTOML("ed", "editor") + "max_running = 2\n", "ed-token",
			`the token "ed" already has 2 runs going (its max_running); wait for one to finish or cancel one`},
		{"the local caller", "[runs]\nmax_running_per_token = 2\n", "",
			`the caller "local" (every caller on this machine, as no tokens are configured) already has 2 runs going ([runs] max_running_per_token); wait for one to finish or cancel one`},
	} {
		t.Run(c.name, func(t *testing.T) {
			upstream, release := slowUpstream(t)
			tool := fmt.Sprintf("[[tool]]\nname = \"slow\"\ndescription = \"Wait for the upstream.\"\n[tool.run]\ntype = \"http\"\nurl = \"%s/slow\"\n", upstream)
			th := newTestHost(t, "# --\n"+tool+c.config, true)
			ws := th.dial(t, c.token)
			for _, id := range []string{"a", "b"} {
				ws.WriteJSON(map[string]any{"type": "call", "id": id, "tool": "slow"})
				if f := readFrame(t, ws); f.Type != "started" {
					t.Fatalf("call %s: %+v", id, f)
				}
			}
			ws.WriteJSON(map[string]any{"type": "call", "id": "c", "tool": "slow"})
			if f := readFrame(t, ws); f.Type != "error" || f.Error == nil || f.Error.Code != "too_many_runs" || f.Error.Message != c.want {
				t.Fatalf("a third call: %+v %+v; want too_many_runs: %s", f, f.Error, c.want)
			}
			if status, body := th.do(t, "POST", "/api/v1/tools/slow/call", c.token, "{}"); status != http.StatusTooManyRequests {
				t.Fatalf("a third call over HTTP: %d %v; want 429", status, body)
			}
			release()
			for ended := 0; ended < 2; {
				if f := readFrame(t, ws); f.Type == "result" {
					ended++
				}
			}
			if status, body := th.do(t, "POST", "/api/v1/tools/slow/call", c.token, "{}"); status != 200 {
				t.Fatalf("a call once the two ended: %d %v", status, body)
			}
		})
	}
}

// TestPrepareStateRefusesAPlantedRunsFolder: the state folder's runs
// folder must be the host's own; the error names the setting.
func TestPrepareStateRefusesAPlantedRunsFolder(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(state, "runs")); err != nil {
		t.Fatal(err)
	}
	h := New(loadConfig(t, dir, "[server]\nstate_dir = \"state\"\n"), hclog.NewNullLogger())
	defer h.Stop()
	err := h.PrepareState()
	if err == nil || !strings.Contains(err.Error(), `[server] state_dir = "`+state+`"`) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symlink planted as the runs folder: %v", err)
	}

	// A good one: run output goes under state/runs, the host's only, and
	// is gone when the host stops.
	good := t.TempDir()
	h2 := New(loadConfig(t, good, "[server]\nstate_dir = \"state\"\n"), hclog.NewNullLogger())
	if err := h2.PrepareState(); err != nil {
		t.Fatal(err)
	}
	runsDir := filepath.Join(good, "state", "runs")
	entries, err := os.ReadDir(runsDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("%s holds %v (%v); want the host's own folder", runsDir, entries, err)
	}
	if st, err := os.Stat(filepath.Join(runsDir, entries[0].Name())); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the host's folder: %v, %v; want mode 0700", st.Mode(), err)
	}
	h2.Stop()
	if entries, _ := os.ReadDir(runsDir); len(entries) != 0 {
		t.Errorf("after the host stopped, %s holds %v", runsDir, entries)
	}
}

// TestDrainTakesDrainSecondsOfTheConfigInForce: a reload does not drain
// (/healthz answers 200 through it) but sets how long the next stop drains;
// while draining /healthz answers 503 and calls are served; ending ctx cuts
// the drain short; drain_seconds = 0 does not drain at all.
func TestDrainTakesDrainSecondsOfTheConfigInForce(t *testing.T) {
	tool := "[[tool]]\nname = \"note\"\ndescription = \"A note.\"\n[tool.run]\ntype = \"http\"\nurl = \"%s/note\"\n"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`"noted"`)) }))
	defer upstream.Close()
	tool = fmt.Sprintf(tool, upstream.URL)
	th := newTestHost(t, "# --\n[server]\ndrain_seconds = 0\n"+tool, true)
	th.h.Drain(context.Background()) // returns at once: drain_seconds = 0
	if status, body := th.do(t, "GET", "/healthz", "", ""); status != 200 || body["status"] != "ok" {
		t.Fatalf("/healthz after a drain of 0 seconds: %d %v", status, body)
	}

	th.reload(t, "[server]\ndrain_seconds = 60\n"+tool)
	if status, body := th.do(t, "GET", "/healthz", "", ""); status != 200 || body["status"] != "ok" {
		t.Fatalf("/healthz after a reload: %d %v", status, body)
	}
	ctx, cutShort := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { th.h.Drain(ctx); close(done) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if status, body := th.do(t, "GET", "/healthz", "", ""); status == http.StatusServiceUnavailable && body["status"] == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/healthz did not say draining")
		}
	}
	if status, body := th.do(t, "POST", "/api/v1/tools/note/call", "", "{}"); status != 200 || !strings.Contains(fmt.Sprint(body["result"]), "noted") {
		t.Errorf("a call while draining: %d %v", status, body)
	}
	select {
	case <-done:
		t.Fatal("the drain of 60 seconds ended by itself at once")
	default:
	}
	cutShort()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ending ctx did not cut the drain short")
	}
}
