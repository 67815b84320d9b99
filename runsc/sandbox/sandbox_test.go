package sandbox

import (
	"bufio"
	"context"
	"io"
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
