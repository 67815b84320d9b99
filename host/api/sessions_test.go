package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// sessionsHost serves the API with sessions on a backend in memory, to
// the tokens ed and eve (editors), vic (viewer) and ada (admin).
type sessionsHost struct {
	*testHost
	svc  *sessions.Service
	back *sessionstest.Backend
}

func newSessionsHost(t *testing.T, mutate ...func(*config.SessionsConfig)) *sessionsHost {
	t.Helper()
	cfg := config.Default().Sessions
	cfg.Enabled = true
	for _, m := range mutate {
		m(&cfg)
	}
	st, err := sessions.OpenStore(context.Background(), filepath.Join(t.TempDir(), sessions.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	// A clock a second further at every look, so that runs are never
	// of the same millisecond.
	var mu sync.Mutex
	tick := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Second)
		return tick
	}
	svc := sessions.New(sessions.Options{Config: cfg, Now: now})
	back := sessionstest.New()
	svc.Attach(st, back)
	t.Cleanup(func() { svc.Close() })
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor", "eve", "editor", "vic", "viewer", "ada", "admin"), Sessions: svc})
	return &sessionsHost{testHost: h, svc: svc, back: back}
}

// raw sends a request and returns its status, body and headers.
func raw(t *testing.T, h *testHost, method, path, token string, body io.Reader) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// sessionEndpoints are every endpoint of a session, for the session id.
func sessionEndpoints(id string) []struct{ method, path, body string } {
	return []struct{ method, path, body string }{
		{"GET", "/api/v1/sessions/" + id, ""},
		{"PATCH", "/api/v1/sessions/" + id, `{"network":"web"}`},
		{"GET", "/api/v1/sessions/" + id + "/files", ""},
		{"GET", "/api/v1/sessions/" + id + "/files/notes/a.txt", ""},
		{"PUT", "/api/v1/sessions/" + id + "/files/notes/a.txt", "new"},
		{"DELETE", "/api/v1/sessions/" + id + "/files/notes/a.txt", ""},
		{"POST", "/api/v1/sessions/" + id + "/stop", ""},
		{"DELETE", "/api/v1/sessions/" + id, ""},
	}
}

// TestSessionsOwnershipThroughTheAPI: another token's session is
// not_found by every endpoint, the same answer, word for word, as a
// session that is not there; ?principal= gets an editor nothing; an admin
// reaches it with ?principal=.
func TestSessionsOwnershipThroughTheAPI(t *testing.T) {
	h := newSessionsHost(t)
	if status, _, _ := raw(t, h.testHost, "PUT", "/api/v1/sessions/conv/files/notes/a.txt", "ed-token", strings.NewReader("ed's notes")); status != 200 {
		t.Fatalf("upload: %d", status)
	}
	edID := sessions.BackendID("ed", "conv")
	for _, e := range sessionEndpoints("conv") {
		if e.method == "PUT" || e.method == "PATCH" {
			continue // these make eve a session of her own, checked below
		}
		for _, q := range []string{"", "?principal=ed"} {
			status, body, _ := raw(t, h.testHost, e.method, e.path+q, "eve-token", strings.NewReader(e.body))
			mStatus, mBody, _ := raw(t, h.testHost, e.method, strings.Replace(e.path, "/conv", "/nope", 1)+q, "eve-token", strings.NewReader(e.body))
			if status != 404 || mStatus != 404 || string(body) != strings.ReplaceAll(string(mBody), "nope", "conv") {
				t.Errorf("eve %s %s%s: %d %s; a missing session: %d %s", e.method, e.path, q, status, body, mStatus, mBody)
			}
		}
	}
	// eve's PUT and PATCH of "conv" are eve's own session.
	for _, e := range sessionEndpoints("conv") {
		if e.method == "PUT" || e.method == "PATCH" {
			if status, body, _ := raw(t, h.testHost, e.method, e.path, "eve-token", strings.NewReader(e.body)); status != 200 {
				t.Errorf("eve %s %s: %d %s", e.method, e.path, status, body)
			}
		}
	}
	if data, err := h.back.ReadFile(context.Background(), edID, "notes/a.txt", 0); err != nil || string(data) != "ed's notes" {
		t.Errorf("ed's file after eve: %q, %v", data, err)
	}
	if se, _ := h.svc.Get(context.Background(), "ed", "conv"); se.Network != "off" {
		t.Errorf("eve changed ed's network: %+v", se)
	}
	// ed's listing has his session only; an editor's ?principal= lists none.
	_, list, _ := do(t, h.testHost, "GET", "/api/v1/sessions", "ed-token", "")
	if got := list["sessions"].([]any); len(got) != 1 || got[0].(map[string]any)["principal"] != "ed" {
		t.Errorf("ed's sessions: %v", list)
	}
	_, list, _ = do(t, h.testHost, "GET", "/api/v1/sessions?principal=ed", "eve-token", "")
	if got := list["sessions"].([]any); len(got) != 0 {
		t.Errorf("eve listing ed's sessions: %v", list)
	}
	// The admin sees everyone's, and reaches ed's with ?principal=ed.
	_, list, _ = do(t, h.testHost, "GET", "/api/v1/sessions", "ada-token", "")
	if got := list["sessions"].([]any); len(got) != 2 {
		t.Errorf("ada's listing: %v", list)
	}
	status, data, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/conv/files/notes/a.txt?principal=ed", "ada-token", nil)
	if status != 200 || string(data) != "ed's notes" {
		t.Errorf("ada reading ed's file: %d %q", status, data)
	}
	if status, _, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/conv/files/notes/a.txt", "ada-token", nil); status != 404 {
		t.Errorf("ada's own conv: %d", status)
	}
}

// TestSessionsRolesByEndpoint: viewers never; editors under who =
// "editors"; admins always.
func TestSessionsRolesByEndpoint(t *testing.T) {
	for _, who := range []string{"editors", "admins"} {
		h := newSessionsHost(t, func(c *config.SessionsConfig) { c.Who = who })
		endpoints := append(sessionEndpoints("c1"),
			struct{ method, path, body string }{"GET", "/api/v1/sessions", ""},
			struct{ method, path, body string }{"GET", "/api/v1/runs", ""})
		for _, role := range []string{"vic", "ed", "ada"} {
			allowed := role == "ada" || (role == "ed" && who == "editors")
			for _, e := range endpoints {
				// Make the session and its file first, so that every
				// endpoint has something to act on.
				if _, err := h.svc.WriteFile(context.Background(), role, "c1", "notes/a.txt", strings.NewReader("x")); err != nil {
					t.Fatal(err)
				}
				status, body, _ := raw(t, h.testHost, e.method, e.path, role+"-token", strings.NewReader(e.body))
				switch {
				case !allowed && (status != 403 || !strings.Contains(string(body), `"forbidden"`)):
					t.Errorf("who = %s: %s %s %s: %d %s; want 403", who, role, e.method, e.path, status, body)
				case allowed && status/100 != 2:
					t.Errorf("who = %s: %s %s %s: %d %s; want 2xx", who, role, e.method, e.path, status, body)
				}
			}
		}
		_, body, _ := raw(t, h.testHost, "GET", "/api/v1/sessions", "vic-token", nil)
		want := `vic is a viewer, and conversation sandboxes are for editors and admins ([sessions] who = \"editors\")`
		if who == "admins" {
			want = `vic is a viewer, and conversation sandboxes are for admins only ([sessions] who = \"admins\")`
		}
		if !strings.Contains(string(body), want) {
			t.Errorf("the viewer's refusal: %s", body)
		}
		if status, _, _ := raw(t, h.testHost, "GET", "/api/v1/sessions", "", nil); status != 401 {
			t.Errorf("no token: %d", status)
		}
	}
}

func TestSessionFilesRoundTrip(t *testing.T) {
	h := newSessionsHost(t)
	content := append([]byte("binary\x00\xff\xfe"), bytes.Repeat([]byte("z"), 300<<10)...)
	status, body, _ := raw(t, h.testHost, "PUT", "/api/v1/sessions/conv/files/data/in%20put.bin", "ed-token", bytes.NewReader(content))
	var put struct {
		File struct {
			Path string
			Size int64
		}
	}
	if err := json.Unmarshal(body, &put); status != 200 || err != nil || put.File.Path != "data/in put.bin" || put.File.Size != int64(len(content)) {
		t.Fatalf("PUT: %d %s", status, body)
	}
	status, data, hdr := raw(t, h.testHost, "GET", "/api/v1/sessions/conv/files/data/in%20put.bin", "ed-token", nil)
	if status != 200 || !bytes.Equal(data, content) {
		t.Fatalf("GET: %d, %d bytes", status, len(data))
	}
	if hdr.Get("Content-Type") != "application/octet-stream" || hdr.Get("Content-Disposition") != `attachment; filename="in put.bin"` ||
		hdr.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: %v", hdr)
	}
	_, list, _ := do(t, h.testHost, "GET", "/api/v1/sessions/conv/files", "ed-token", "")
	files, _ := list["files"].([]any)
	if len(files) != 2 || files[0].(map[string]any)["path"] != "data" || files[0].(map[string]any)["dir"] != true ||
		files[1].(map[string]any)["path"] != "data/in put.bin" {
		t.Errorf("files: %v", list)
	}
	if status, _, _ := raw(t, h.testHost, "DELETE", "/api/v1/sessions/conv/files/data/in%20put.bin", "ed-token", nil); status != 204 {
		t.Errorf("DELETE: %d", status)
	}
	if status, body, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/conv/files/data/in%20put.bin", "ed-token", nil); status != 404 || !strings.Contains(string(body), "not_found") {
		t.Errorf("GET after DELETE: %d %s", status, body)
	}
	// A session made by a network change has no files yet.
	if status, _, _ := do(t, h.testHost, "PATCH", "/api/v1/sessions/empty", "ed-token", `{"network":"web"}`); status != 200 {
		t.Fatal(status)
	}
	if status, list, _ := do(t, h.testHost, "GET", "/api/v1/sessions/empty/files", "ed-token", ""); status != 200 || len(list["files"].([]any)) != 0 {
		t.Errorf("an empty session's files: %d %v", status, list)
	}
}

// TestSessionBadIDsAndPaths: ids and paths that break the rules are 400
// with the rule, however they are escaped; a path that climbs out never
// reaches a file.
func TestSessionBadIDsAndPaths(t *testing.T) {
	h := newSessionsHost(t)
	if _, err := h.svc.WriteFile(context.Background(), "ed", "other", "secret.txt", strings.NewReader("other session's")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, code, mentions string }{
		{"/api/v1/sessions/a%20b/files", "bad_args", "a session id is 1 to 128 letters"},
		{"/api/v1/sessions/" + strings.Repeat("x", 129), "bad_args", "a session id is"},
		{"/api/v1/sessions/%2e%2e/files", "bad_args", "a session id is"},
		{"/api/v1/sessions/%2e/files", "bad_args", "a session id is"},
		{"/api/v1/sessions/conv/files/..%2F..%2Fother%2Ffiles%2Fsecret.txt", "bad_path", "has a '..' part"},
		{"/api/v1/sessions/conv/files/a%2F%2E%2E%2F%2E%2E%2Fsecret.txt", "bad_path", "has a '..' part"},
		{"/api/v1/sessions/conv/files/%2Fetc%2Fpasswd", "bad_path", "it is absolute"},
		{"/api/v1/sessions/conv/files/a%00b", "bad_path", "control character"},
		{"/api/v1/sessions/conv/files/dir/", "bad_path", "it has an empty part"},
	} {
		for _, method := range []string{"GET", "PUT", "DELETE"} {
			p := tc.path
			if !strings.Contains(p, "/files/") && method != "GET" {
				continue
			}
			status, body, _ := raw(t, h.testHost, method, p, "ed-token", strings.NewReader("x"))
			if status != 400 || !strings.Contains(string(body), `"`+tc.code+`"`) || !strings.Contains(string(body), tc.mentions) {
				t.Errorf("%s %s: %d %s; want 400 %s mentioning %q", method, p, status, body, tc.code, tc.mentions)
			}
		}
	}
	// Unescaped dots and empty parts are refused as sent (address.go),
	// never cleaned into another session's file.
	for _, p := range []string{"/api/v1/sessions/conv/files/../../other/files/secret.txt", "/api/v1/sessions/conv/files//etc/passwd"} {
		req, _ := http.NewRequest("GET", h.srv.URL+p, nil)
		req.URL.Opaque = p // sent as written
		req.Header.Set("Authorization", "Bearer ed-token")
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"bad_path"`) {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, b)
		}
	}
}

// TestSessionUploadTooLarge: an upload past 64 MiB is refused with 413,
// and nothing is written, nor the session it would have made kept.
func TestSessionUploadTooLarge(t *testing.T) {
	h := newSessionsHost(t)
	body := io.LimitReader(zeros{}, MaxFileBytes+1)
	req, _ := http.NewRequest("PUT", h.srv.URL+"/api/v1/sessions/conv/files/big.bin", body)
	req.ContentLength = -1 // chunked: the limit is met while streaming
	req.Header.Set("Authorization", "Bearer ed-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "at most 64 MiB") {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if _, err := h.back.ReadFile(context.Background(), sessions.BackendID("ed", "conv"), "big.bin", 0); err == nil {
		t.Error("the file was written")
	}
	// The session the upload made is taken back: it holds no place
	// under the caps.
	if status, _, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/conv", "ed-token", nil); status != 404 {
		t.Errorf("the session of the refused upload: %d", status)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestSessionPatchAndDelete(t *testing.T) {
	h := newSessionsHost(t)
	status, se, _ := do(t, h.testHost, "PATCH", "/api/v1/sessions/c1", "ed-token", `{"network":"web"}`)
	if status != 200 || se["network"] != "web" || se["session"] != "c1" || se["principal"] != "ed" || se["expires"] == nil {
		t.Fatalf("PATCH: %d %v", status, se)
	}
	for _, body := range []string{`{"network":"all"}`, `{"net":"web"}`, `[]`, `{}`} {
		if status, b, _ := do(t, h.testHost, "PATCH", "/api/v1/sessions/c1", "ed-token", body); status != 400 {
			t.Errorf("PATCH %s: %d %v", body, status, b)
		}
	}
	if status, b, _ := do(t, h.testHost, "PATCH", "/api/v1/sessions/c1", "ed-token", `{"network":"packages"}`); status != 501 || errCode(b) != "unsupported" {
		t.Errorf("packages with no proxy: %d %v", status, b)
	}
	h.back.Put(sessions.BackendID("ed", "c1"), "x.txt", "x")
	if status, _, _ := do(t, h.testHost, "DELETE", "/api/v1/sessions/c1", "ed-token", ""); status != 204 {
		t.Fatalf("DELETE: %d", status)
	}
	if h.back.Has(sessions.BackendID("ed", "c1")) {
		t.Error("the workspace is still there")
	}
	if status, b, _ := do(t, h.testHost, "DELETE", "/api/v1/sessions/c1", "ed-token", ""); status != 404 || errCode(b) != "not_found" {
		t.Errorf("DELETE again: %d %v", status, b)
	}
	if _, list, _ := do(t, h.testHost, "GET", "/api/v1/sessions", "ed-token", ""); len(list["sessions"].([]any)) != 0 {
		t.Errorf("sessions after delete: %v", list)
	}
}

// TestRunsLedgerEndpoint: own runs, filtered by session, tool and since;
// admins everyone's.
func TestRunsLedgerEndpoint(t *testing.T) {
	h := newSessionsHost(t)
	inv := h.svc.Invoker(&sessionstest.Kind{})
	call := func(run, principal, session, tool string) {
		t.Helper()
		lang := map[string]string{"run_python": "python", "run_bash": "bash"}[tool]
		rt, _ := json.Marshal(map[string]string{"type": "python", "session": lang})
		if _, err := inv.Invoke(context.Background(), hostside.Invocation{
			Tool: sdkTool(tool, rt), Args: json.RawMessage(`{"code":"print(1)"}`), RunID: run, Principal: principal, Session: session,
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	call("r1", "ed", "c1", "run_python")
	call("r2", "ed", "c1", "run_bash")
	call("r3", "ed", "c2", "run_python")
	call("r4", "eve", "c1", "run_python")
	runIDs := func(token, query string) string {
		t.Helper()
		status, body, _ := raw(t, h.testHost, "GET", "/api/v1/runs"+query, token, nil)
		var got struct{ Runs []sessions.RunEntry }
		if err := json.Unmarshal(body, &got); status != 200 || err != nil {
			t.Fatalf("%s %s: %d %s", token, query, status, body)
		}
		var ids []string
		for _, r := range got.Runs {
			ids = append(ids, r.Run)
		}
		return strings.Join(ids, ",")
	}
	for _, tc := range []struct{ token, query, want string }{
		{"ed-token", "", "r3,r2,r1"},
		{"ed-token", "?session=c1", "r2,r1"},
		{"ed-token", "?tool=run_python", "r3,r1"},
		{"ed-token", "?session=c1&tool=run_bash", "r2"},
		{"ed-token", "?since=2999-01-01T00:00:00Z", ""},
		{"ed-token", "?since=2000-01-01T00:00:00Z&limit=1", "r3"},
		{"ed-token", "?principal=eve", ""},
		{"eve-token", "", "r4"},
		{"ada-token", "?session=c1", "r4,r2,r1"},
		{"ada-token", "?principal=eve", "r4"},
	} {
		if got := runIDs(tc.token, tc.query); got != tc.want {
			t.Errorf("%s GET /api/v1/runs%s: %s, want %s", tc.token, tc.query, got, tc.want)
		}
	}
	for _, q := range []string{"?since=yesterday", "?limit=0", "?limit=5000", "?session=a%20b"} {
		if status, body, _ := raw(t, h.testHost, "GET", "/api/v1/runs"+q, "ed-token", nil); status != 400 {
			t.Errorf("GET /api/v1/runs%s: %d %s", q, status, body)
		}
	}
	// The record of one run is still GET /api/v1/runs/{id}.
	if status, _, _ := raw(t, h.testHost, "GET", "/api/v1/runs/nope", "ed-token", nil); status != 404 {
		t.Errorf("GET /api/v1/runs/nope: %d", status)
	}
}

func TestSessionsOff(t *testing.T) {
	h := newTestHost(t, Options{})
	if status, b, _ := do(t, h, "GET", "/api/v1/sessions", "", ""); status != 501 || errCode(b) != "unsupported" {
		t.Errorf("no sessions: %d %v", status, b)
	}
	off := newSessionsHost(t, func(c *config.SessionsConfig) { c.Enabled = false })
	if status, b, _ := do(t, off.testHost, "GET", "/api/v1/sessions/c/files", "ed-token", ""); status != 501 || errCode(b) != "unsupported" ||
		!strings.Contains(b["error"].(map[string]any)["message"].(string), "[sessions] enabled = true") {
		t.Errorf("sessions off: %d %v", status, b)
	}
}

// TestCallTakesSessionFromTheQuery: ?session= on POST …/call is the run's
// session (the Toolhost-Session header still works).
func TestCallTakesSessionFromTheQuery(t *testing.T) {
	h := newTestHost(t, Options{})
	for _, tc := range []struct{ query, header, want string }{
		{"?session=conv-q", "", "conv-q"},
		{"", "conv-h", "conv-h"},
		{"?session=conv-q", "conv-h", "conv-q"},
	} {
		var hdr []string
		if tc.header != "" {
			hdr = []string{"Toolhost-Session", tc.header}
		}
		_, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call"+tc.query, "", `{"n":1}`, hdr...)
		_, rec, _ := do(t, h, "GET", "/api/v1/runs/"+body["run"].(string), "", "")
		if rec["session"] != tc.want {
			t.Errorf("%+v: the run's session is %v", tc, rec["session"])
		}
	}
}

// TestListToolsHidesSessionToolsFromThoseWhoMayNotUseThem.
func TestListToolsHidesSessionToolsFromThoseWhoMayNotUseThem(t *testing.T) {
	h := newSessionsHost(t, func(c *config.SessionsConfig) { c.Who = "admins" })
	reg := h.api.opts.Registry
	reg.Add(&tools.Tool{Tool: config.Tool{Name: "run_python", Description: "Run Python.", Effect: "change"}, Kind: "python",
		Run: json.RawMessage(`{"type":"python","session":"python"}`)})
	names := func(token string) string {
		_, body, _ := do(t, h.testHost, "GET", "/api/v1/tools", token, "")
		var out []string
		for _, tl := range body["tools"].([]any) {
			out = append(out, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
		}
		return strings.Join(out, ",")
	}
	if got := names("ada-token"); !strings.Contains(got, "run_python") {
		t.Errorf("the admin's tools: %s", got)
	}
	for _, tok := range []string{"ed-token", "vic-token"} {
		if got := names(tok); strings.Contains(got, "run_python") || !strings.Contains(got, "lines") {
			t.Errorf("%s's tools: %s", tok, got)
		}
	}
	// The websocket's list_tools alike.
	for who, want := range map[string]bool{"ada": true, "ed": false, "vic": false} {
		c := h.dial(t, bearer(who))
		c.send(map[string]any{"type": "list_tools", "id": "l"})
		f := c.read(5 * time.Second)
		got := false
		for _, tl := range f.Tools {
			got = got || tl.Function.Name == "run_python"
		}
		if f.Type != "tools" || len(f.Tools) == 0 || got != want {
			t.Errorf("%s's list_tools over the websocket lists run_python: %v (%+v)", who, got, f)
		}
	}
}

func sdkTool(name string, run json.RawMessage) sdk.Tool { return sdk.Tool{Name: name, Run: run} }
