package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// readLine is the start of a runner: it opens fd 3 as f and reads one line from it into line.
const readLine = `
import os
f = os.fdopen(3, "r+b", buffering=0)
line = b""
while not line.endswith(b"\n"):
    c = f.read(1)
    if not c:
        break
    line += c
`

// echoRunner reads one line from fd 3, prints it, replies with it upper-cased, and exits.
const echoRunner = readLine + `
import sys
print("got", line.decode().strip(), flush=True)
print("to stderr", file=sys.stderr, flush=True)
f.write(line.upper())
`

func testLimits() Limits {
	return Limits{MemoryBytes: 256 << 20, Pids: 256, CPUs: 1, CPUSeconds: 10, OpenFiles: 256, FileBytes: 64 << 20}
}

func TestSandboxTakesOneRequest(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	sb, err := m.Start(ctx, Options{Args: []string{"/usr/bin/python3", "-I", "-c", echoRunner}, Limits: testLimits()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started in %v", time.Since(t0))
	t1 := time.Now()
	if _, err := sb.Control.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := bufio.NewReader(sb.Control).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	if reply != "HELLO\n" {
		t.Errorf("reply = %q", reply)
	}
	t.Logf("reply in %v", time.Since(t1))
	out, _ := io.ReadAll(sb.Stdout)
	errOut, _ := io.ReadAll(sb.Stderr)
	t.Logf("EOF after %v", time.Since(t1))
	if !strings.Contains(string(out), "got hello") || !strings.Contains(string(errOut), "to stderr") {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
	st, err := sb.Stats()
	t.Logf("stats %+v %v", st, err)
	t2 := time.Now()
	if err := sb.Destroy(ctx); err != nil {
		t.Error(err)
	}
	t.Logf("closed in %v", time.Since(t2))
}

// TestSandboxProcessesAreTheOOMKillersFirst: the sandbox's sentry and gofer have oom_score_adj
// 1000 whatever the process that started them has (0 here; -1000 under the VMs' agent, which
// made memory-limited sandboxes unkillable before): a sandbox over its memory limit is always
// killable by the kernel.
func TestSandboxProcessesAreTheOOMKillersFirst(t *testing.T) {
	m := newTestManager(t, NetworkOptions{})
	own, _ := os.ReadFile("/proc/self/oom_score_adj")
	t.Logf("the test's own oom_score_adj: %s", strings.TrimSpace(string(own)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := m.Start(ctx, Options{Args: []string{"/bin/sleep", "60"}, Limits: testLimits()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Destroy(ctx) }()
	seen := map[string]bool{}
	for _, pid := range m.Cgroups().Procs(sb.ID) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmd), "\x00")
		role := ""
		for _, a := range args {
			if a == "boot" || a == "gofer" {
				role = a
			}
		}
		if role == "" {
			continue // systrap's stubs, forked before runsc sets the score
		}
		seen[role] = true
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
		if got := strings.TrimSpace(string(b)); got != "1000" {
			t.Errorf("the sandbox's %s process %d has oom_score_adj %s; want 1000", role, pid, got)
		}
	}
	if !seen["boot"] || !seen["gofer"] {
		t.Errorf("found the sandbox's processes %v in its cgroup; want its sentry (boot) and gofer", seen)
	}
}
