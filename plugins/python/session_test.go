package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// The conversation sandboxes of the kind, through the SDK's wire as the host reaches them: the
// session tools (run_python, run_bash, sandbox_files, sandbox_file) by Invoke, the files by the
// Sessions service, with real runsc and real workspace images.

// sessionKind makes a kind of its own, in a state folder of its own, served over sdktest; at the
// end its sessions are reconciled away and it is closed, and nothing of it may be left.
func sessionKind(t *testing.T) (*kind, *sdktest.Conn, *hostside.SessionsClient) {
	t.Helper()
	return sessionKindWith(t, map[string]any{"size": 0, "max": 4, "max_idle_minutes": 10}, kindOptions{})
}

// sessionKindWith is sessionKind with [python.pool] pool and the kind's options opts.
func sessionKindWith(t *testing.T, pool map[string]any, opts kindOptions) (*kind, *sdktest.Conn, *hostside.SessionsClient) {
	t.Helper()
	onlyOnce(t)
	if e := (sandboxtest.Env{SessionRootfs: env.sessionRootfs}).NeedSessions(); e.Skip != "" {
		t.Skip(e.Skip)
	}
	prefix := testPrefix("thps")
	state, err := os.MkdirTemp(env.stateDir, "sessions-")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": env.rootfs, "session_rootfs": env.sessionRootfs,
		"state_dir": state, "sessions_dir": filepath.Join(state, "sessions"), "sandbox_prefix": prefix, "max_output_bytes": env.outputB,
		"pool": pool})
	k := newKind(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.Configure(ctx, raw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := k.Reconcile(ctx, nil); err != nil {
			t.Errorf("reconciling the sessions away: %v", err)
		}
		if err := k.Close(ctx); err != nil {
			t.Errorf("closing the kind: %v", err)
		}
		rt, _ := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(state, "runsc")})
		left, err := sandbox.Leftovers(ctx, sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: state})
		if err != nil || len(left) > 0 {
			t.Errorf("left after Close: %v %v", left, err)
		}
	})
	c := sdktest.Start(t, k, nil)
	if err := c.Configure(ctx, raw); err != nil {
		t.Fatal(err)
	}
	s := c.Sessions("python")
	if err := s.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 64, MemoryMB: 256, IdleMinutes: 15, Seconds: 60}); err != nil {
		t.Fatal(err)
	}
	return k, c, s
}

// newSessionID is a backend id as the host makes them.
func newSessionID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "s" + hex.EncodeToString(b)
}

// sessionTool is one of the host's built-in session tools.
func sessionTool(t *testing.T, name, which string) sdk.Tool {
	return sdktest.Tool(t, name, map[string]any{"type": "python", "session": which})
}

// callIn invokes tool with args in session id (none when ""), as the host does, with onEvent
// seeing each event as it comes.
func callIn(t *testing.T, c *sdktest.Conn, id string, tool sdk.Tool, args map[string]any, onEvent func(sdk.Event)) *sdktest.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	raw, _ := json.Marshal(args)
	var (
		mu  sync.Mutex
		run sdktest.Run
	)
	run.Result, run.Err = c.KindClient.Invoke(ctx, hostside.Invocation{Tool: tool, Args: raw, RunID: "rsess",
		Session: id, SessionNetwork: config.SessionNetworkOff}, func(e sdk.Event) {
		mu.Lock()
		run.Events = append(run.Events, e)
		mu.Unlock()
		if onEvent != nil {
			onEvent(e)
		}
	})
	return &run
}

// ranResult is a session run's result, failing the test when the run failed.
func ranResult(t *testing.T, r *sdktest.Run) sessionResult {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("the run failed: %s %v", r.ErrorCode(), r.Err)
	}
	var res sessionResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return res
}

// TestSessionRunsKeepTheirFiles: a file run_python writes is there for the next run_python and
// for run_bash, is listed by sandbox_files and read by sandbox_file (text as text, bytes in
// base64), and comes out through the Sessions service; a file put in through the service is
// there for the code.
func TestSessionRunsKeepTheirFiles(t *testing.T) {
	_, c, s := sessionKind(t)
	id := newSessionID()
	py, sh := sessionTool(t, "run_python", "python"), sessionTool(t, "run_bash", "bash")

	res := ranResult(t, callIn(t, c, id, py, map[string]any{"code": "import os\nos.makedirs('out', exist_ok=True)\n" +
		"open('out/data.txt', 'w').write('kept across runs\\n')\nopen('out/raw.bin', 'wb').write(bytes(range(256)))\nprint('wrote')\n"}, nil))
	if res.ExitCode != 0 || res.Stdout != "wrote\n" || res.Stopped != "" {
		t.Fatalf("first run: %+v", res)
	}
	res = ranResult(t, callIn(t, c, id, py, map[string]any{"code": "print(open('out/data.txt').read(), end='')"}, nil))
	if res.ExitCode != 0 || res.Stdout != "kept across runs\n" {
		t.Fatalf("second run read %+v", res)
	}
	res = ranResult(t, callIn(t, c, id, sh, map[string]any{"command": "cat out/data.txt; pwd; echo oops >&2; exit 3"}, nil))
	if res.ExitCode != 3 || res.Stdout != "kept across runs\n/work\n" || res.Stderr != "oops\n" || res.Stopped != "" {
		t.Fatalf("run_bash: %+v", res)
	}

	r := callIn(t, c, id, sessionTool(t, "sandbox_files", "files"), nil, nil)
	var listed struct {
		Files []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
			Dir  bool   `json:"dir"`
		} `json:"files"`
	}
	if r.Err != nil || json.Unmarshal(r.Result, &listed) != nil {
		t.Fatalf("sandbox_files: %s %v", r.Result, r.Err)
	}
	found := map[string]int64{}
	for _, f := range listed.Files {
		found[f.Path] = f.Size
	}
	if found["out/data.txt"] != 17 || found["out/raw.bin"] != 256 {
		t.Fatalf("sandbox_files listed %s", r.Result)
	}

	file := sessionTool(t, "sandbox_file", "file")
	r = callIn(t, c, id, file, map[string]any{"path": "out/data.txt"}, nil)
	wantResult(t, r, `{"path": "out/data.txt", "size": 17, "encoding": "utf-8", "content": "kept across runs\n"}`)
	r = callIn(t, c, id, file, map[string]any{"path": "out/raw.bin"}, nil)
	var raw struct{ Encoding, Content string }
	_ = json.Unmarshal(r.Result, &raw)
	if b, err := base64.StdEncoding.DecodeString(raw.Content); r.Err != nil || raw.Encoding != "base64" || err != nil || len(b) != 256 || b[255] != 255 {
		t.Fatalf("sandbox_file of bytes: %s %v", r.Result, r.Err)
	}
	r = callIn(t, c, id, file, map[string]any{"path": "../../etc/passwd"}, nil)
	if r.ErrorCode() != errcode.BadPath {
		t.Errorf("sandbox_file of ../../etc/passwd: %s %v", r.ErrorCode(), r.Err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got, err := s.ReadFile(ctx, id, "out/data.txt", 1<<20); err != nil || string(got) != "kept across runs\n" {
		t.Fatalf("Sessions.ReadFile = %q, %v", got, err)
	}
	if _, err := s.WriteFile(ctx, id, "in/upload.csv", strings.NewReader("a,b\n1,2\n")); err != nil {
		t.Fatal(err)
	}
	res = ranResult(t, callIn(t, c, id, sh, map[string]any{"command": "wc -l < in/upload.csv"}, nil))
	if strings.TrimSpace(res.Stdout) != "2" {
		t.Fatalf("the code read the upload as %+v", res)
	}
	if _, err := s.ReadFile(ctx, id, "nothing-here", 0); errcode.Code(err) != errcode.NotFound {
		t.Errorf("Sessions.ReadFile of a missing file: %v", err)
	}
	if _, err := s.WriteFile(ctx, id, "../escape", strings.NewReader("x")); errcode.Code(err) != errcode.BadPath {
		t.Errorf("Sessions.WriteFile of ../escape: %v", err)
	}

	// Another session sees none of it.
	other := newSessionID()
	res = ranResult(t, callIn(t, c, other, sh, map[string]any{"command": "ls -A /work | grep -v '^lost+found$' | wc -l"}, nil))
	if strings.TrimSpace(res.Stdout) != "0" {
		t.Errorf("a new session's /work holds %q", res.Stdout)
	}

	// Stopped, the session keeps its files; deleted, they are gone.
	if err := s.StopSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	res = ranResult(t, callIn(t, c, id, py, map[string]any{"code": "print(open('out/data.txt').read(), end='')"}, nil))
	if res.Stdout != "kept across runs\n" {
		t.Fatalf("after a stop the run read %+v", res)
	}
	if err := s.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile(ctx, id, "out/data.txt", 0); errcode.Code(err) != errcode.NotFound {
		t.Errorf("after Delete, ReadFile = %v; want not_found", err)
	}
	if _, err := s.WriteFile(ctx, other, "keep.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	third := newSessionID()
	if _, err := s.WriteFile(ctx, third, "gone.txt", strings.NewReader("gone")); err != nil {
		t.Fatal(err)
	}
	removed, err := s.Reconcile(ctx, []string{other})
	if err != nil || !slices.Contains(removed, third) || slices.Contains(removed, other) {
		t.Errorf("Reconcile keeping %s removed %v, %v; want %s among them", other, removed, err, third)
	}
	if got, err := s.ReadFile(ctx, other, "keep.txt", 0); err != nil || string(got) != "kept" {
		t.Errorf("the kept session's file after Reconcile: %q, %v", got, err)
	}
	if _, err := s.ReadFile(ctx, third, "gone.txt", 0); errcode.Code(err) != errcode.NotFound {
		t.Errorf("the removed session's file after Reconcile: %v", err)
	}
}

// TestSessionOutputStreamsBeforeTheEnd: what a run prints reaches the host while it runs: the
// code waits for a file the test writes only once it has seen the first line.
func TestSessionOutputStreamsBeforeTheEnd(t *testing.T) {
	_, c, s := sessionKind(t)
	id := newSessionID()
	var once sync.Once
	wrote := make(chan error, 1)
	r := callIn(t, c, id, sessionTool(t, "run_python", "python"), map[string]any{"code": "import os, sys, time\n" +
		"print('first', flush=True)\nprint('to stderr', file=sys.stderr, flush=True)\n" +
		"deadline = time.time() + 60\nwhile not os.path.exists('go') and time.time() < deadline:\n    time.sleep(0.05)\n" +
		"print('second' if os.path.exists('go') else 'never saw go')\n"}, func(e sdk.Event) {
		if strings.Contains(string(e.Stdout), "first") {
			once.Do(func() {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_, err := s.WriteFile(ctx, id, "go", strings.NewReader(""))
					wrote <- err
				}()
			})
		}
	})
	res := ranResult(t, r)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "first\nsecond\n" || res.Stderr != "to stderr\n" || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	if r.Stdout() != "first\nsecond\n" || r.Stderr() != "to stderr\n" {
		t.Errorf("events stdout %q stderr %q", r.Stdout(), r.Stderr())
	}
}

// TestSessionOutputIsCut: the result holds stdout's first 10,000 characters and stderr's last
// 10,000, each with a note of what was cut; the events hold all of it.
func TestSessionOutputIsCut(t *testing.T) {
	_, c, _ := sessionKind(t)
	id := newSessionID()
	r := callIn(t, c, id, sessionTool(t, "run_python", "python"), map[string]any{"code": "import sys\n" +
		"print('é' + 'x' * 49999)\nsys.stderr.write('START' + 'e' * 29995 + 'END')\n"}, nil)
	res := ranResult(t, r)
	wantOut := "é" + strings.Repeat("x", 9999) + "\n[stdout was cut: its first 10,000 characters of 50,001 are shown]"
	if res.Stdout != wantOut {
		t.Errorf("stdout = %q…%q (%d chars)", head(res.Stdout), tail(res.Stdout), len([]rune(res.Stdout)))
	}
	wantErr := "[stderr was cut: its last 10,000 characters of 30,003 are shown]\n" + strings.Repeat("e", 9997) + "END"
	if res.Stderr != wantErr {
		t.Errorf("stderr = %q…%q", head(res.Stderr), tail(res.Stderr))
	}
	if got := r.Stdout(); got != "é"+strings.Repeat("x", 49999)+"\n" {
		t.Errorf("the events' stdout has %d characters; want all 50,001", len([]rune(got)))
	}
	if got := r.Stderr(); len(got) != 30003 {
		t.Errorf("the events' stderr has %d bytes; want all 30,003", len(got))
	}
}

func head(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}

// TestSessionLimits: a run past [sessions] seconds is stopped with its reason, and output past
// [python] max_output_bytes stops the run, which would otherwise print forever; the session
// goes on.
func TestSessionLimits(t *testing.T) {
	_, c, s := sessionKind(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 10 s: the run's time counts from its exec, which a machine under emulation (the VMs) takes
	// seconds to start.
	if err := s.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 64, MemoryMB: 256, Seconds: 10}); err != nil {
		t.Fatal(err)
	}
	id := newSessionID()
	sh := sessionTool(t, "run_bash", "bash")
	res := ranResult(t, callIn(t, c, id, sh, map[string]any{"command": "echo start; sleep 600; echo never"}, nil))
	if res.Stopped != "timeout" || res.Stdout != "start\n" || !strings.Contains(res.Message, "10 seconds") {
		t.Errorf("a run past its time: %+v", res)
	}
	if err := s.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 64, MemoryMB: 256, Seconds: 60}); err != nil {
		t.Fatal(err)
	}
	r := callIn(t, c, id, sh, map[string]any{"command": "yes 'a line that repeats'"}, nil)
	res = ranResult(t, r)
	if res.Stopped != "output" || res.Message != "the code printed more than 1 MiB and was stopped; the session's files are kept" {
		t.Errorf("a run that prints forever: stopped %q, message %q", res.Stopped, res.Message)
	}
	if n := len(r.Stdout()); n != env.outputB {
		t.Errorf("%d bytes were streamed; want the %d of max_output_bytes", n, env.outputB)
	}
	res = ranResult(t, callIn(t, c, id, sh, map[string]any{"command": "echo still here"}, nil))
	if res.Stdout != "still here\n" {
		t.Errorf("the next run: %+v", res)
	}
	err := s.ConfigureSessions(ctx, sdk.SessionsConfig{Seconds: 601})
	if errcode.Code(err) != errcode.BadArgs || err.Error() != "[sessions] seconds must be from 1 to 600, not 601" {
		t.Errorf("Configure with 601 seconds: %v", err)
	}
}

// TestSessionToolsNeedASession: a session tool called without a session is refused with a
// sentence saying what to do; its arguments are checked; Check takes the session tools' tables
// and refuses code in them.
func TestSessionToolsNeedASession(t *testing.T) {
	_, c, _ := sessionKind(t)
	r := callIn(t, c, "", sessionTool(t, "run_python", "python"), map[string]any{"code": "print(1)"}, nil)
	wantError(t, r, errcode.BadArgs, `run_python needs a session: call it with "session" (the conversation's id)`)
	r = callIn(t, c, newSessionID(), sessionTool(t, "run_bash", "bash"), map[string]any{"code": "echo 1"}, nil)
	wantError(t, r, errcode.BadArgs, `run_bash needs "command", a text`)
	r = callIn(t, c, "../../etc", sessionTool(t, "run_bash", "bash"), map[string]any{"command": "echo 1"}, nil)
	if r.ErrorCode() != errcode.BadArgs {
		t.Errorf("a session id that is not the host's: %s %v", r.ErrorCode(), r.Err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, which := range []string{"python", "bash", "files", "file"} {
		got, err := c.Check(ctx, sessionTool(t, "t", which))
		if err != nil || string(got) != `{"session":"`+which+`","type":"python"}` {
			t.Errorf("Check of session %q = %s, %v", which, got, err)
		}
	}
	_, err := c.Check(ctx, sdktest.Tool(t, "t", map[string]any{"type": "python", "session": "python", "code": "def run():\n    pass\n", "seconds": 5}))
	var fe sdk.FieldErrors
	want := "run.code: is not a key of a session tool's run table (type, session): its code comes with each call and its limits are [sessions]'s\n" +
		"run.seconds: is not a key of a session tool's run table (type, session): its code comes with each call and its limits are [sessions]'s"
	if !errors.As(err, &fe) || err.Error() != want {
		t.Errorf("Check of a session tool with code = %v", err)
	}
	_, err = c.Check(ctx, sdktest.Tool(t, "t", map[string]any{"type": "python", "session": "ruby"}))
	if !errors.As(err, &fe) || err.Error() != `run.session: must be "python", "bash", "files" or "file"` {
		t.Errorf("Check of session ruby = %v", err)
	}
}

// TestSessionFilesStayInTheWorkspace: what the code makes in /work to reach out of it (links to
// host-looking paths, /proc's magic links, a FIFO that would hang a reader, a hard link attempt
// to a file outside) is refused by sandbox_file and the Sessions service alike, never followed.
func TestSessionFilesStayInTheWorkspace(t *testing.T) {
	_, c, s := sessionKind(t)
	id := newSessionID()
	res := ranResult(t, callIn(t, c, id, sessionTool(t, "run_bash", "bash"), map[string]any{"command": "set -e\n" +
		"ln -s /etc/passwd passwd\nln -s /proc/self/root root\nln -s .. up\nmkdir -p d && ln -s ../../.. d/out\n" +
		"mkfifo fifo\necho inside > real.txt\nln -s real.txt inner\necho done"}, nil))
	if res.Stdout != "done\n" {
		t.Fatalf("setting up: %+v", res)
	}
	file := sessionTool(t, "sandbox_file", "file")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range []string{"passwd", "root/etc/passwd", "up/x", "d/out/etc/passwd", "fifo", "inner", "/etc/passwd", "real.txt/../../etc/passwd", "."} {
		r := callIn(t, c, id, file, map[string]any{"path": p}, nil)
		if code := r.ErrorCode(); code != errcode.BadPath && code != errcode.NotFound {
			t.Errorf("sandbox_file %q: %s %v %s; want bad_path or not_found", p, code, r.Err, r.Result)
		}
		if _, err := s.ReadFile(ctx, id, p, 0); errcode.Code(err) != errcode.BadPath && errcode.Code(err) != errcode.NotFound {
			t.Errorf("Sessions.ReadFile %q: %v", p, err)
		}
	}
	// Writing over a link replaces the link; writing through one is refused; nothing lands
	// outside.
	if _, err := s.WriteFile(ctx, id, "passwd", strings.NewReader("planted")); err != nil {
		t.Errorf("Sessions.WriteFile over the link passwd: %v", err)
	}
	if got, err := s.ReadFile(ctx, id, "passwd", 0); err != nil || string(got) != "planted" {
		t.Errorf("passwd after writing over the link: %q, %v", got, err)
	}
	for _, p := range []string{"up/planted", "d/out/tmp/planted", "root/tmp/planted"} {
		if _, err := s.WriteFile(ctx, id, p, strings.NewReader("planted")); errcode.Code(err) != errcode.BadPath && errcode.Code(err) != errcode.NotFound {
			t.Errorf("Sessions.WriteFile %q: %v", p, err)
		}
	}
	if _, err := os.Stat("/tmp/planted"); err == nil {
		t.Errorf("a write through a link reached the host's /tmp")
	}
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "planted") {
		t.Errorf("a write through a link reached the host's /etc/passwd")
	}
	r := callIn(t, c, id, file, map[string]any{"path": "real.txt"}, nil)
	wantResult(t, r, `{"path": "real.txt", "size": 7, "encoding": "utf-8", "content": "inside\n"}`)
}

// TestSessionReconfigureKeepsRunsInFlight: new [sessions] limits, or a new [python] table, take
// effect for the next run; a run in flight finishes on the sandbox it started in, and the files
// stay.
func TestSessionReconfigureKeepsRunsInFlight(t *testing.T) {
	k, c, s := sessionKind(t)
	id := newSessionID()
	sh := sessionTool(t, "run_bash", "bash")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inFlight := func(reconfigure func() error) {
		t.Helper()
		started := make(chan struct{})
		var once sync.Once
		done := make(chan *sdktest.Run, 1)
		go func() {
			done <- callIn(t, c, id, sh, map[string]any{"command": "echo started; sleep 3; echo finished >> log; echo finished"}, func(e sdk.Event) {
				if strings.Contains(string(e.Stdout), "started") {
					once.Do(func() { close(started) })
				}
			})
		}()
		select {
		case <-started:
		case r := <-done:
			t.Fatalf("the run ended before it started: %s %v", r.Result, r.Err)
		}
		if err := reconfigure(); err != nil {
			t.Fatal(err)
		}
		res := ranResult(t, <-done)
		if res.ExitCode != 0 || res.Stdout != "started\nfinished\n" || res.Stopped != "" {
			t.Fatalf("the run in flight: %+v", res)
		}
	}
	inFlight(func() error {
		return s.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 64, MemoryMB: 256, Seconds: 2})
	})
	res := ranResult(t, callIn(t, c, id, sh, map[string]any{"command": "sleep 30"}, nil))
	if res.Stopped != "timeout" || !strings.Contains(res.Message, "2 seconds") {
		t.Fatalf("the next run has not the new limit: %+v", res)
	}

	if err := s.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 64, MemoryMB: 256, Seconds: 60}); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	cfg := k.cfg
	k.mu.Unlock()
	raw, _ := json.Marshal(map[string]any{"runsc": cfg.Runsc, "rootfs": cfg.Rootfs, "session_rootfs": cfg.SessionRootfs, "state_dir": cfg.StateDir, "sessions_dir": cfg.SessionsDir,
		"sandbox_prefix": cfg.SandboxPrefix, "max_output_bytes": 2 * env.outputB,
		"pool": map[string]any{"size": 0, "max": 4, "max_idle_minutes": 10}})
	inFlight(func() error { return c.Configure(ctx, raw) })
	res = ranResult(t, callIn(t, c, id, sh, map[string]any{"command": "cat log"}, nil))
	if res.Stdout != "finished\nfinished\n" {
		t.Fatalf("after a new [python] table the session's files read %+v", res)
	}
}

// TestSessionSandboxesCountInPoolMax: [python.pool] max bounds tool runs and session sandboxes
// together. With a max of 1, a tool run finds the place held by an idle session sandbox and
// gets it (that sandbox stopped, its files kept); a session run that finds the place held by
// another session's run in progress fails with too_many_sandboxes through the wire, naming the
// limit and its setting, and the first session goes on.
func TestSessionSandboxesCountInPoolMax(t *testing.T) {
	k, c, s := sessionKindWith(t, map[string]any{"size": 0, "max": 1, "max_idle_minutes": 10}, kindOptions{placeWait: 300 * time.Millisecond})
	a, b := newSessionID(), newSessionID()
	sh := sessionTool(t, "run_bash", "bash")
	if res := ranResult(t, callIn(t, c, a, sh, map[string]any{"command": "echo kept > f"}, nil)); res.ExitCode != 0 {
		t.Fatalf("the first session run: %+v", res)
	}
	if n := k.places.InUse(); n != 1 {
		t.Fatalf("a session with a live sandbox holds %d places; want 1", n)
	}
	wantResult(t, invoke(t, c, "def run():\n    return 7\n", nil, nil), "7")

	started := make(chan struct{})
	var once sync.Once
	done := make(chan *sdktest.Run, 1)
	go func() {
		done <- callIn(t, c, a, sh, map[string]any{"command": "cat f; while [ ! -e stop ]; do sleep 0.1; done"}, func(e sdk.Event) {
			if strings.Contains(string(e.Stdout), "kept") {
				once.Do(func() { close(started) })
			}
		})
	}()
	select {
	case <-started:
	case r := <-done:
		t.Fatalf("the long run ended before it started: %s %v", r.Result, r.Err)
	}
	r := callIn(t, c, b, sh, map[string]any{"command": "true"}, nil)
	want := "the host runs one sandbox at a time ([python.pool] max: tool runs and conversation sandboxes together), and all are running code, none idle to stop: try again when a run has ended, or an admin raises [python.pool] max"
	if r.ErrorCode() != errcode.TooManySandboxes || r.Err.Error() != want {
		t.Errorf("a session run with the one place busy: %s %v; want too_many_sandboxes %q", r.ErrorCode(), r.Err, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	metrics := map[string]float64{}
	for _, m := range k.Metrics(ctx) {
		if m.Labels["shape"] == "" {
			metrics[m.Name+"{"+m.Labels["cap"]+"}"] = m.Value
		}
	}
	for name, want := range map[string]float64{"sandboxes_max{}": 1, "sandboxes_in_use{}": 1, "session_sandboxes_stopped_for_room_total{}": 1,
		"refusals_total{too_many_sandboxes}": 1, "refusals_total{disk_full}": 0} {
		if metrics[name] != want {
			t.Errorf("metric %s = %v; want %v (all: %v)", name, metrics[name], want, metrics)
		}
	}
	if _, err := s.WriteFile(ctx, a, "stop", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	if res := ranResult(t, <-done); res.ExitCode != 0 || res.Stdout != "kept\n" {
		t.Errorf("the long run: %+v; want its file read and an end of its own", res)
	}
	if res := ranResult(t, callIn(t, c, b, sh, map[string]any{"command": "echo b"}, nil)); res.Stdout != "b\n" {
		t.Errorf("b's run once a's ended: %+v", res)
	}
}

// TestSessionFileStreamsOut: a file of 40 MiB the code wrote comes out through the Sessions
// service as the plugin reads it from the workspace, its size said first, byte for byte (its
// SHA-256 as the code computed it).
func TestSessionFileStreamsOut(t *testing.T) {
	_, c, s := sessionKind(t)
	id := newSessionID()
	sh := sessionTool(t, "run_bash", "bash")
	res := ranResult(t, callIn(t, c, id, sh, map[string]any{"command": "head -c 41943040 /dev/urandom > big.bin && sha256sum big.bin | cut -c1-64"}, nil))
	if res.ExitCode != 0 || len(res.Stdout) != 65 {
		t.Fatalf("writing big.bin: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, size, err := s.OpenFile(ctx, id, "big.bin", 64<<20)
	if err != nil || size != 40<<20 {
		t.Fatalf("OpenFile of big.bin = %d, %v; want its 40 MiB", size, err)
	}
	defer r.Close()
	h := sha256.New()
	if n, err := io.Copy(h, r); err != nil || n != size {
		t.Fatalf("reading big.bin: %d bytes, %v", n, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)) + "\n"; got != res.Stdout {
		t.Errorf("big.bin came out with SHA-256 %s; the code wrote %s", got, res.Stdout)
	}
	if _, _, err := s.OpenFile(ctx, id, "big.bin", 1<<20); errcode.Code(err) != errcode.TooLarge {
		t.Errorf("OpenFile of 40 MiB with a bound of 1 MiB = %v; want too_large", err)
	}
}
