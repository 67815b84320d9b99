package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// clock is a clock tests move.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	svc   *sessions.Service
	back  *sessionstest.Backend
	clock *clock
	path  string
}

func enabled() config.SessionsConfig {
	c := config.Default().Sessions
	c.Enabled = true
	return c
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{back: sessionstest.New(), clock: &clock{t: time.UnixMilli(1_700_000_000_000)}, path: filepath.Join(t.TempDir(), sessions.DBFile)}
	f.open(t)
	return f
}

// open makes the service on the fixture's file, as a host start does.
func (f *fixture) open(t *testing.T) {
	t.Helper()
	st, err := sessions.OpenStore(context.Background(), f.path)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = sessions.New(sessions.Options{Config: enabled(), Now: f.clock.now})
	f.svc.Attach(st, f.back)
	t.Cleanup(func() { f.svc.Close() })
}

func code(err error) string { return errcode.Code(err) }

func TestBackendIDIsOpaqueAndPerPrincipal(t *testing.T) {
	a, b := sessions.BackendID("ann", "conv-1"), sessions.BackendID("bob", "conv-1")
	re := regexp.MustCompile(`^s[0-9a-f]{24}$`)
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Errorf("backend ids %q, %q", a, b)
	}
	// The zero byte keeps "an"+"nconv" and "ann"+"conv" apart.
	if sessions.BackendID("an", "nconv-1") == sessions.BackendID("ann", "conv-1") {
		t.Error("principal and session run together")
	}
}

func TestCheckIDAndPath(t *testing.T) {
	for _, id := range []string{"c", "...", ".a", "conv-7f3a", "A.b_c:d-1", strings.Repeat("x", 128)} {
		if err := sessions.CheckID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", strings.Repeat("x", 129), "a b", "a/b", "../x", "é", "a\x00"} {
		if err := sessions.CheckID(id); code(err) != wire.CodeBadArgs {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, p := range []string{"a", "a/b.txt", "dir/sub/file", ".hidden", "a..b", "x y", strings.Repeat("n", 255)} {
		if err := sessions.CheckPath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "/etc/passwd", "..", "../x", "a/../../b", "a/./b", ".", "a//b", "a/", "a\x00b", "a\nb",
		"\xff", strings.Repeat("n", 256), strings.Repeat("a/", 2049) + "a"} {
		err := sessions.CheckPath(p)
		if code(err) != wire.CodeBadPath {
			t.Errorf("%q: %v", p, err)
		}
	}
	if err := sessions.CheckPath("../../etc/passwd"); !strings.Contains(err.Error(), `has a '..' part; a file's path is relative`) {
		t.Errorf("message: %v", err)
	}
}

// TestOwnership: a session of another principal is not found by every
// operation, with the same answer as a session that is not there, and its
// files are untouched.
func TestOwnership(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.svc.WriteFile(ctx, "ann", "conv", "secret.txt", strings.NewReader("ann's")); err != nil {
		t.Fatal(err)
	}
	annID := sessions.BackendID("ann", "conv")
	missing := func(err error) string {
		if err == nil {
			return "<nil>"
		}
		return code(err) + ": " + strings.ReplaceAll(err.Error(), "nope", "conv")
	}
	for name, op := range map[string]func(principal, session string) error{
		"get":    func(p, s string) error { _, err := f.svc.Get(ctx, p, s); return err },
		"files":  func(p, s string) error { _, err := f.svc.Files(ctx, p, s); return err },
		"read":   func(p, s string) error { _, err := readFile(ctx, f.svc, p, s, "secret.txt", 1<<20); return err },
		"remove": func(p, s string) error { return f.svc.RemoveFile(ctx, p, s, "secret.txt") },
		"delete": func(p, s string) error { return f.svc.Delete(ctx, p, s) },
	} {
		other := missing(op("bob", "conv"))
		none := missing(op("bob", "nope"))
		if !strings.HasPrefix(other, "not_found: ") || other != none {
			t.Errorf("%s: another's session gives %q, a missing one %q", name, other, none)
		}
	}
	if data, err := readFile(ctx, f.svc, "ann", "conv", "secret.txt", 100); err != nil || string(data) != "ann's" {
		t.Errorf("ann's file after bob's tries: %q, %v", data, err)
	}
	// bob writing to "conv" makes his own session, never ann's.
	if _, err := f.svc.WriteFile(ctx, "bob", "conv", "secret.txt", strings.NewReader("bob's")); err != nil {
		t.Fatal(err)
	}
	if data, _ := readFile(ctx, f.svc, "ann", "conv", "secret.txt", 100); string(data) != "ann's" {
		t.Errorf("ann's file after bob's write: %q", data)
	}
	if !f.back.Has(annID) || !f.back.Has(sessions.BackendID("bob", "conv")) {
		t.Error("the two sessions do not have a workspace each")
	}
	mine, _ := f.svc.List(ctx, "bob", false)
	all, _ := f.svc.List(ctx, "bob", true)
	if len(mine) != 1 || mine[0].Principal != "bob" || len(all) != 2 {
		t.Errorf("bob's sessions %+v, all %+v", mine, all)
	}
}

func TestDeleteRemovesWorkspaceThenRecord(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.svc.WriteFile(ctx, "ann", "c", "a.txt", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	id := sessions.BackendID("ann", "c")
	f.back.FailDelete = errors.New("runsc is stuck")
	if err := f.svc.Delete(ctx, "ann", "c"); err == nil || !strings.Contains(err.Error(), `the session "c" can't be deleted: runsc is stuck`) {
		t.Fatalf("got %v", err)
	}
	if _, err := f.svc.Get(ctx, "ann", "c"); err != nil {
		t.Fatalf("the record went though its files stayed: %v", err)
	}
	f.back.FailDelete = nil
	if err := f.svc.Delete(ctx, "ann", "c"); err != nil {
		t.Fatal(err)
	}
	if f.back.Has(id) {
		t.Error("the workspace is still there")
	}
	if _, err := f.svc.Get(ctx, "ann", "c"); code(err) != wire.CodeNotFound {
		t.Errorf("after delete: %v", err)
	}
	// A session with no workspace yet (made by a network change) is
	// deleted too.
	if _, err := f.svc.SetNetwork(ctx, "ann", "d", "web"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Delete(ctx, "ann", "d"); err != nil {
		t.Errorf("a session with no workspace: %v", err)
	}
}

// TestExpiry: keep_hours after its last use a session is deleted, files and
// record; a session used since, or with a run going on, stays; the ledger
// stays.
func TestExpiry(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	kind := &sessionstest.Kind{Backend: f.back}
	inv := f.svc.Invoker(kind)
	run := func(principal, session string) {
		t.Helper()
		if _, err := inv.Invoke(ctx, invocation("r"+session+principal, principal, session, "run_python", `{"code":"1"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	run("ann", "old")
	f.back.Put(sessions.BackendID("ann", "old"), "a.txt", "x")
	// A run going on in "busy" from now on.
	release := make(chan struct{})
	started := make(chan struct{})
	busy := &sessionstest.Kind{Backend: f.back, Answer: func(context.Context, hostside.Invocation, func(sdk.Event)) (json.RawMessage, error) {
		close(started)
		<-release
		return json.RawMessage(`{"exit_code":0}`), nil
	}}
	done := make(chan error)
	go func() {
		_, err := f.svc.Invoker(busy).Invoke(ctx, invocation("rb", "ann", "busy", "run_bash", `{"command":"sleep 1d"}`), nil)
		done <- err
	}()
	<-started
	f.clock.add(23 * time.Hour)
	run("ann", "fresh")
	f.clock.add(2 * time.Hour) // old: 25 h; fresh: 2 h; busy: 25 h but running
	gone, err := f.svc.Expire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0].ID != "old" {
		t.Fatalf("expired %+v, want old only", gone)
	}
	if f.back.Has(sessions.BackendID("ann", "old")) {
		t.Error("old's workspace is still there")
	}
	if _, err := f.svc.Get(ctx, "ann", "old"); code(err) != wire.CodeNotFound {
		t.Errorf("old after expiry: %v", err)
	}
	for _, s := range []string{"fresh", "busy"} {
		if _, err := f.svc.Get(ctx, "ann", s); err != nil {
			t.Errorf("%s after expiry: %v", s, err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runs, _ := f.svc.Runs(ctx, sessions.RunFilter{Principal: "ann", Session: "old"})
	if len(runs) != 1 {
		t.Errorf("the ledger of the expired session: %+v", runs)
	}
	// The run's end counts as a use: busy is fresh now.
	f.clock.add(23 * time.Hour)
	if gone, _ := f.svc.Expire(ctx); len(gone) != 1 || gone[0].ID != "fresh" {
		t.Errorf("second expiry: %+v, want fresh only", gone)
	}
}

// TestReconcilePassesEveryKnownID: at start the backend is told to keep
// every session the store knows, and removes the rest.
func TestReconcilePassesEveryKnownID(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	var want []string
	for _, p := range []string{"ann", "bob"} {
		for _, s := range []string{"a", "b", "c"} {
			if _, err := f.svc.SetNetwork(ctx, p, s, "off"); err != nil {
				t.Fatal(err)
			}
			want = append(want, sessions.BackendID(p, s))
		}
	}
	orphan := sessions.BackendID("carl", "gone")
	f.back.Put(orphan, "left.txt", "from a session the store never recorded")
	f.back.Put(sessions.BackendID("ann", "a"), "keep.txt", "x")
	// The host restarts.
	f.svc.Close()
	f.open(t)
	removed, err := f.svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keeps := f.back.Keeps()
	slices.Sort(want)
	if len(keeps) != 1 || !slices.Equal(keeps[0], want) {
		t.Errorf("keep = %v, want %v", keeps, want)
	}
	if !slices.Equal(removed, []string{orphan}) || f.back.Has(orphan) {
		t.Errorf("removed %v, want the orphan %s", removed, orphan)
	}
	if !f.back.Has(sessions.BackendID("ann", "a")) {
		t.Error("a kept workspace was removed")
	}
}

func invocation(run, principal, session, tool, args string) hostside.Invocation {
	lang := map[string]string{"run_python": "python", "run_bash": "bash", "sandbox_files": "files", "sandbox_file": "file"}[tool]
	rt, _ := json.Marshal(map[string]string{"type": "python", "session": lang})
	return hostside.Invocation{
		Tool: sdk.Tool{Name: tool, Run: rt}, Args: json.RawMessage(args), RunID: run, Principal: principal, Session: session,
	}
}

// TestInvokerMapsSessionAndWritesLedger: a session tool's call reaches the
// kind with the backend id, the session's network and (packages) the
// proxy URL; its end is in the ledger with its exit code, why it stopped
// and its bytes; other tools pass through unchanged.
func TestInvokerMapsSessionAndWritesLedger(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.svc.SetProxy(netip.MustParseAddrPort("10.200.0.1:3128"))
	kind := &sessionstest.Kind{Answer: func(_ context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
		switch inv.RunID {
		case "r-oom":
			onEvent(sdk.Event{Stdout: []byte("12345")})
			onEvent(sdk.Event{Stderr: []byte("Killed")})
			return json.RawMessage(`{"exit_code":137,"stdout":"12345","stderr":"Killed","stopped":"memory","message":"the run used more than 512 MiB"}`), nil
		case "r-crash":
			return nil, errcode.New(wire.CodePluginCrashed, "the python plugin stopped")
		}
		return json.RawMessage(`{"exit_code":0}`), nil
	}}
	inv := f.svc.Invoker(kind)
	args := `{"code":"x = bytearray(1 << 40)"}`
	res, err := inv.Invoke(ctx, invocation("r-oom", "ann", "conv", "run_python", args), func(sdk.Event) {})
	if err != nil || !strings.Contains(string(res), `"memory"`) {
		t.Fatalf("%s, %v", res, err)
	}
	if _, err := f.svc.SetNetwork(ctx, "ann", "conv", "packages"); err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Invoke(ctx, invocation("r-crash", "ann", "conv", "run_bash", `{"command":"pip install x"}`), nil); code(err) != wire.CodePluginCrashed {
		t.Fatalf("got %v", err)
	}
	plain := hostside.Invocation{Tool: sdk.Tool{Name: "get_json", Run: json.RawMessage(`{"type":"http"}`)}, RunID: "r-http", Principal: "ann", Session: "conv"}
	if _, err := inv.Invoke(ctx, plain, nil); err != nil {
		t.Fatal(err)
	}

	invs := kind.Invocations()
	id := sessions.BackendID("ann", "conv")
	if invs[0].Session != id || invs[0].SessionNetwork != "off" || invs[0].SessionProxy != "" {
		t.Errorf("first run: %+v", invs[0])
	}
	wantProxy := "http://" + id + ":" + f.svc.ProxyPassword(id) + "@10.200.0.1:3128"
	if invs[1].Session != id || invs[1].SessionNetwork != "packages" || invs[1].SessionProxy != wantProxy {
		t.Errorf("packages run: %+v, want proxy %s", invs[1], wantProxy)
	}
	if invs[2].Session != "conv" || invs[2].SessionNetwork != "" {
		t.Errorf("an http tool's call was changed: %+v", invs[2])
	}
	if se, ok := f.svc.CheckProxy(ctx, id, f.svc.ProxyPassword(id)); !ok || se.ID != "conv" {
		t.Errorf("the proxy's check of the session's own credentials: %+v, %v", se, ok)
	}
	other := sessions.BackendID("bob", "conv")
	if _, ok := f.svc.CheckProxy(ctx, id, f.svc.ProxyPassword(other)); ok {
		t.Error("another session's password let in")
	}

	runs, err := f.svc.Runs(ctx, sessions.RunFilter{Principal: "ann"})
	if err != nil || len(runs) != 2 {
		t.Fatalf("ledger %+v, %v", runs, err)
	}
	crash, oom := runs[0], runs[1]
	if oom.Run != "r-oom" || oom.Tool != "run_python" || oom.Language != "python" || oom.ExitCode == nil || *oom.ExitCode != 137 ||
		oom.Stopped != "memory" || oom.BytesIn != int64(len(args)) || oom.Session != "conv" {
		t.Errorf("oom run: %+v", oom)
	}
	if wantOut := int64(len("12345") + len("Killed") + len(res)); oom.BytesOut != wantOut {
		t.Errorf("bytes out %d, want %d", oom.BytesOut, wantOut)
	}
	if crash.Run != "r-crash" || crash.Language != "bash" || crash.ExitCode != nil || crash.Stopped != "plugin_crashed" {
		t.Errorf("crashed run: %+v", crash)
	}
}

// kindOf is what the kind of a run table would say of itself: python keeps
// conversation sandboxes, no other kind does.
func kindOf(run json.RawMessage) sdk.Info {
	var r struct{ Type string }
	_ = json.Unmarshal(run, &r)
	return sdk.Info{Kind: r.Type, ServesSessions: r.Type == "python"}
}

// TestAdmit: the gate of session tools: role, session named and good;
// other tools (of a kind that keeps no sessions, or run in none) pass.
func TestAdmit(t *testing.T) {
	f := newFixture(t)
	py := json.RawMessage(`{"type":"python","session":"python"}`)
	for _, tc := range []struct {
		role, session string
		run           json.RawMessage
		want          string
	}{
		{"editor", "c1", py, ""},
		{"admin", "c1", py, ""},
		{"viewer", "c1", py, wire.CodeForbidden},
		{"editor", "", py, wire.CodeBadArgs},
		{"editor", "a/b", py, wire.CodeBadArgs},
		{"viewer", "", json.RawMessage(`{"type":"python","code":"def run(): pass"}`), ""},
		{"editor", "a/b", json.RawMessage(`{"type":"http"}`), ""},
		{"viewer", "", json.RawMessage(`{"type":"weather","session":"python"}`), ""},
	} {
		if got := code(f.svc.Admit("ed", tc.role, tc.session, "run_python", kindOf(tc.run), tc.run)); got != tc.want {
			t.Errorf("%+v: %q", tc, got)
		}
	}
	c := enabled()
	c.Who = "admins"
	f.svc.SetConfig(c, "/etc/toolhost.toml")
	err := f.svc.Admit("ed", "editor", "c1", "run_python", kindOf(py), py)
	if code(err) != wire.CodeForbidden || err.Error() != `ed is an editor, and conversation sandboxes are for admins only ([sessions] who = "admins")` {
		t.Errorf("editor under who = admins: %v", err)
	}
	c.Enabled = false
	f.svc.SetConfig(c, "/etc/toolhost.toml")
	if err := f.svc.Admit("ad", "admin", "c1", "run_python", kindOf(py), py); code(err) != wire.CodeUnsupported {
		t.Errorf("off: %v", err)
	}
}

// A session made while a reconcile runs (between its read of the store's
// ids and the backend's look at the workspaces) is never taken for a
// leftover: its upload either lands before the read, or waits for the
// reconcile to end.
func TestReconcileSparesASessionMadeMeanwhile(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	uploaded := make(chan error, 1)
	f.back.BeforeReconcile = func() {
		go func() {
			_, err := f.svc.WriteFile(ctx, "ann", "new", "x.txt", strings.NewReader("made meanwhile"))
			uploaded <- err
		}()
		// Let the upload run to its end if nothing holds it back.
		select {
		case err := <-uploaded:
			uploaded <- err
		case <-time.After(300 * time.Millisecond):
		}
	}
	if _, err := f.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-uploaded; err != nil {
		t.Fatalf("the upload made during the reconcile failed: %v", err)
	}
	if !f.back.Has(sessions.BackendID("ann", "new")) {
		t.Fatal("the session made during the reconcile lost its workspace, though its upload succeeded")
	}
	if _, err := readFile(ctx, f.svc, "ann", "new", "x.txt", 1<<10); err != nil {
		t.Fatalf("reading the uploaded file back: %v", err)
	}
}

func TestSetNetwork(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.svc.SetNetwork(ctx, "ann", "c", "everything"); code(err) != wire.CodeBadArgs {
		t.Errorf("bad network: %v", err)
	}
	if _, err := f.svc.SetNetwork(ctx, "ann", "c", "packages"); code(err) != wire.CodeUnsupported {
		t.Errorf("packages with no proxy: %v", err)
	}
	se, err := f.svc.SetNetwork(ctx, "ann", "c", "web")
	if err != nil || se.Network != "web" {
		t.Fatalf("%+v, %v", se, err)
	}
	if got, _ := f.svc.Get(ctx, "ann", "c"); got.Network != "web" {
		t.Errorf("stored network %q", got.Network)
	}
	// Switching stops the sandbox that has the old network before it answers.
	before := len(f.back.Stopped())
	if _, err := f.svc.SetNetwork(ctx, "ann", "c", "off"); err != nil {
		t.Fatal(err)
	}
	if stopped := f.back.Stopped(); len(stopped) != before+1 || stopped[len(stopped)-1] != sessions.BackendID("ann", "c") {
		t.Errorf("switching the network off stopped %v, want the session's sandbox", stopped[before:])
	}
}

// readFile reads a file of a session whole through Service.OpenFile.
func readFile(ctx context.Context, svc *sessions.Service, principal, session, path string, max int64) ([]byte, error) {
	r, _, err := svc.OpenFile(ctx, principal, session, path, max)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
