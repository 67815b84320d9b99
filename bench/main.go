// Command bench measures a trivial python tool call through toolhost — pool
// of ready sandboxes on and off, over HTTP and over the websocket — side by
// side, in the same run, with the designs it replaces: a plain Debian
// python3 subprocess under rlimits (the predecessor's), bubblewrap on the
// same rootfs, and podman running runsc on it. It prints one table. Run it with `make bench` (root; it
// needs bin/ and build/ from `make build sandbox`).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/toolhost/toolhost/client"
)

// runner is the predecessor's design: python3 -I -S -B sets its own
// rlimits, reads the code and the args on stdin and calls run(**args).
const runner = `
import json, resource, sys
resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
resource.setrlimit(resource.RLIMIT_FSIZE, (50 << 20, 50 << 20))
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
src = json.loads(sys.stdin.readline())
args = json.loads(sys.stdin.readline())
scope = {"__name__": "tool"}
exec(compile(src, "tool.py", "exec"), scope)
sys.stdout.write(json.dumps(scope["run"](**args)))
`

const trivialCode = "def run():\n    return 1\n"

type options struct {
	root     string
	n        int
	duration time.Duration
	poolSize int
	// idle is how long each host sits up and idle, after its warm-up calls, before anything is
	// measured: longer than go-plugin's broker timeout (5 s) and the pool's health check, so
	// the tables are the steady state of a host that has been running, not its first seconds.
	idle time.Duration
	// sessionsOnly measures conversation sandboxes alone.
	sessionsOnly bool
	// pacedOnly measures the pool at an agent's pace alone (pacedRows).
	pacedOnly bool
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", ".", "the repository root (bin/ and build/ inside)")
	flag.IntVar(&o.n, "n", 200, "calls per latency row")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long each throughput row runs")
	flag.IntVar(&o.poolSize, "pool", 4, "ready sandboxes kept when the pool is on")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "how long each host is up and idle before measuring (the steady state)")
	flag.BoolVar(&o.sessionsOnly, "sessions-only", false, "measure only the conversation sandboxes' rows")
	flag.BoolVar(&o.pacedOnly, "paced-only", false, "measure only the pool's rows at an agent's pace (calls 0.1 s apart, bursts of 4 every second)")
	flag.Parse()
	root, err := filepath.Abs(o.root)
	if err != nil {
		fail(err)
	}
	o.root = root
	if err := run(o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

type row struct {
	name string
	d    []time.Duration
}

type throughput struct {
	name        string
	concurrency int
	calls       int64
	failed      int64
	seconds     float64
	cold        float64 // calls that started a sandbox cold
	alive       int     // sandboxes (ready, running or being removed) at the end
}

// run measures every row (the baselines, the host with the pool off and
// on, conversation sandboxes) and prints them with their notes.
func run(o options) error {
	var rows []row
	var tput []throughput
	var notes []string
	fmt.Fprintf(os.Stderr, "bench: %s, %d calls a row, throughput rows of %v, each host idle %v before measuring\n", time.Now().UTC().Format(time.RFC3339), o.n, o.duration, o.idle)
	notes = append(notes, fmt.Sprintf("steady state: each host was up, warmed up and then idle for %v before its rows were measured", o.idle))

	base, err := baseline(o)
	if err != nil {
		return err
	}
	rows = append(rows, base...)
	if r, note := podman(o); note != "" {
		notes = append(notes, note)
	} else {
		rows = append(rows, r)
	}
	if o.sessionsOnly {
		srows, snotes, err := sessionRows(o)
		if err != nil {
			return err
		}
		print(append(rows, srows...), nil, append(notes, snotes...))
		return nil
	}
	if o.pacedOnly {
		h, err := startHost(o, o.poolSize, "", 1)
		if err != nil {
			return err
		}
		for i := 0; i < 5; i++ {
			if _, err := h.callHTTP(); err != nil {
				h.stop()
				return fmt.Errorf("warm-up call failed: %w\n%s", err, h.log.String())
			}
		}
		time.Sleep(o.idle)
		prows, pnotes := h.pacedRows(fmt.Sprintf("pool on (%d ready)", o.poolSize))
		h.stop()
		print(append(rows, prows...), nil, append(notes, pnotes...))
		return nil
	}
	if r, note := bubblewrap(o); note != "" {
		notes = append(notes, note)
	} else {
		rows = append(rows, r)
	}

	for _, pool := range []int{0, o.poolSize} {
		prows, ptput, pnotes, err := poolRows(o, pool)
		if err != nil {
			return err
		}
		rows = append(rows, prows...)
		tput = append(tput, ptput...)
		notes = append(notes, pnotes...)
	}
	srows, snotes, err := sessionRows(o)
	if err != nil {
		return err
	}
	rows = append(rows, srows...)
	notes = append(notes, snotes...)
	print(rows, tput, notes)
	return nil
}

// poolRows measures one host with the sandbox pool off (pool 0) or holding
// pool ready sandboxes, once warmed up and idle: the latency of an HTTP
// and a websocket call, the throughput rows, and notes on memory.
func poolRows(o options, pool int) (rows []row, tput []throughput, notes []string, err error) {
	label := "pool off"
	if pool > 0 {
		label = fmt.Sprintf("pool on (%d ready)", pool)
	}
	h, err := startHost(o, pool, "", 1)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := 0; i < 5; i++ { // warm up
		if _, err := h.callHTTP(); err != nil {
			h.stop()
			return nil, nil, nil, fmt.Errorf("warm-up call failed: %w\n%s", err, h.log.String())
		}
	}
	fmt.Fprintf(os.Stderr, "bench: host with the %s up; idle %v before measuring\n", label, o.idle)
	time.Sleep(o.idle)
	// With the pool on, each latency call waits (untimed) until a sandbox is ready: the row
	// is the latency of a call that finds one, the throughput rows what happens when calls
	// come faster than sandboxes start.
	h.pooled = pool > 0
	cold0 := h.metric("pool_cold_starts_total")
	rows = append(rows, row{name: "toolhost HTTP call, " + label, d: h.repeat(o.n, h.callHTTP)})
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	conn, err := client.Dial(dctx, h.addr, client.Options{Client: "bench"})
	dcancel()
	if err != nil {
		h.stop()
		return nil, nil, nil, err
	}
	rows = append(rows, row{name: "toolhost websocket call, " + label, d: h.repeat(o.n, func() (time.Duration, error) {
		return callWS(conn)
	})})
	_ = conn.Close()
	if pool > 0 {
		notes = append(notes, fmt.Sprintf("latency rows with the pool on: %.0f of %d calls started a sandbox cold", h.metric("pool_cold_starts_total")-cold0, 2*o.n))
	}
	h.pooled = false
	if pool > 0 {
		prows, pnotes := h.pacedRows(label)
		rows = append(rows, prows...)
		notes = append(notes, pnotes...)
	}
	for _, c := range []int{1, 2, 8} {
		tput = append(tput, h.throughput(label, c, o.duration))
	}
	if pool > 0 {
		// Let the removals finish and the pool settle back to its size.
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if _, n := readySandboxMemory(h.prefix); n <= pool && h.metric("pool_ready") >= float64(pool) {
				break
			}
		}
		if mib, n := readySandboxMemory(h.prefix); n > 0 {
			notes = append(notes, fmt.Sprintf("memory of one ready sandbox (memcg usage, mean of %d): %.1f MiB", n, mib))
		}
		if mib, n := readySandboxPSS(h.prefix); n > 0 {
			notes = append(notes, fmt.Sprintf("memory of one ready sandbox (PSS of its processes, mean of %d): %.1f MiB", n, mib))
		}
	}
	notes = append(notes, fmt.Sprintf("memory of the host and its plugins (RSS), %s: %.1f MiB", label, h.rssMiB()))
	h.stop()
	return rows, tput, notes, nil
}

// sessionRows measures conversation sandboxes: run_python("print(1)") in a
// warm session (HTTP), the first run of a new session, the first run after
// an idle stop, and how many warm sessions a GiB of memory holds.
func sessionRows(o options) ([]row, []string, error) {
	h, err := startHost(o, 0, "[sessions]\nenabled = true\nidle_minutes = 1\ndisk_mb = 64\n", 5)
	if err != nil {
		return nil, nil, err
	}
	defer h.stop()
	warm := func(session string) func() (time.Duration, error) {
		return func() (time.Duration, error) { return h.runPython(session, "print(1)") }
	}
	for i := 0; i < 3; i++ {
		if _, err := h.runPython("bench", "print(1)"); err != nil {
			return nil, nil, fmt.Errorf("warm-up run failed: %w\n%s", err, h.log.String())
		}
	}
	fmt.Fprintf(os.Stderr, "bench: host with sessions up; idle 50 s (under idle_minutes) before measuring\n")
	time.Sleep(50 * time.Second)
	var rows []row
	rows = append(rows, row{name: "toolhost run_python(print(1)), warm session, HTTP", d: h.repeat(o.n, warm("bench"))})
	// New conversations come seconds apart: each finds the ready sandbox
	// ([python.pool] ready_sessions = 1) that the one before left time to
	// start. Back to back, all but the first outrun its refill.
	var fresh, rushed []time.Duration
	for i := 0; i < 5; i++ {
		time.Sleep(3 * time.Second)
		d, err := h.runPython(fmt.Sprintf("new-%d", i), "print(1)")
		if err != nil {
			return nil, nil, err
		}
		fresh = append(fresh, d)
	}
	rows = append(rows, row{name: "toolhost run_python, first run of a new session (3 s apart)", d: fresh})
	time.Sleep(3 * time.Second)
	for i := 0; i < 5; i++ {
		d, err := h.runPython(fmt.Sprintf("rush-%d", i), "print(1)")
		if err != nil {
			return nil, nil, err
		}
		rushed = append(rushed, d)
	}
	rows = append(rows, row{name: "toolhost run_python, first run of a new session (5 back to back)", d: rushed})
	var notes []string
	if mib, n := readySandboxMemory(h.prefix); n > 0 {
		notes = append(notes, fmt.Sprintf("memory of one warm session's sandbox (memcg usage, mean of %d, the ready one's with them): %.1f MiB, so about %.0f warm sessions per GiB; a session stopped while idle holds no memory: only its image, and its checkpoint (network off) until its next run", n, mib, 1024/mib))
	}
	if du, err := exec.Command("du", "-sk", filepath.Join(h.dir, "state", "sessions")).Output(); err == nil {
		if f := strings.Fields(string(du)); len(f) > 0 {
			kib, _ := strconv.ParseFloat(f[0], 64)
			notes = append(notes, fmt.Sprintf("disk of the %d sessions' images and the ready sandbox's after print(1) runs: %.1f MiB in all (each reserves its disk_mb, 64)", 11, kib/1024))
		}
	}
	// The scientific stack of the session rootfs: its first import in a conversation (the
	// sessions of the 3 s row, warm), then a first figure (matplotlib's import and font cache,
	// the figure drawn and sent as an image), then a warm pandas cell.
	var pandas, figure, warmPandas []time.Duration
	for i := 2; i < 5; i++ {
		s := fmt.Sprintf("new-%d", i)
		for _, step := range []struct {
			code string
			into *[]time.Duration
		}{
			{"import pandas as pd\nprint(1)", &pandas},
			{"import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint(1)", &figure},
			{"print(int(pd.DataFrame({'a': range(1000)}).sum().iloc[0] > 0))", &warmPandas},
		} {
			d, err := h.runPython(s, step.code)
			if err != nil {
				return nil, nil, err
			}
			*step.into = append(*step.into, d)
		}
	}
	rows = append(rows, row{name: "toolhost run_python(import pandas), first in a warm session", d: pandas},
		row{name: "toolhost run_python, first matplotlib figure (shown as an image)", d: figure},
		row{name: "toolhost run_python, a pandas cell once imported", d: warmPandas})
	// The idle stop checkpoints the sandboxes; the next run restores one, its names kept (a
	// name defined before the stop is printed after it: a new interpreter would fail the row).
	// Conversations come back seconds apart: each resume finds the sandbox prepared for it,
	// which the one before left time to make; back to back, all but the first restore the whole
	// way. Sessions that imported pandas have larger checkpoints.
	resumes := []struct {
		name     string
		sessions []string
		apart    time.Duration
	}{
		{"toolhost run_python, first run after an idle stop (resumed, names kept, 3 s apart)", []string{"new-0", "new-1", "rush-0", "rush-1", "rush-2"}, 3 * time.Second},
		{"toolhost run_python, same, pandas imported before the stop (3 s apart)", []string{"new-2", "new-3", "new-4"}, 3 * time.Second},
		{"toolhost run_python, first run after an idle stop (3 back to back)", []string{"rush-3", "rush-4", "bench"}, 0},
	}
	for _, r := range resumes {
		for _, s := range r.sessions {
			if _, err := h.runPython(s, "kept = 1\nprint(kept)"); err != nil {
				return nil, nil, err
			}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: waiting for the idle stop (idle_minutes = 1)\n")
	time.Sleep(75 * time.Second)
	for _, r := range resumes {
		var afterStop []time.Duration
		for _, s := range r.sessions {
			time.Sleep(r.apart)
			d, err := h.runPython(s, "print(kept)")
			if err != nil {
				return nil, nil, fmt.Errorf("the first run after an idle stop didn't find the names of before: %w", err)
			}
			afterStop = append(afterStop, d)
		}
		rows = append(rows, row{name: r.name, d: afterStop})
	}
	return rows, notes, nil
}

// runPython calls run_python in a session over HTTP.
func (h *host) runPython(session, code string) (time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"code": code})
	t0 := time.Now()
	resp, err := h.client.Post("http://"+h.addr+"/api/v1/tools/run_python/call?session="+session, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	el := time.Since(t0)
	var r struct {
		Result struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &r) != nil || r.Result.Stdout != "1\n" || r.Result.ExitCode != 0 {
		return 0, fmt.Errorf("unexpected answer %d: %s", resp.StatusCode, b)
	}
	return el, nil
}

// repeat calls f n times and keeps the durations of those that worked.
func (h *host) repeat(n int, f func() (time.Duration, error)) []time.Duration {
	var out []time.Duration
	for i := 0; i < n; i++ {
		if h.pooled {
			h.waitReady()
		}
		d, err := f()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: a call failed:", err)
			continue
		}
		out = append(out, d)
	}
	return out
}

func baseline(o options) ([]row, error) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		return nil, fmt.Errorf("the baseline needs Debian's %s: %w", py, err)
	}
	stdin := mustJSON(trivialCode) + "\n{}\n"
	var d []time.Duration
	for i := 0; i < o.n; i++ {
		tmp, _ := os.MkdirTemp("", "bench-py-")
		t0 := time.Now()
		cmd := exec.Command(py, "-I", "-S", "-B", "-c", runner)
		cmd.Dir = tmp
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + tmp, "LANG=C.UTF-8"}
		cmd.Stdin = strings.NewReader(stdin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, err := cmd.Output()
		el := time.Since(t0)
		os.RemoveAll(tmp)
		if err != nil || string(out) != "1" {
			return nil, fmt.Errorf("the python3 baseline failed: %v %q", err, out)
		}
		d = append(d, el)
	}
	return []row{{name: "python3 subprocess + rlimits (predecessor)", d: d}}, nil
}

// installed returns the path of the program name, installing the Debian package pkg with apt
// when it is missing; or, when it can't be had, a note that says so.
func installed(name, pkg string) (string, string) {
	if bin, err := exec.LookPath(name); err == nil {
		return bin, ""
	}
	script := fmt.Sprintf("apt-get install -y -q %[1]s >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q %[1]s >/dev/null 2>&1)", pkg)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		return "", pkg + ": not installable here (" + strings.TrimSpace(string(out)) + ")"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", pkg + ": not installable here"
	}
	return bin, ""
}

func bubblewrap(o options) (row, string) {
	bwrap, note := installed("bwrap", "bubblewrap")
	if note != "" {
		return row{}, note
	}
	rootfs := filepath.Join(o.root, "build/rootfs")
	stdin := mustJSON(trivialCode) + "\n{}\n"
	var d []time.Duration
	for i := 0; i < o.n; i++ {
		t0 := time.Now()
		cmd := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", rootfs, "/", "--proc", "/proc",
			"--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
			"/usr/bin/python3", "-I", "-S", "-B", "-c", runner)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "1" {
			return row{}, fmt.Sprintf("bubblewrap: failed here (%v: %s)", err, strings.TrimSpace(string(out)))
		}
		d = append(d, time.Since(t0))
	}
	return row{name: "bubblewrap --unshare-all, same rootfs", d: d}, ""
}

// podmanCalls is how many calls podman's row makes (each takes about half a second).
const podmanCalls = 40

// podman measures what a user who runs gVisor under a container engine gets: `podman --runtime
// runsc run --rm` of the same runner and rootfs (an overlay on it, :O, which podman writes to,
// not the rootfs), no network, installed with apt when missing. podman has no image registry
// here, so it is given the rootfs; on these machines it needs cgroupfs and a nofile limit.
func podman(o options) (row, string) {
	bin, note := installed("podman", "podman")
	if note != "" {
		return row{}, note
	}
	runsc := filepath.Join(o.root, "build/bin/runsc")
	rootfs := filepath.Join(o.root, "build/rootfs")
	stdin := mustJSON(trivialCode) + "\n{}\n"
	var d []time.Duration
	for i := 0; i < min(o.n, podmanCalls); i++ {
		t0 := time.Now()
		cmd := exec.Command(bin, "--runtime", runsc, "--cgroup-manager", "cgroupfs", "run", "--rm", "-i",
			"--ulimit", "nofile=1024:1024", "--network", "none", "--workdir", "/tmp", "--rootfs", rootfs+":O",
			"/usr/bin/python3", "-I", "-S", "-B", "-c", runner)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "1" {
			return row{}, fmt.Sprintf("podman: failed here (%v: %s)", err, strings.TrimSpace(string(out)))
		}
		d = append(d, time.Since(t0))
	}
	return row{name: "podman --runtime runsc run --rm, same rootfs", d: d}, ""
}

type host struct {
	dir    string // config, tools and sandbox state; removed by stop
	addr   string
	pooled bool // latency calls wait for a ready sandbox first
	prefix string
	cmd    *exec.Cmd
	log    *bytes.Buffer
	client *http.Client
}

// startHost starts a host serving the python tool "one", with its pool
// of ready sandboxes at pool, extra added to its config, and waits until
// it serves wantTools tools.
func startHost(o options, pool int, extra string, wantTools int) (*host, error) {
	dir, err := os.MkdirTemp("", "toolhost-bench-")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		return nil, err
	}
	tool := "name = \"one\"\ndescription = \"Returns 1.\"\n[run]\ntype = \"python\"\ncode = '''\n" + trivialCode + "'''\n"
	if err := os.WriteFile(filepath.Join(dir, "tools", "one.toml"), []byte(tool), 0o644); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	prefix := fmt.Sprintf("thbench%d-", pool)
	poolMax := 16
	if pool > poolMax {
		poolMax = pool
	}
	cfg := fmt.Sprintf(`tools_dir = "tools"
[server]
listen = %q
state_dir = %q
[plugins]
dir = %q
sha256_file = %q
[python]
runsc = %q
rootfs = %q
state_dir = %q
sandbox_prefix = %q
[python.pool]
size = %d
max = %d
[log]
level = "warn"
%s
`, addr, filepath.Join(dir, "hoststate"), filepath.Join(o.root, "bin/plugins"), filepath.Join(o.root, "bin/pins.toml"),
		filepath.Join(o.root, "build/bin/runsc"), filepath.Join(o.root, "build/rootfs"), filepath.Join(dir, "state"), prefix, pool, poolMax, extra)
	path := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	h := &host{dir: dir, addr: addr, prefix: prefix, log: &bytes.Buffer{}, client: &http.Client{Timeout: 60 * time.Second}}
	h.cmd = exec.Command(filepath.Join(o.root, "bin/toolhost"), "serve", "--config", path)
	h.cmd.Stderr = h.log
	h.cmd.Stdout = h.log
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			var body struct{ Tools int }
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if body.Tools == wantTools {
				time.Sleep(2 * time.Second) // let the pool fill
				return h, nil
			}
			h.stop()
			return nil, fmt.Errorf("the host serves no python tool:\n%s", h.log.String())
		}
	}
	h.stop()
	return nil, fmt.Errorf("the host did not start:\n%s", h.log.String())
}

func (h *host) stop() {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
	}
	_ = os.RemoveAll(h.dir)
}

// pacedRows measures HTTP calls at an agent's pace, none waiting for the pool: 100 calls started
// 0.1 s apart, then 30 bursts of 4 calls at once, 1 s apart (issue 22's goal: p50 at most 0.25×
// python3 and p90 at most 1× once the pool has learnt the pace). It notes how many started a
// sandbox cold.
func (h *host) pacedRows(label string) ([]row, []string) {
	var rows []row
	var notes []string
	paced := func(name string, rounds, each int, every time.Duration) {
		cold0 := h.metric("pool_cold_starts_total")
		var mu sync.Mutex
		var d []time.Duration
		var failed int
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < rounds; i++ {
			time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
			for j := 0; j < each; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					took, err := h.callHTTP()
					if err != nil {
						fmt.Fprintln(os.Stderr, "bench: a paced call failed:", err)
						mu.Lock()
						failed++
						mu.Unlock()
						return
					}
					mu.Lock()
					d = append(d, took)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		rows = append(rows, row{name: "toolhost HTTP call, " + label + ", " + name, d: d})
		notes = append(notes, fmt.Sprintf("%s: %.0f of %d calls started a sandbox cold, %d failed (said on stderr); the pool's target after them: %.0f", name, h.metric("pool_cold_starts_total")-cold0, rounds*each, failed, h.metric("pool_target")))
	}
	paced("calls 0.1 s apart", 100, 1, 100*time.Millisecond)
	time.Sleep(5 * time.Second) // the pool refills between the two
	paced("bursts of 4 every 1 s", 30, 4, time.Second)
	return rows, notes
}

// callHTTP makes one call of the trivial tool over HTTP and says how long it took.
func (h *host) callHTTP() (time.Duration, error) {
	t0 := time.Now()
	resp, err := h.client.Post("http://"+h.addr+"/api/v1/tools/one/call", "application/json", strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	el := time.Since(t0)
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(body, &r) != nil || string(r.Result) != "1" {
		return 0, fmt.Errorf("unexpected answer %d: %s", resp.StatusCode, body)
	}
	return el, nil
}

func callWS(conn *client.Conn) (time.Duration, error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := conn.Call(ctx, "one", map[string]any{}, nil)
	if err != nil {
		return 0, err
	}
	if string(res) != "1" {
		return 0, fmt.Errorf("result %s", res)
	}
	return time.Since(t0), nil
}

func (h *host) throughput(label string, c int, d time.Duration) throughput {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cold0 := h.metric("pool_cold_starts_total")
	var calls, failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := h.callHTTP(); err != nil {
					failed.Add(1)
				} else {
					calls.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0).Seconds()
	_, alive := readySandboxMemory(h.prefix)
	return throughput{name: label, concurrency: c, calls: calls.Load(), failed: failed.Load(), seconds: el,
		cold: h.metric("pool_cold_starts_total") - cold0, alive: alive}
}

// readySandboxMemory is the mean memcg usage of the sandboxes of a prefix.
func readySandboxMemory(prefix string) (float64, int) {
	paths, _ := filepath.Glob("/sys/fs/cgroup/memory/" + prefix + "*/memory.usage_in_bytes")
	var sum float64
	n := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			continue
		}
		sum += v
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n) / (1 << 20), n
}

// readySandboxPSS is the mean PSS of the processes of each sandbox of a prefix (sandbox, gofer,
// systrap stubs): what each costs, shared pages split among their users.
func readySandboxPSS(prefix string) (float64, int) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/memory/" + prefix + "*")
	var sum float64
	n := 0
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		var kb float64
		for _, pid := range strings.Fields(string(b)) {
			r, _ := os.ReadFile("/proc/" + pid + "/smaps_rollup")
			for _, line := range strings.Split(string(r), "\n") {
				if v, ok := strings.CutPrefix(line, "Pss:"); ok {
					x, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
					kb += x
				}
			}
		}
		if kb > 0 {
			sum += kb / 1024
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// metric reads a python pool metric of the no_network shape from /metrics (0 when absent).
func (h *host) metric(name string) float64 {
	resp, err := h.client.Get("http://" + h.addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "toolhost_kind_"+name+"{") && strings.Contains(line, `shape="no_network"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}

// waitReady waits (up to 10 s) until the pool has a sandbox ready.
func (h *host) waitReady() {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if h.metric("pool_ready") >= 1 {
			return
		}
	}
}

// rssMiB is the resident memory of the host and its plugin processes.
func (h *host) rssMiB() float64 {
	pids := []int{h.cmd.Process.Pid}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(h.cmd.Process.Pid) {
			if exe, _ := os.Readlink("/proc/" + e.Name() + "/exe"); strings.Contains(exe, "toolhost-plugin-") {
				pids = append(pids, pid)
			}
		}
	}
	var kb float64
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				kb += n
			}
		}
	}
	return kb / 1024
}

func quantile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
}

func print(rows []row, tput []throughput, notes []string) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(os.Stdout, "trivial python call (return 1), %s, %s\n\n", time.Now().UTC().Format("2006-01-02"), machine())
	fmt.Fprintln(w, "what\tp50 ms\tp90 ms\tp99 ms\tn\tp50 vs python3\t")
	var base float64
	for _, r := range rows {
		if base == 0 {
			base = quantile(r.d, 0.5)
		}
		p50 := quantile(r.d, 0.5)
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.2f\t%d\t%.2f×\t\n", r.name, p50, quantile(r.d, 0.9), quantile(r.d, 0.99), len(r.d), p50/base)
	}
	_ = w.Flush()
	fmt.Println()
	fmt.Fprintln(w, "throughput (every call in a fresh sandbox, HTTP)\tconcurrency\tcalls/s\tcalls\tfailed\tcold starts\tsandboxes at end\t")
	best := throughput{}
	for _, t := range tput {
		fmt.Fprintf(w, "%s\t%d\t%.1f\t%d\t%d\t%.0f\t%d\t\n", t.name, t.concurrency, float64(t.calls)/t.seconds, t.calls, t.failed, t.cold, t.alive)
		if t.seconds > 0 && (best.seconds == 0 || float64(t.calls)/t.seconds > float64(best.calls)/best.seconds) {
			best = t
		}
	}
	_ = w.Flush()
	fmt.Println()
	if best.seconds > 0 {
		fmt.Printf("highest sustained rate of fresh sandboxes: %.1f/s (%s, concurrency %d, %.0f s)\n", float64(best.calls)/best.seconds, best.name, best.concurrency, best.seconds)
	}
	for _, n := range notes {
		fmt.Println(n)
	}
}

func machine() string {
	var u syscall.Utsname
	_ = syscall.Uname(&u)
	var b []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	n, _ := os.ReadFile("/proc/cpuinfo")
	cores := strings.Count(string(n), "processor\t:")
	return fmt.Sprintf("linux %s, %d cores", b, cores)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
