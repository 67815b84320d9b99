package session

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// TestDiskCapStopsAWriter: code that writes more than the session's disk gets ENOSPC inside,
// its run says Stopped "disk" with a message naming the cap, the host's disk is untouched, and
// the session goes on: its next run frees the room and works; an upload into a full disk is
// disk_full.
func TestDiskCapStopsAWriter(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{DiskMB: 16})
	ctx := context.Background()
	id := testID("disk")
	res, _, errOut := runOK(t, m, id, "python", `
with open("big", "wb") as f:
    for _ in range(64):
        f.write(b"x" * (1 << 20))
`)
	if res.Stopped != "disk" || !strings.Contains(res.Message, "16 MiB") || res.ExitCode == 0 {
		t.Fatalf("a writer of 64 MiB on a 16 MiB disk: %+v, stderr %q; want stopped for disk", res, errOut)
	}
	if !strings.Contains(errOut, "No space left on device") {
		t.Errorf("the code's own error: %q; want ENOSPC", errOut)
	}
	if _, err := m.WriteFile(ctx, id, "more.bin", strings.NewReader(strings.Repeat("y", 4<<20))); errcode.Code(err) != errcode.DiskFull {
		t.Errorf("an upload into a full disk: %v; want disk_full", err)
	}
	if files, _ := m.Files(ctx, id); len(files) != 1 || files[0].Path != "big" {
		t.Errorf("after a failed upload: %+v; want only big (no upload left half-written)", files)
	}
	res, out, _ := runOK(t, m, id, "bash", "rm big && echo freed && df -m /work | tail -1")
	if res.Stopped != "" || res.ExitCode != 0 || !strings.HasPrefix(out, "freed\n") {
		t.Errorf("the next run: %+v, %q; want it to work", res, out)
	}
	// A failure with room left is the code's own.
	res, _, _ = runOK(t, m, id, "bash", "exit 1")
	if res.Stopped != "" {
		t.Errorf("exit 1 with room on the disk: stopped %q", res.Stopped)
	}
}

// TestTimeoutKillsTheRunNotTheSession (agent and runsc exec): a run past its time is stopped with the processes it
// started (a background one too), the sandbox stays (the next run is warm) and holds no
// process of the stopped run.
func TestTimeoutKillsTheRunNotTheSession(t *testing.T) {
	bothWays(t, testTimeout)
}

func testTimeout(t *testing.T, viaExec bool) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	m.viaExec = viaExec
	id := testID("timeout")
	runOK(t, m, id, "bash", "true")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o output
	res, err := m.Run(ctx, id, o.run(Run{Language: "bash", Timeout: 3 * time.Second,
		Code: "(sleep 500 &) ; sleep 400 & echo started; python3 -c 'import time; time.sleep(300)'"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "timeout" || !strings.Contains(res.Message, "3 seconds") || res.Cold || o.stdout() != "started\n" {
		t.Fatalf("a run of 300 s with 3 s: %+v, stdout %q", res, o.stdout())
	}
	res, out, _ := runOK(t, m, id, "bash", `cat /proc/[0-9]*/comm | grep -cx 'sleep\|python3'`)
	// Two python3: the sandbox's first process, and the shepherd of this run.
	if res.Cold || strings.TrimSpace(out) != "2" {
		t.Errorf("after the timeout: %+v, %s sleep and python3 processes; want a warm run and only the first process and the run's shepherd", res, strings.TrimSpace(out))
	}
}

// TestMemoryKillIsClassified: code that takes more memory than the session's limit is stopped
// with Stopped "memory" (read from the cgroup: gVisor ends the sandbox silently), and the
// session's next run works in a new sandbox on the same files.
func TestMemoryKillIsClassified(t *testing.T) {
	ts := newSetup(t)
	lim := testLimits()
	lim.MemoryBytes = 192 << 20
	m := ts.manager(t, Options{Limits: lim})
	id := testID("memory")
	runOK(t, m, id, "bash", "echo kept > before")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Run(ctx, id, Run{Language: "python", Timeout: 45 * time.Second,
		Code: "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "memory" || !strings.Contains(res.Message, "192 MiB") {
		t.Fatalf("a run that eats memory: %+v; want stopped for memory", res)
	}
	res, out, _ := runOK(t, m, id, "bash", "cat before")
	if out != "kept\n" {
		t.Errorf("the next run: %+v, %q; want the files kept", res, out)
	}
}

// TestPidsLimitIsClassified: code that starts more processes than the session's limit is
// stopped with Stopped "pids" (read from the cgroup), and the session's next run works. The
// limit is low (64) so that a slow machine (a VM under TCG forks in about 0.3 s) reaches it well
// within the run's time.
func TestPidsLimitIsClassified(t *testing.T) {
	ts := newSetup(t)
	lim := testLimits()
	lim.Pids = 64
	m := ts.manager(t, Options{Limits: lim})
	id := testID("pids")
	runOK(t, m, id, "bash", "echo kept > before")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var o output
	res, err := m.Run(ctx, id, o.run(Run{Language: "bash", Timeout: 45 * time.Second,
		Code: "for i in $(seq 150); do sleep 120 & done; wait"}))
	if err != nil {
		t.Fatalf("%v (stderr %q)", err, o.stderr())
	}
	if res.Stopped != "pids" || !strings.Contains(res.Message, "64") {
		t.Fatalf("a run that starts 150 processes under a limit of 64: %+v, stderr %q; want stopped for pids", res, o.stderr())
	}
	res, out, _ := runOK(t, m, id, "bash", "cat before")
	if out != "kept\n" {
		t.Errorf("the next run: %+v, %q; want the files kept", res, out)
	}
}

// TestCancelStopsTheRun: a run whose caller gives up is killed, says it was cancelled, and the
// session's sandbox serves the next run.
func TestCancelStopsTheRun(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("cancel")
	runOK(t, m, id, "bash", "true")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	go func() { <-started; cancel() }()
	_, err := m.Run(ctx, id, Run{Language: "python", Timeout: 5 * time.Minute,
		Code:   "import time\nprint('go', flush=True)\ntime.sleep(300)",
		Stdout: func([]byte) { once.Do(func() { close(started) }) }})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled run: %v; want context.Canceled", err)
	}
	// Four python3: the sandbox's first process, the interpreter and its shepherd (the cancel
	// interrupted the cell, the interpreter stays), and the shepherd of this run.
	res, out, _ := runOK(t, m, id, "bash", `cat /proc/[0-9]*/comm | grep -c python3`)
	if res.Cold || strings.TrimSpace(out) != "4" {
		t.Errorf("after the cancel: %+v, %s python3 processes; want a warm run, the first process, the interpreter, its shepherd and the run's shepherd", res, out)
	}
	if res, _, _ := runOK(t, m, id, "python", "time.time() > 0"); res.Value != "True" {
		t.Errorf("the interpreter after the cancel: %+v; want the cell's import kept", res)
	}
}

// TestDiskGrowsWithTheSetting: a session's disk made smaller than DiskMB grows to it when next
// mounted, its files kept.
func TestDiskGrowsWithTheSetting(t *testing.T) {
	ts := newSetup(t)
	ctx := context.Background()
	id := testID("grow")
	small := ts.manager(t, Options{DiskMB: 16})
	runOK(t, small, id, "bash", "echo kept > f")
	if err := small.Close(ctx); err != nil {
		t.Fatal(err)
	}
	big := ts.manager(t, Options{DiskMB: 48})
	_, out, _ := runOK(t, big, id, "bash", "cat f; df -m --output=size /work | tail -1")
	fields := strings.Fields(out)
	if len(fields) != 2 || fields[0] != "kept" || atoi(fields[1]) < 40 {
		t.Errorf("after growing from 16 to 48 MiB: %q; want the file and about 48 MiB", out)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
