package host

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/host/plugins"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
)

// sessionsPluginHead builds the stand-in python kind (a real plugin
// process that keeps sessions in memory and runs nothing) into a folder of
// the test's, and returns the config lines that use it, pinned.
func sessionsPluginHead(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "toolhost-plugin-python")
	if out, err := exec.Command("go", "build", "-o", bin, "./sessions/sessionstest/pythonkind").CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in python kind: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	pin := sha256.Sum256(b)
	return fmt.Sprintf("[plugins]\ndir = %q\n[plugins.sha256]\npython = %q\n", dir, hex.EncodeToString(pin[:]))
}

// startSessionsHost serves a host with the stand-in python kind, its state
// in state, [sessions] enabled and the tokens ed and eve (editors), vic
// (viewer) and ada (admin). With back, the host's backend is back (in
// memory); without, it is the plugin's Sessions service.
func startSessionsHost(t *testing.T, head, state string, back *sessionstest.Backend, extra string) *testHost {
	t.Helper()
	dir := t.TempDir()
	text := head + fmt.Sprintf("[server]\nstate_dir = %q\n", state) + "[sessions]\nenabled = true\n" + extra + "\n" +
		tokensTOML("ed", "editor", "eve", "editor", "vic", "viewer", "ada", "admin")
	cfg := loadConfig(t, dir, text)
	h := New(cfg, hclog.NewNullLogger())
	if back != nil {
		h.sessions.backendOf = func() (sessions.Backend, error) { return back, nil }
	}
	if err := h.PrepareState(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pr := h.Start(ctx); !pr.Empty() {
		t.Fatalf("the test host did not start cleanly: %+v", pr)
	}
	srv := httptest.NewServer(h.Handler())
	th := &testHost{h: h, srv: srv, dir: dir, file: cfg.File}
	t.Cleanup(th.stop) // again after a test's own stop: Stop may be called twice
	return th
}

func (th *testHost) stop() {
	th.srv.CloseClientConnections()
	th.srv.Close()
	th.h.Stop()
}

func toolNames(t *testing.T, th *testHost, token string) []string {
	t.Helper()
	_, body := th.do(t, "GET", "/api/v1/tools", token, "")
	var out []string
	for _, tl := range body["tools"].([]any) {
		out = append(out, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return out
}

// TestSessionToolsRunInTheCallersSession: with [sessions] enabled the host
// serves the built-in session tools to the roles that may use them; a
// call reaches the plugin with the session's backend id (never the
// caller's name for it) and its network, and lands in the ledger; a call
// without a session, or by a viewer, is refused before it runs.
func TestSessionToolsRunInTheCallersSession(t *testing.T) {
	back := sessionstest.New()
	th := startSessionsHost(t, sessionsPluginHead(t), filepath.Join(t.TempDir(), "state"), back, "")
	for _, st := range sessionstest.Tools() {
		name := st.Name
		if !slices.Contains(toolNames(t, th, "ed-token"), name) {
			t.Errorf("the editor is not shown %s", name)
		}
		if slices.Contains(toolNames(t, th, "vic-token"), name) {
			t.Errorf("the viewer is shown %s", name)
		}
	}
	status, body := th.do(t, "POST", "/api/v1/tools/run_python/call?session=conv-1", "ed-token", `{"code":"exit 3"}`)
	res, _ := body["result"].(map[string]any)
	if status != 200 || res["session"] != sessions.BackendID("ed", "conv-1") || res["network"] != "off" || res["exit_code"] != 3.0 {
		t.Fatalf("run_python: %d %v", status, body)
	}
	// The run's record keeps the caller's name of the session.
	_, rec := th.do(t, "GET", "/api/v1/runs/"+body["run"].(string), "ed-token", "")
	if rec["session"] != "conv-1" {
		t.Errorf("the run's record: %v", rec)
	}
	for _, tc := range []struct {
		path, token string
		status      int
		code, says  string
	}{
		{"/api/v1/tools/run_python/call", "ed-token", 400, "bad_args", "run_python runs in a conversation's sandbox and needs a session"},
		{"/api/v1/tools/run_python/call?session=a/b", "ed-token", 400, "bad_args", "is not a session id"},
		{"/api/v1/tools/run_python/call?session=conv-1", "vic-token", 403, "forbidden", "may not run tools"},
	} {
		status, body := th.do(t, "POST", tc.path, tc.token, `{"code":"1"}`)
		e, _ := body["error"].(map[string]any)
		if status != tc.status || e["code"] != tc.code || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
			t.Errorf("%s as %s: %d %v", tc.path, tc.token, status, body)
		}
	}
	// Over the websocket, "session" on call.
	conn := th.dial(t, "eve-token")
	if err := conn.WriteJSON(map[string]any{"type": "call", "id": "c1", "tool": "run_bash", "session": "conv-1", "args": map[string]any{"command": "ls"}}); err != nil {
		t.Fatal(err)
	}
	for {
		f := readFrame(t, conn)
		if f.Type == "result" || f.Type == "error" {
			if f.Type != "result" {
				t.Fatalf("eve's run_bash: %+v %+v", f, f.Error)
			}
			break
		}
	}
	_, runs := th.do(t, "GET", "/api/v1/runs", "ed-token", "")
	list, _ := runs["runs"].([]any)
	if len(list) != 1 {
		t.Fatalf("ed's ledger: %v", runs)
	}
	if r := list[0].(map[string]any); r["tool"] != "run_python" || r["session"] != "conv-1" || r["exit_code"] != 3.0 || r["language"] != "python" ||
		r["bytes_in"] != float64(len(`{"code":"exit 3"}`)) || r["bytes_out"].(float64) <= 0 {
		t.Errorf("ed's run in the ledger: %v", r)
	}
	_, all := th.do(t, "GET", "/api/v1/runs?session=conv-1", "ada-token", "")
	if list, _ := all["runs"].([]any); len(list) != 2 {
		t.Errorf("the admin's ledger of conv-1: %v", all)
	}
	_, mine := th.do(t, "GET", "/api/v1/sessions", "eve-token", "")
	if list, _ := mine["sessions"].([]any); len(list) != 1 || list[0].(map[string]any)["backend"] != sessions.BackendID("eve", "conv-1") {
		t.Errorf("eve's sessions: %v", mine)
	}
	// who = "admins" after a reload: the editor is refused and shown none.
	cfg := *th.h.config()
	cfg.Sessions.Who = "admins"
	th.h.Reload(context.Background(), &cfg)
	if status, _ := th.do(t, "POST", "/api/v1/tools/run_python/call?session=conv-1", "ed-token", `{"code":"1"}`); status != 403 {
		t.Errorf("an editor under who = admins: %d", status)
	}
	if slices.Contains(toolNames(t, th, "ed-token"), "run_python") {
		t.Error("an editor under who = admins is shown run_python")
	}
	if status, body := th.do(t, "POST", "/api/v1/tools/run_python/call?session=conv-1", "ada-token", `{"code":"1"}`); status != 200 {
		t.Errorf("the admin: %d %v", status, body)
	}
}

// TestSessionsSurviveARestart: a new host on the same state folder has the
// sessions and the ledger; at its start the backend is told to keep every
// session the store knows, and what no session owns is removed.
func TestSessionsSurviveARestart(t *testing.T) {
	head := sessionsPluginHead(t)
	state := filepath.Join(t.TempDir(), "state")
	back := sessionstest.New()
	th := startSessionsHost(t, head, state, back, "")
	if status, body := th.do(t, "POST", "/api/v1/tools/run_python/call?session=keep-me", "ed-token", `{"code":"exit 0"}`); status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	if status, _ := th.do(t, "PATCH", "/api/v1/sessions/web-one", "eve-token", `{"network":"web"}`); status != 200 {
		t.Fatal(status)
	}
	kept := sessions.BackendID("ed", "keep-me")
	back.Put(kept, "data.csv", "1,2,3")
	orphan := sessions.BackendID("nobody", "gone")
	back.Put(orphan, "left.txt", "a workspace no session owns")
	th.stop()

	th2 := startSessionsHost(t, head, state, back, "")
	keeps := back.Keeps()
	want := []string{kept, sessions.BackendID("eve", "web-one")}
	slices.Sort(want)
	if len(keeps) != 2 || !slices.Equal(keeps[1], want) {
		t.Errorf("reconcile at the second start kept %v, want %v", keeps, want)
	}
	if back.Has(orphan) || !back.Has(kept) {
		t.Errorf("after the restart: orphan there %v, kept there %v", back.Has(orphan), back.Has(kept))
	}
	_, list := th2.do(t, "GET", "/api/v1/sessions", "ada-token", "")
	if got, _ := list["sessions"].([]any); len(got) != 2 {
		t.Errorf("sessions after the restart: %v", list)
	}
	_, se := th2.do(t, "GET", "/api/v1/sessions/web-one", "eve-token", "")
	if se["network"] != "web" {
		t.Errorf("eve's session after the restart: %v", se)
	}
	_, runs := th2.do(t, "GET", "/api/v1/runs?session=keep-me", "ed-token", "")
	if got, _ := runs["runs"].([]any); len(got) != 1 {
		t.Errorf("the ledger after the restart: %v", runs)
	}
	status, body := th2.do(t, "POST", "/api/v1/tools/run_python/call?session=keep-me", "ed-token", `{"code":"exit 0"}`)
	if res, _ := body["result"].(map[string]any); status != 200 || res["session"] != kept {
		t.Errorf("a run after the restart: %d %v", status, body)
	}
}

func TestSessionsOffOrUnavailable(t *testing.T) {
	head := sessionsPluginHead(t)
	// Off: no session tools, the endpoints say how to turn them on.
	th := newTestHost(t, head+"[server]\nstate_dir = \"state\"\n"+tokensTOML("ed", "editor"), false)
	if slices.Contains(toolNames(t, th, "ed-token"), "run_python") {
		t.Error("run_python is served with [sessions] off")
	}
	if status, body := th.do(t, "GET", "/api/v1/sessions", "ed-token", ""); status != 501 || !strings.Contains(fmt.Sprint(body), "[sessions] enabled = true") {
		t.Errorf("sessions off: %d %v", status, body)
	}
	// Enabled, but no python kind: unavailable, saying why.
	th = startSessionsHost(t, fmt.Sprintf("[plugins]\ndir = %q\n", t.TempDir()), filepath.Join(t.TempDir(), "state"), nil, "")
	status, body := th.do(t, "GET", "/api/v1/sessions", "ed-token", "")
	if status != 503 || !strings.Contains(fmt.Sprint(body), "they need a kind that keeps them, and no kind is running") {
		t.Errorf("no python kind: %d %v", status, body)
	}
	if slices.Contains(toolNames(t, th, "ed-token"), "run_python") {
		t.Error("run_python is served with no python kind")
	}
	// Enabled, with a database a newer toolhost wrote.
	state := filepath.Join(t.TempDir(), "state")
	st, err := sessions.OpenStore(context.Background(), filepath.Join(state, sessions.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	bumpSchema(t, filepath.Join(state, sessions.DBFile))
	th = startSessionsHost(t, head, state, sessionstest.New(), "")
	status, body = th.do(t, "GET", "/api/v1/sessions", "ed-token", "")
	if status != 503 || !strings.Contains(fmt.Sprint(body), "was written by a newer toolhost") {
		t.Errorf("a newer database: %d %v", status, body)
	}
}

// TestSessionsThroughThePluginsSessionsService: the host's backend is the
// plugin's Sessions service over the plugin protocol.
func TestSessionsThroughThePluginsSessionsService(t *testing.T) {
	if _, ok := any(&plugins.Plugin{}).(sessionsPlugin); !ok {
		t.Skip("host/plugins.Plugin has no Sessions method yet: the host can't reach a plugin's Sessions service")
	}
	th := startSessionsHost(t, sessionsPluginHead(t), filepath.Join(t.TempDir(), "state"), nil, "")
	if status, body := th.do(t, "PUT", "/api/v1/sessions/c/files/in/data.txt", "ed-token", "hello"); status != 200 {
		t.Fatalf("PUT: %d %v", status, body)
	}
	if status, body := th.do(t, "POST", "/api/v1/tools/run_python/call?session=c", "ed-token", `{"code":"exit 0"}`); status != 200 {
		t.Fatalf("run: %d %v", status, body)
	}
	_, files := th.do(t, "GET", "/api/v1/sessions/c/files", "ed-token", "")
	if !strings.Contains(fmt.Sprint(files), "in/data.txt") {
		t.Errorf("files: %v", files)
	}
	if status, _ := th.do(t, "DELETE", "/api/v1/sessions/c", "ed-token", ""); status != 204 {
		t.Errorf("DELETE: %d", status)
	}
}

// bumpSchema makes the database at path look written by a newer toolhost.
func bumpSchema(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT INTO migrations (version, applied) VALUES (99, 0)"); err != nil {
		t.Fatal(err)
	}
}

// TestPackagesSessionsGetTheProxyWithTheirOwnCredentials: with
// package_hosts the host runs the egress proxy; a packages session's run
// gets its URL with the session's credentials, which the proxy takes while
// the session's network is packages, and only then.
func TestPackagesSessionsGetTheProxyWithTheirOwnCredentials(t *testing.T) {
	th := startSessionsHost(t, sessionsPluginHead(t), filepath.Join(t.TempDir(), "state"), sessionstest.New(),
		"package_hosts = [\"pypi.org\"]\nproxy_listen = \"127.0.0.1:0\"\n")
	if status, body := th.do(t, "PATCH", "/api/v1/sessions/pk", "ed-token", `{"network":"packages"}`); status != 200 {
		t.Fatalf("PATCH: %d %v", status, body)
	}
	status, body := th.do(t, "POST", "/api/v1/tools/run_bash/call?session=pk", "ed-token", `{"command":"pip install x"}`)
	res, _ := body["result"].(map[string]any)
	proxy, _ := res["proxy"].(string)
	id := sessions.BackendID("ed", "pk")
	if status != 200 || res["network"] != "packages" || !strings.HasPrefix(proxy, "http://"+id+":") || !strings.Contains(proxy, "@127.0.0.1:") {
		t.Fatalf("the packages run: %d %v", status, body)
	}
	through := func(proxyURL string) (int, string) {
		t.Helper()
		u, err := url.Parse(proxyURL)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}, Timeout: 30 * time.Second}
		resp, err := c.Get("http://not-listed.example/simple/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Status
	}
	if code, st := through(proxy); code != 403 || !strings.Contains(st, "not in [sessions] package_hosts") {
		t.Errorf("a host not listed, with the session's credentials: %s", st)
	}
	wrong := strings.Replace(proxy, id+":", sessions.BackendID("eve", "pk")+":", 1)
	if code, st := through(wrong); code != 407 {
		t.Errorf("another session's name with this one's password: %s", st)
	}
	if status, _ := th.do(t, "PATCH", "/api/v1/sessions/pk", "ed-token", `{"network":"off"}`); status != 200 {
		t.Fatal(status)
	}
	if code, st := through(proxy); code != 407 {
		t.Errorf("the credentials of a session no longer in packages mode: %s", st)
	}
}
