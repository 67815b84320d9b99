package session

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestMeasure prints what a session costs (TOOLHOST_MEASURE=1; no assertions on time): the first
// run of a new session (disk made, mounted, sandbox started), the first run after a stop (disk
// there), and warm runs of print(1) (p50 and p90 of 20), each run started by the sandbox's agent
// and by runsc exec.
func TestMeasure(t *testing.T) {
	if os.Getenv("TOOLHOST_MEASURE") == "" {
		t.Skip("set TOOLHOST_MEASURE=1 to measure")
	}
	// The machine's own pace: a plain python3 on the host.
	var plain []time.Duration
	for range 20 {
		t0 := time.Now()
		if out, err := exec.Command("/usr/bin/python3", "-c", "print(1)").Output(); err != nil || string(out) != "1\n" {
			t.Fatalf("host python3: %q, %v", out, err)
		}
		plain = append(plain, time.Since(t0))
	}
	slices.Sort(plain)
	t.Logf("plain python3 -c 'print(1)' on the host: p50 %v, p90 %v (n=%d)", plain[len(plain)/2], plain[len(plain)*9/10], len(plain))
	for _, viaExec := range []bool{false, true} {
		name := "agent"
		if viaExec {
			name = "runsc exec"
		}
		t.Run(name, func(t *testing.T) { measure(t, viaExec) })
	}
}

func measure(t *testing.T, viaExec bool) {
	ts := newSetup(t)
	m := ts.manager(t, Options{DiskMB: 1024, Log: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}})})
	m.viaExec = viaExec
	ctx := context.Background()
	id := testID("measure")
	timed := func() (time.Duration, Result) {
		t0 := time.Now()
		res, err := m.Run(ctx, id, Run{Language: "python", Code: "print(1)", Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%+v, %v", res, err)
		}
		return time.Since(t0), res
	}
	d, res := timed()
	t.Logf("first run of a new session (1 GiB disk made and mounted, sandbox started): %v (cold %v)", d, res.Cold)
	if fi, err := os.Stat(m.imagePath(id)); err == nil {
		t.Logf("a new 1 GiB image takes %d KiB on the host", blocksKiB(fi))
	}
	for range 3 {
		timed()
	}
	var warm []time.Duration
	for range 20 {
		d, res := timed()
		if res.Cold {
			t.Fatal("a warm run was cold")
		}
		warm = append(warm, d)
	}
	slices.Sort(warm)
	t.Logf("warm run of print(1): p50 %v, p90 %v (n=%d)", warm[len(warm)/2], warm[len(warm)*9/10], len(warm))
	if err := m.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	d, res = timed()
	t.Logf("first run after a stop (disk mounted again, sandbox started): %v (cold %v)", d, res.Cold)
}

// blocksKiB is what a file takes on disk.
func blocksKiB(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks / 2
	}
	return -1
}

// testWriter writes a log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
