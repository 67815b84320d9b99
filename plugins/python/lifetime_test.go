package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
)

// These tests are about how long sandboxes live: never shorter than their run because another
// process of the same prefix started or stopped (toolhost check beside a live host), and never
// longer than their run or their plugin.

// kindConfig is a [python] table of the tests' runsc, rootfs and state folder with prefix, and
// a pool of size (max 4).
func kindConfig(prefix string, size int) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": env.rootfs, "session_rootfs": env.sessionRootfs,
		"state_dir": env.stateDir, "sandbox_prefix": prefix, "work_mb": env.workMB, "tmp_mb": 32, "pids": 64,
		"max_output_bytes": env.outputB, "pool": map[string]any{"size": size, "max": 4, "max_idle_minutes": 10}})
	return raw
}

// onlyOnce skips a test in the pool-off pass of the suite: it makes kinds of its own, so one pass
// proves what it proves.
func onlyOnce(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	if env.poolSize == 0 {
		t.Skip("runs in the pass of the suite with the pool on")
	}
}

// assertNothingLeft asserts that nothing of prefix is on the host.
func assertNothingLeft(t *testing.T, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(env.stateDir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	left, err := sandbox.Leftovers(ctx, sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: env.stateDir})
	if err != nil || len(left) > 0 {
		t.Errorf("left of %s: %v %v", prefix, left, err)
	}
}

// startRun invokes code on k in the background; the returned channel gets the run's result once
// it ends. It returns once the code printed "started".
func startRun(t *testing.T, k *kind, code string, run map[string]any) <-chan error {
	t.Helper()
	table := map[string]any{"type": "python", "code": code}
	for key, v := range run {
		table[key] = v
	}
	raw, _ := json.Marshal(table)
	started := make(chan struct{})
	var once sync.Once
	emit := func(e sdk.Event) {
		if bytes.Contains(e.Stdout, []byte("started")) {
			once.Do(func() { close(started) })
		}
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := k.Invoke(ctx, sdk.Call{Tool: sdk.Tool{Name: "test_tool", Run: raw}, Args: json.RawMessage(`{}`)}, emit)
		if err == nil && string(res) != `"done"` {
			err = fmt.Errorf("the run returned %s, not \"done\"", res)
		}
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the run ended before it started: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the run didn't start")
	}
	return done
}

// TestCheckBesideALiveHostLeavesItsSandboxes: a second process on the same prefix and state folder
// (toolhost check beside the running host, or a second host) configures, checks a tool and
// closes; the first one's run in flight ends with its result and its ready sandboxes are still
// there, alive.
func TestCheckBesideALiveHostLeavesItsSandboxes(t *testing.T) {
	t.Parallel()
	onlyOnce(t)
	prefix := testPrefix("thck")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	host := newKind(kindOptions{})
	if err := host.Configure(ctx, kindConfig(prefix, 1)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := host.Close(ctx); err != nil {
			t.Errorf("closing the host's kind: %v", err)
		}
		assertNothingLeft(t, prefix)
	}()
	run := startRun(t, host, "import time\ndef run():\n    print('started', flush=True)\n    time.sleep(4)\n    return 'done'\n", nil)
	awaitReady(t, host)
	cur, _ := host.current()
	ready := cur.pool.ReadyIDs()

	for _, checkOnly := range []bool{true, false} { // toolhost check, then a second host
		check := newKind(kindOptions{CheckOnly: checkOnly})
		if err := check.Configure(ctx, kindConfig(prefix, 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := check.Check(ctx, pyTool(t, "def run():\n    return 1\n", nil)); err != nil {
			t.Errorf("checking a tool beside the host: %v", err)
		}
		if c, _ := check.current(); checkOnly && len(c.pool.Stats()) > 0 && c.pool.Stats()[0].Ready > 0 {
			t.Error("a check-only kind keeps sandboxes ready")
		}
		if err := check.Close(ctx); err != nil {
			t.Errorf("closing the second kind: %v", err)
		}
	}

	if err := <-run; err != nil {
		t.Errorf("the host's run in flight: %v", err)
	}
	rt, _ := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(env.stateDir, "runsc")})
	for _, id := range ready {
		if st, err := rt.State(ctx, id); err != nil || st.Status != "running" {
			t.Errorf("the host's ready sandbox %s: %+v %v", id, st, err)
		}
	}
	if st := poolStats(t, host); st.Died > 0 {
		t.Errorf("the host's pool lost ready sandboxes: %+v", st)
	}
	if r := runPooledOn(t, host); r.err != nil || string(r.res) != `"alive"` {
		t.Errorf("a run on the host's pool afterwards: %s %v", r.res, r.err)
	}
}

// runPooledOn runs a trivial tool on k's pool and asserts it got a ready sandbox.
func runPooledOn(t *testing.T, k *kind) *sdkRun {
	t.Helper()
	awaitReady(t, k)
	before := poolStats(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := k.Invoke(ctx, sdk.Call{Tool: pyTool(t, "def run():\n    return 'alive'\n", nil), Args: json.RawMessage(`{}`)}, func(sdk.Event) {})
	if after := poolStats(t, k); after.HandedOut != before.HandedOut+1 {
		t.Errorf("the run wasn't handed a ready sandbox: before %+v, after %+v", before, after)
	}
	return &sdkRun{res, err}
}

// helperEnv makes the test binary a plugin-like process (see runHelper).
const helperEnv = "TOOLHOST_PYTHON_TEST_HELPER"

// helperSpec is what runHelper does: configure a kind with Config, start Code (which prints
// "started") and wait until the pool has a sandbox ready again.
type helperSpec struct {
	Config json.RawMessage
	Run    map[string]any
}

// runHelper is the test binary run as a stand-in for the plugin process: it configures a kind,
// starts a run, says "running" once the run started and a sandbox is ready in the pool, and
// waits to be killed.
func runHelper(spec string) int {
	var h helperSpec
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		fmt.Println("bad spec:", err)
		return 2
	}
	k := newKind(kindOptions{})
	ctx := context.Background()
	if err := k.Configure(ctx, h.Config); err != nil {
		fmt.Println("configure:", err)
		return 1
	}
	raw, _ := json.Marshal(h.Run)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := k.Invoke(ctx, sdk.Call{Tool: sdk.Tool{Name: "test_tool", Run: raw}, Args: json.RawMessage(`{}`)}, func(e sdk.Event) {
			if bytes.Contains(e.Stdout, []byte("started")) {
				once.Do(func() { close(started) })
			}
		})
		fmt.Println("the run ended:", err)
		os.Exit(1)
	}()
	<-started
	for {
		c, _ := k.current()
		if st := c.pool.Stats(); len(st) > 0 && st[0].Ready > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("running")
	select {}
}

// sandboxesOf lists the sandboxes of prefix that have processes (by their pids cgroups).
func sandboxesOf(prefix string) []string {
	cg, err := sandbox.OpenCgroups()
	if err != nil {
		return nil
	}
	dirs, _ := filepath.Glob(filepath.Join(sandbox.CgroupRoot, "pids", prefix+"*"))
	if cg.V2() {
		dirs, _ = filepath.Glob(filepath.Join(sandbox.CgroupRoot, cg.Base(), prefix+"*"))
	}
	var ids []string
	for _, d := range dirs {
		if len(cg.Procs(filepath.Base(d))) > 0 {
			ids = append(ids, filepath.Base(d))
		}
	}
	return ids
}

// TestSandboxesEndWhenTheirPluginDies: the plugin is killed (SIGKILL) with a run in flight — a
// busy loop, and a sleep with network — and a sandbox ready in its pool: every sandbox ends by
// itself within seconds (the runner sees the control socket close), long before its run's time
// is up. What they leave (cgroups, namespaces, folders) is swept by the next start on the prefix.
func TestSandboxesEndWhenTheirPluginDies(t *testing.T) {
	t.Parallel()
	onlyOnce(t)
	cases := []struct {
		name string
		run  map[string]any
	}{
		{"busy loop", map[string]any{"type": "python", "seconds": 60,
			"code": "def run():\n    print('started', flush=True)\n    while True:\n        pass\n"}},
		{"sleep with network", map[string]any{"type": "python", "seconds": 60, "network": true,
			"code": "import time\ndef run():\n    print('started', flush=True)\n    time.sleep(600)\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prefix := testPrefix("thkl")
			spec, _ := json.Marshal(helperSpec{Config: kindConfig(prefix, 1), Run: tc.run})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				// The next start on the prefix sweeps what the dead plugin's sandboxes left.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				next := newKind(kindOptions{})
				if err := next.Configure(ctx, kindConfig(prefix, 0)); err != nil {
					t.Error(err)
				}
				if err := next.Close(ctx); err != nil {
					t.Error(err)
				}
				assertNothingLeft(t, prefix)
			}()
			said := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					if sc.Text() == "running" {
						said <- "running"
						return
					}
					t.Logf("helper: %s", sc.Text())
				}
				said <- "the helper ended"
			}()
			select {
			case s := <-said:
				if s != "running" {
					t.Fatal(s)
				}
			case <-time.After(3 * time.Minute):
				t.Fatal("the helper didn't start its run")
			}
			ids := sandboxesOf(prefix)
			if len(ids) < 2 {
				t.Fatalf("sandboxes running: %v; want the run's and a ready one", ids)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			// A bound, not a measure: the runs would go on for a minute (the busy loop) or ten
			// (the sleep).
			deadline := time.Now().Add(30 * time.Second)
			for len(sandboxesOf(prefix)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if left := sandboxesOf(prefix); len(left) > 0 {
				t.Errorf("sandboxes %v still run 30 s after their plugin died", left)
			}
		})
	}
}

// TestTheSandboxKeepsItsTimeItself: with the plugin's timer off, the runner inside the sandbox
// stops a run at its limit and says so; the code can't stop it from doing so.
func TestTheSandboxKeepsItsTimeItself(t *testing.T) {
	t.Parallel()
	onlyOnce(t)
	prefix := testPrefix("thtm")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := newKind(kindOptions{hostTimerOff: true})
	if err := k.Configure(ctx, kindConfig(prefix, 0)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := k.Close(ctx); err != nil {
			t.Error(err)
		}
		assertNothingLeft(t, prefix)
	}()
	cases := []struct{ name, code string }{
		{"sleep", "import time\ndef run():\n    time.sleep(30)\n    return 'woke'\n"},
		{"busy in a process of its own", "import os, time\ndef run():\n    if os.fork() == 0:\n        os.setsid()\n        while True:\n            pass\n    time.sleep(30)\n"},
		// The attacks: each tries to stop or kill the runner (PID 1), then sleeps past its time.
		{"stops the runner", attack("os.kill(1, signal.SIGSTOP)")},
		{"signals the runner", attack("for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):\n        try:\n            os.kill(1, s)\n        except OSError as e:\n            print('kill', s, e, flush=True)")},
		{"stops its process group", attack("os.kill(0, signal.SIGSTOP)")},
		{"stops every process", attack("os.kill(-1, signal.SIGSTOP)")},
		{"names the runner with high bits set", attack("import ctypes\n    libc = ctypes.CDLL(None, use_errno=True)\n    for nr in (62, 200):  # kill, tkill\n        print('syscall', nr, libc.syscall(nr, ctypes.c_long(0x100000001), 19), ctypes.get_errno(), flush=True)\n    print('tgkill', libc.syscall(234, ctypes.c_long(0x700000001), ctypes.c_long(1), 19), ctypes.get_errno(), flush=True)")},
		{"signals through a pidfd", attack("fd = os.open('/proc/1', os.O_RDONLY)\n    import ctypes\n    libc = ctypes.CDLL(None, use_errno=True)\n    print('pidfd_send_signal', libc.syscall(424, fd, 19, None, 0), ctypes.get_errno(), flush=True)\n    print('pidfd_open', libc.syscall(434, 1, 0), ctypes.get_errno(), flush=True)")},
		{"traces the runner", attack("import ctypes\n    libc = ctypes.CDLL(None, use_errno=True)\n    print('ptrace', libc.ptrace(16, 1, None, None), ctypes.get_errno(), flush=True)")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &sdkRun{}
			r.res, r.err = k.Invoke(ctx, sdk.Call{Tool: pyTool(t, tc.code, map[string]any{"seconds": 1}), Args: json.RawMessage(`{}`)}, func(e sdk.Event) {
				if len(e.Stdout) > 0 {
					t.Logf("stdout: %s", strings.TrimSpace(string(e.Stdout)))
				}
			})
			if serr, ok := r.err.(*sdk.Error); !ok || serr.Code != codeTimeout || serr.Message != "the code ran longer than 1 seconds and was stopped" {
				t.Errorf("the run = %s, %v; want it stopped at its time by the sandbox itself", r.res, r.err)
			}
		})
	}
}

// attack is a tool that runs how (Python statements at the indent of run's body, with os and
// signal imported; an OSError is printed and ignored), then sleeps past its time.
func attack(how string) string {
	return "import os, signal, time\ndef run():\n    try:\n        " + strings.ReplaceAll(how, "\n    ", "\n        ") +
		"\n    except OSError as e:\n        print('refused:', e, flush=True)\n    time.sleep(30)\n    return 'woke'\n"
}

// sdkRun is a run's result and error.
type sdkRun struct {
	res json.RawMessage
	err error
}
