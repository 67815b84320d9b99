package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
)

// The caps of the abuse host, small so that the attack reaches each in a few
// seconds. Its sessions_dir is a filesystem of abuseDiskMB of its own:
// room for max_sessions images of abuseSessionMB and abuseKeepFreeMB free,
// with a little to spare, so the caps (not the disk) bound what a caller
// can take, and CI's shared disk is never touched.
const (
	abuseSessionsPerPrincipal  = 5
	abuseMaxSessions           = 7
	abuseTransfersPerPrincipal = 2
	abusePoolMax               = 4
	abuseMaxRunning            = 2
	abuseSessionMB             = 16
	abuseKeepFreeMB            = 16
	abuseDiskMB                = 160
)

// abuseHost is a real host with python tools, conversation sandboxes and two
// editor tokens, attacker and victim, whose sessions_dir is a small
// loop-mounted ext4 filesystem of the test's own.
type abuseHost struct {
	*Host
	attacker, victim string // their tokens
	sessionsFS       string // the mount point of sessions_dir's filesystem
}

const abuseCheckedTool = `name = "checked"
description = "A python tool whose code a check compiles in a sandbox."
[run]
type = "python"
code = '''
def run():
    return 2
'''
`

// startAbuseHost starts the abuse host. When the test ends the host is
// stopped, nothing of its sandboxes may be left, and its filesystem is
// unmounted and removed.
func startAbuseHost(t testing.TB) *abuseHost {
	t.Helper()
	_, runscBin, rootfs := sandboxBuild(t)
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the abuse test makes a filesystem of its own and needs %s: %v", tool, err)
		}
	}
	// A short folder of its own (sandbox socket paths must stay short),
	// 0700 under the sticky /tmp: sessions_dir passes the plugin's trust
	// check.
	dir, err := os.MkdirTemp("", "thab")
	if err != nil {
		t.Fatal(err)
	}
	fsImage, fs := filepath.Join(dir, "sessions.ext4"), filepath.Join(dir, "fs")
	t.Cleanup(func() {
		for _, m := range slices.Backward(mountsUnder(t, fs)) {
			_ = exec.Command("umount", m).Run()
		}
		if out, err := exec.Command("umount", fs).CombinedOutput(); err != nil && fileExists(fs) {
			t.Errorf("unmounting the test's sessions filesystem %s: %v %s", fs, err, out)
		}
		os.RemoveAll(dir)
	})
	if err := os.Mkdir(fs, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fsImage, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = f.Truncate(abuseDiskMB << 20)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", fsImage).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 of the test's sessions filesystem: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", fsImage, fs).CombinedOutput(); err != nil {
		t.Skipf("the abuse test mounts a filesystem of its own (mount -o loop) and can't here: %v %s", err, out)
	}

	b := make([]byte, 20)
	_, _ = rand.Read(b)
	a := &abuseHost{attacker: "att-" + hex.EncodeToString(b[:8]), victim: "vic-" + hex.EncodeToString(b[8:16]), sessionsFS: fs}
	prefix := "thab" + hex.EncodeToString(b[16:18]) + "-"
	pyState := filepath.Join(dir, "py")
	a.Host = startHostIn(t, dir, freePort(t), hostSpec{
		Tools: map[string]string{"trivial.toml": pythonTrivialTool},
		Config: fmt.Sprintf(`
[[tokens]]
name = "attacker"
sha256 = %q
role = "editor"

[[tokens]]
name = "victim"
sha256 = %q
role = "editor"

[runs]
max_running_per_token = %d

[python]
runsc = %q
rootfs = %q
session_rootfs = %q
state_dir = %q
sessions_dir = %q
sandbox_prefix = %q
sessions_keep_free_mb = %d
work_mb = 64
check_seconds = %d

[python.pool]
size = 1
max = %d

[sessions]
enabled = true
disk_mb = %d
memory_mb = 256
idle_minutes = 1
seconds = %d
max_sessions_per_principal = %d
max_sessions = %d
max_transfers_per_principal = %d
`, sha(a.attacker), sha(a.victim), abuseMaxRunning, runscBin, rootfs, sessionRootfs(t, rootfs), pyState, filepath.Join(fs, "sessions"), prefix,
			abuseKeepFreeMB, int(slow(10*time.Second).Seconds()), abusePoolMax, abuseSessionMB, int(slow(30*time.Second).Seconds()), abuseSessionsPerPrincipal, abuseMaxSessions, abuseTransfersPerPrincipal),
	})
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: runscBin, Root: filepath.Join(pyState, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	opts := sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: pyState}
	t.Cleanup(func() {
		a.Stop(t)
		ctx, cancel := context.WithTimeout(context.Background(), slow(time.Minute))
		defer cancel()
		boxes, err := sandbox.Leftovers(ctx, opts)
		if err != nil {
			t.Errorf("looking for the host's sandboxes: %v", err)
		}
		if l := append(append(boxes, mountsUnder(t, fs)...), loopsOn(fs)...); len(l) > 0 {
			t.Errorf("the stopped host left sandboxes, mounts or loop devices behind: %v", l)
			_ = sandbox.Sweep(ctx, opts)
		}
	})
	return a
}

// answer is what the host answered a request: its status, error code (""
// when none), Retry-After header and body.
type answer struct {
	status     int
	code       string
	retryAfter string
	body       []byte
	err        error // the request didn't get an answer
}

func (a answer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	if a.code != "" {
		return fmt.Sprintf("%d %s", a.status, a.code)
	}
	return strconv.Itoa(a.status)
}

// json decodes the answer's body as a JSON object.
func (a answer) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(a.body, &m)
	return m
}

// do makes a request with token and reads the whole answer. It never fails
// the test, so that goroutines may call it.
func (a *abuseHost) do(ctx context.Context, token, method, path string, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, method, a.URL(path), bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if strings.HasSuffix(path, "/call") || strings.Contains(path, "/call?") {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	return readAnswer(resp)
}

// putAndRead is do for a PUT whose body is large: the host may answer a
// refusal (too_many_transfers, disk_full) before it has read the body, and
// close the connection, so the body is written beside reading the answer
// on a connection of its own, and a write cut short by that answer is no
// failure: the answer is.
func (a *abuseHost) putAndRead(ctx context.Context, token, path string, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, a.URL(path), bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Close = true
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", a.Addr)
	if err != nil {
		return answer{err: err}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	go func() { _ = req.Write(conn) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return answer{err: err}
	}
	return readAnswer(resp)
}

// readAnswer reads a response whole, and closes its body.
func readAnswer(resp *http.Response) answer {
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	out := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: raw, err: err}
	if e, ok := out.json()["error"].(map[string]any); ok {
		out.code, _ = e["code"].(string)
	}
	return out
}

// runPython runs code in a session of token's over HTTP.
func (a *abuseHost) runPython(ctx context.Context, token, session, code string) answer {
	body, _ := json.Marshal(map[string]string{"code": code})
	return a.do(ctx, token, http.MethodPost, "/api/v1/tools/run_python/call?session="+session, body)
}

// stdout is the stdout of a run_python's answer, "" when it has no result.
func (a answer) stdout() string {
	res, _ := a.json()["result"].(map[string]any)
	s, _ := res["stdout"].(string)
	return s
}

// tally counts the answers of one path of the attack, by what they were.
type tally struct {
	mu  sync.Mutex
	by  map[string]int
	bad []string // answers that were none of the allowed ones
}

func (c *tally) add(a answer, allowed ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]int{}
	}
	s := a.String()
	c.by[s]++
	if !slices.Contains(allowed, s) {
		if len(c.bad) < 5 {
			c.bad = append(c.bad, fmt.Sprintf("%s: %.300s", s, a.body))
		}
		return
	}
	// too_many_transfers says when to try again.
	if a.code == "too_many_transfers" && a.retryAfter != "1" {
		c.bad = append(c.bad, fmt.Sprintf("too_many_transfers with Retry-After %q, want 1", a.retryAfter))
	}
}

func (c *tally) count(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[s]
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.by)
}

// attack is an editor's attempts on every path at once, each path's
// answers tallied. The sessions it works in (burn, fill, big) are made by
// prepare, before the storm takes what is left of its sessions.
type attack struct {
	h        *abuseHost
	bigSize  int
	sessions tally // PUT of a file into s0..s999
	fill     tally // uploads of 4 MiB into one session until disk_full
	burners  tally // run_python leaving CPU burners behind
	checks   tally // POST /api/v1/tools/check of a python tool
	gets     tally // GET of a large session file
	filled   atomic.Bool
	// paths, when not "", are the paths the attack takes, by number in
	// run's order: "4" is only the storm of checks (the benchmark's
	// TOOLHOST_ABUSE_PATHS, to see which path slows the victim most).
	paths string
}

// burnerCode leaves four processes spinning in the session's sandbox,
// detached from the run, and ends.
const burnerCode = `import subprocess
for i in range(4):
    subprocess.Popen(['nohup', 'python3', '-c', 'while True: pass'], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
print('burning')
`

// burnerCount is code that prints how many burners (burnerCode's) run in
// the session's sandbox. Its needle is put together so that its own
// command line doesn't hold it.
const burnerCount = `import os
needle = b'while True' + b': pass'
n = 0
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            if needle in open('/proc/%s/cmdline' % p, 'rb').read():
                n += 1
        except OSError:
            pass
print('burners', n)
`

// prepare makes the attacker's working sessions: big holds a file of
// bigSize to download, fill is where the disk is filled, burn where the
// burners run.
func (at *attack) prepare(t testing.TB, ctx context.Context) {
	t.Helper()
	big := bytes.Repeat([]byte("0123456789abcdef"), at.bigSize/16)
	if a := at.h.do(ctx, at.h.attacker, http.MethodPut, "/api/v1/sessions/big/files/big.bin", big); a.status != http.StatusOK {
		t.Fatalf("the attacker's upload of a %d MiB file: %v %s", at.bigSize>>20, a, a.body)
	}
	if a := at.h.do(ctx, at.h.attacker, http.MethodPut, "/api/v1/sessions/fill/files/start.txt", []byte("x")); a.status != http.StatusOK {
		t.Fatalf("the attacker's first upload into fill: %v %s", a, a.body)
	}
	if a := at.h.runPython(ctx, at.h.attacker, "burn", "print('ready')"); a.status != http.StatusOK {
		t.Fatalf("the attacker's first run in burn: %v %s", a, a.body)
	}
}

// run tries every path at once and returns when each is done (or ctx
// ends). With forever, each path starts over until ctx ends (the
// benchmark's load).
func (at *attack) run(ctx context.Context, forever bool) {
	h := at.h
	var wg sync.WaitGroup
	path := 0
	spawn := func(n int, f func()) {
		path++
		if at.paths != "" && !strings.Contains(at.paths, strconv.Itoa(path)) {
			return
		}
		for range n {
			wg.Go(func() {
				for {
					f()
					if !forever || ctx.Err() != nil {
						return
					}
				}
			})
		}
	}
	// A thousand sessions, eight at a time; one refused too_many_transfers
	// is tried again (sooner than Retry-After says), up to 20 times.
	var next atomic.Int64
	spawn(8, func() {
		for i := next.Add(1) - 1; i < 1000 && ctx.Err() == nil; i = next.Add(1) - 1 {
			for try := 0; try < 20 && ctx.Err() == nil; try++ {
				a := h.do(ctx, h.attacker, http.MethodPut, fmt.Sprintf("/api/v1/sessions/s%d/files/x", i), []byte("x"))
				at.sessions.add(a, "200", "429 too_many_sessions", "429 too_many_transfers")
				if a.code != "too_many_transfers" {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if forever {
			next.Store(0)
		}
	})
	// Filling the disk: uploads of 4 MiB into fill until disk_full (at
	// most 64 that aren't refused too_many_transfers: the other paths take
	// the attacker's transfers too, and on a slow machine for long).
	spawn(2, func() {
		chunk := bytes.Repeat([]byte{'f'}, 4<<20)
		for i := 0; ctx.Err() == nil && i < 64; {
			a := h.putAndRead(ctx, h.attacker, fmt.Sprintf("/api/v1/sessions/fill/files/f%d-%d", time.Now().UnixNano(), i), chunk)
			at.fill.add(a, "200", "507 disk_full", "429 too_many_transfers")
			if a.code == "disk_full" {
				at.filled.Store(true)
			}
			if at.filled.Load() && !forever {
				return
			}
			if a.code == "too_many_transfers" {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			i++
		}
	})
	// Background burners: runs that leave CPU burners behind, three of them.
	spawn(1, func() {
		for done := 0; done < 3 && ctx.Err() == nil; {
			a := h.runPython(ctx, h.attacker, "burn", burnerCode)
			at.burners.add(a, "200", "429 too_many_runs")
			if a.status == http.StatusOK {
				done++
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	// A storm of checks: 24 at once, three rounds.
	spawn(24, func() {
		for range 3 {
			if ctx.Err() != nil {
				return
			}
			a := h.do(ctx, h.attacker, http.MethodPost, "/api/v1/tools/check", []byte(abuseCheckedTool))
			at.checks.add(a, "200", "429 too_many_runs")
		}
	})
	// Concurrent large downloads: 12 at once, four rounds; one refused
	// too_many_transfers is tried again, up to 20 times.
	spawn(12, func() {
		for range 4 {
			for try := 0; try < 20 && ctx.Err() == nil; try++ {
				a := h.do(ctx, h.attacker, http.MethodGet, "/api/v1/sessions/big/files/big.bin", nil)
				if a.status == http.StatusOK && len(a.body) != at.bigSize {
					a.status, a.code = 0, fmt.Sprintf("a download of %d bytes, not %d", len(a.body), at.bigSize)
				}
				at.gets.add(a, "200", "429 too_many_transfers")
				if a.code != "too_many_transfers" {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	wg.Wait()
}

// victimState is what the victim's session holds: its files, and its
// runs in the ledger.
func (a *abuseHost) victimState(t testing.TB, session string) (files, runs []string) {
	t.Helper()
	ctx := context.Background()
	ans := a.do(ctx, a.victim, http.MethodGet, "/api/v1/sessions/"+session+"/files", nil)
	var fl struct{ Files []struct{ Path string } }
	if err := json.Unmarshal(ans.body, &fl); err != nil || ans.status != http.StatusOK {
		t.Fatalf("listing the victim's files: %v %s", ans, ans.body)
	}
	for _, f := range fl.Files {
		files = append(files, f.Path)
	}
	ans = a.do(ctx, a.victim, http.MethodGet, "/api/v1/runs?limit=1000&session="+session, nil)
	var rl struct{ Runs []map[string]any }
	if err := json.Unmarshal(ans.body, &rl); err != nil || ans.status != http.StatusOK {
		t.Fatalf("listing the victim's runs: %v %s", ans, ans.body)
	}
	for _, r := range rl.Runs {
		b, _ := json.Marshal(r)
		runs = append(runs, string(b))
	}
	return files, runs
}

// metric reads one value of /metrics: the line that starts with name and
// its labels, as the host writes them.
func (a *abuseHost) metric(t testing.TB, line string) float64 {
	t.Helper()
	ans := a.do(context.Background(), a.victim, http.MethodGet, "/metrics", nil)
	if ans.status != http.StatusOK {
		t.Fatalf("GET /metrics: %v", ans)
	}
	for _, l := range strings.Split(string(ans.body), "\n") {
		if v, ok := strings.CutPrefix(l, line+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %q", l)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s:\n%s", line, ans.body)
	return 0
}

// victimCall is the victim's trivial python tool call; "" when it
// succeeded, else what went wrong.
func (a *abuseHost) victimCall(ctx context.Context) string {
	ans := a.do(ctx, a.victim, http.MethodPost, "/api/v1/tools/trivial/call", []byte(`{}`))
	if ans.status != http.StatusOK || fmt.Sprint(ans.json()["result"]) != "1" {
		return fmt.Sprintf("trivial: %v %.300s", ans, ans.body)
	}
	return ""
}

// TestAnEditorCannotExhaustTheHost: an editor tries every path to exhaust
// the host at once (a thousand sessions, filling the disk, background
// burners, a storm of checks, concurrent large downloads) while another
// editor works. Each attempt past a cap gets that cap's error code and
// status; the other editor's python tool calls and its session's runs
// succeed throughout, /healthz answers, none of its session's files or
// ledger rows is lost, the session filesystem keeps its free room, the
// runs' burners end with their run, and /metrics counts the refusals. Then,
// with the session filesystem's room taken from outside, a new session is
// refused disk_full while the victim's session goes on.
func TestAnEditorCannotExhaustTheHost(t *testing.T) {
	h := startAbuseHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), slow(4*time.Minute))
	defer cancel()

	// The victim's session, with a file and runs in the ledger.
	if a := h.do(ctx, h.victim, http.MethodPut, "/api/v1/sessions/notes/files/keep.txt", []byte("the victim's notes")); a.status != http.StatusOK {
		t.Fatalf("the victim's upload: %v %s", a, a.body)
	}
	if a := h.runPython(ctx, h.victim, "notes", "open('made.txt','w').write('made by a run')\nprint('ok')"); !strings.Contains(a.stdout(), "ok") {
		t.Fatalf("the victim's first run: %v %s", a, a.body)
	}
	if msg := h.victimCall(ctx); msg != "" {
		t.Fatalf("the victim's call before the attack: %s", msg)
	}
	filesBefore, runsBefore := h.victimState(t, "notes")

	// 8 MiB to download, less on a slower machine (a VM under TCG): the
	// downloads are there to reach the transfer caps, not to load the disk.
	at := &attack{h: h, bigSize: int(float64(8<<20)/testSlowdown()) &^ 15}
	at.prepare(t, ctx)

	// The victim works throughout: tool calls, runs in its session, and
	// /healthz, until the attack is over.
	attackDone := make(chan struct{})
	var victimCalls, victimRuns, healthz atomic.Int64
	var failMu sync.Mutex
	var failures []string
	fail := func(s string) {
		failMu.Lock()
		defer failMu.Unlock()
		failures = append(failures, s)
	}
	var vwg sync.WaitGroup
	loop := func(min int, n *atomic.Int64, f func() string) {
		vwg.Go(func() {
			for {
				select {
				case <-attackDone:
					if n.Load() >= int64(min) {
						return
					}
				default:
				}
				if ctx.Err() != nil {
					return
				}
				if msg := f(); msg != "" {
					fail(msg)
				}
				n.Add(1)
			}
		})
	}
	loop(5, &victimCalls, func() string { return h.victimCall(ctx) })
	loop(3, &victimRuns, func() string {
		time.Sleep(100 * time.Millisecond)
		a := h.runPython(ctx, h.victim, "notes", "print(open('keep.txt').read())")
		if strings.TrimSpace(a.stdout()) != "the victim's notes" {
			return fmt.Sprintf("run_python in the victim's session: %v %.300s", a, a.body)
		}
		return ""
	})
	loop(10, &healthz, func() string {
		time.Sleep(100 * time.Millisecond)
		if a := h.do(ctx, "", http.MethodGet, "/healthz", nil); a.status != http.StatusOK {
			return "/healthz: " + a.String()
		}
		return ""
	})

	began := time.Now()
	at.run(ctx, false)
	t.Logf("the attack took %v", time.Since(began).Round(time.Millisecond))
	close(attackDone)
	vwg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the test ran out of time: %v", ctx.Err())
	}
	t.Logf("during it the victim made %d tool calls and %d session runs, /healthz answered %d times", victimCalls.Load(), victimRuns.Load(), healthz.Load())
	for _, f := range failures {
		t.Errorf("the victim, during the attack: %s", f)
	}

	// Each path's answers: the allowed ones only, and each cap reached.
	for _, p := range []struct {
		name string
		c    *tally
		want []string // answers each of which must come at least once
	}{
		{"a thousand sessions", &at.sessions, []string{"429 too_many_sessions", "429 too_many_transfers"}},
		{"filling the disk", &at.fill, []string{"200", "507 disk_full"}},
		{"background burners", &at.burners, []string{"200"}},
		{"a storm of checks", &at.checks, []string{"200", "429 too_many_runs"}},
		{"concurrent downloads", &at.gets, []string{"200", "429 too_many_transfers"}},
	} {
		t.Logf("%s: %v", p.name, p.c)
		for _, b := range p.c.bad {
			t.Errorf("%s: an answer that is no cap's: %s", p.name, b)
		}
		for _, w := range p.want {
			if p.c.count(w) == 0 {
				t.Errorf("%s: never answered %s: %v", p.name, w, p.c)
			}
		}
	}
	// The attacker holds no more sessions than its cap: big, fill, burn and
	// what the storm made.
	if made, most := at.sessions.count("200"), abuseSessionsPerPrincipal-3; made > most {
		t.Errorf("the storm made %d sessions; with big, fill and burn the attacker may have only %d more", made, most)
	}
	if ok, most := at.fill.count("200"), abuseSessionMB/4; ok >= most {
		t.Errorf("%d uploads of 4 MiB fitted in a session disk of %d MiB", ok, abuseSessionMB)
	}

	// The host's filesystem kept its room: the session disks took only
	// what was reserved for them.
	var st unix.Statfs_t
	if err := unix.Statfs(h.sessionsFS, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * st.Bsize >> 20; free < abuseKeepFreeMB {
		t.Errorf("the sessions filesystem has %d MiB free after the attack, less than sessions_keep_free_mb (%d)", free, abuseKeepFreeMB)
	}

	// Nothing of the victim's session is lost.
	filesAfter, runsAfter := h.victimState(t, "notes")
	for _, f := range filesBefore {
		if !slices.Contains(filesAfter, f) {
			t.Errorf("the victim's file %s is gone after the attack: %v", f, filesAfter)
		}
	}
	for _, r := range runsBefore {
		if !slices.Contains(runsAfter, r) {
			t.Errorf("a run of the victim's is gone from the ledger (or changed) after the attack: %s", r)
		}
	}
	if len(runsAfter) < len(runsBefore)+int(victimRuns.Load()) {
		t.Errorf("the ledger has %d runs of the victim's session, want the %d before and the %d made during the attack", len(runsAfter), len(runsBefore), victimRuns.Load())
	}
	// The victim may still make a session: the attacker could not take the
	// host's sessions or its disk.
	if a := h.do(ctx, h.victim, http.MethodPut, "/api/v1/sessions/after/files/x", []byte("x")); a.status != http.StatusOK {
		t.Errorf("the victim's new session after the attack: %v %s", a, a.body)
	}

	// The burners end with the run that started them (issue 20 item 2, a
	// run's processes end with the run: merged from i-procs; before it they
	// spun on in the session's sandbox until its idle stop, and this failed
	// with "burners 12").
	if a := h.runPython(ctx, h.attacker, "burn", burnerCount); a.status != http.StatusOK || strings.TrimSpace(a.stdout()) != "burners 0" {
		t.Errorf("the attacker's next run in its session finds its burners still running: %v %q", a, a.stdout())
	}

	// When something else takes the sessions filesystem's room, a new
	// session's disk is refused with disk_full, an error of that session
	// only: the victim's session goes on.
	if a := h.do(ctx, h.attacker, http.MethodDelete, "/api/v1/sessions/big", nil); a.status != http.StatusNoContent {
		t.Fatalf("the attacker's DELETE of a session: %v %s", a, a.body)
	}
	if err := unix.Statfs(h.sessionsFS, &st); err != nil {
		t.Fatal(err)
	}
	filler, err := os.Create(filepath.Join(h.sessionsFS, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filler.Name())
	take := int64(st.Bavail)*st.Bsize - (abuseKeepFreeMB+abuseSessionMB/2)<<20
	err = unix.Fallocate(int(filler.Fd()), 0, 0, take)
	filler.Close()
	if err != nil {
		t.Fatalf("taking %d MiB of the sessions filesystem: %v", take>>20, err)
	}
	if a := h.do(ctx, h.attacker, http.MethodPut, "/api/v1/sessions/nospace/files/x", []byte("x")); a.String() != "507 disk_full" {
		t.Errorf("a new session on a full sessions filesystem: %v %s, want 507 disk_full", a, a.body)
	}
	if a := h.runPython(ctx, h.victim, "notes", "print(open('keep.txt').read())"); strings.TrimSpace(a.stdout()) != "the victim's notes" {
		t.Errorf("the victim's session on a full sessions filesystem: %v %s", a, a.body)
	}
	if a := h.do(ctx, "", http.MethodGet, "/healthz", nil); a.status != http.StatusOK {
		t.Errorf("/healthz on a full sessions filesystem: %v", a)
	}

	// /metrics counts each refusal of a cap.
	for _, m := range []struct {
		line string
		want int
	}{
		{`toolhost_cap_refusals_total{cap="sessions.max_sessions_per_principal"}`, at.sessions.count("429 too_many_sessions")},
		{`toolhost_kind_refusals_total{cap="disk_full",kind="python"}`, 1},
		{`toolhost_cap_refusals_total{cap="sessions.max_transfers_per_principal"}`,
			at.sessions.count("429 too_many_transfers") + at.fill.count("429 too_many_transfers") + at.gets.count("429 too_many_transfers")},
	} {
		if got := h.metric(t, m.line); int(got) != m.want {
			t.Errorf("/metrics %s = %v, want the %d refusals the attacker got", m.line, got, m.want)
		}
	}
}
