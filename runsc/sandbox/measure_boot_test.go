package sandbox

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestMeasureBoot measures what a fresh sandbox costs (issue 22, item 2): the wall time of
// Start, of its program's run to the end of its output, and of Destroy, and the CPU the whole
// machine spent per sandbox (from /proc/stat's busy time, so run it on an otherwise idle
// machine), for /bin/true (subtest true) and for python3 printing 1 (subtest python). Sandboxes start one after another. It
// runs only with TOOLHOST_MEASURE=1 (TOOLHOST_MEASURE_N sandboxes each, 20 by default), and
// under `perf record -a -g` it is the profile of a sandbox's start.
func TestMeasureBoot(t *testing.T) {
	if os.Getenv("TOOLHOST_MEASURE") == "" {
		t.Skip("a measurement: set TOOLHOST_MEASURE=1")
	}
	n := 20
	if v, err := strconv.Atoi(os.Getenv("TOOLHOST_MEASURE_N")); err == nil && v > 0 {
		n = v
	}
	m := newTestManager(t, NetworkOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"true", []string{"/bin/true"}, ""},
		{"python", []string{"/usr/bin/python3", "-I", "-c", "print(1)"}, "1\n"},
		{"python-S", []string{"/usr/bin/python3", "-I", "-S", "-c", "print(1)"}, "1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var start, run, destroy []time.Duration
			boot := func() {
				t0 := time.Now()
				sb, err := m.Start(ctx, Options{Args: c.args, Limits: testLimits()})
				if err != nil {
					t.Fatal(err)
				}
				t1 := time.Now()
				out, err := io.ReadAll(sb.Stdout)
				if err != nil || string(out) != c.want {
					t.Fatalf("%s: stdout %q (%v), want %q", c.name, out, err, c.want)
				}
				t2 := time.Now()
				if err := sb.Destroy(ctx); err != nil {
					t.Fatal(err)
				}
				start = append(start, t1.Sub(t0))
				run = append(run, t2.Sub(t1))
				destroy = append(destroy, time.Since(t2))
			}
			boot() // warm the page cache and runsc's state folder
			start, run, destroy = nil, nil, nil
			busy0 := busyCPU()
			w0 := time.Now()
			for range n {
				boot()
			}
			wall := time.Since(w0)
			busy := busyCPU() - busy0
			t.Logf("%s, %d sandboxes one after another: start p50 %v, run to the end of output p50 %v, destroy p50 %v; "+
				"machine CPU %.3f s per sandbox (%.2f cores busy), %.1f sandboxes/s",
				c.name, n, median(start), median(run), median(destroy), busy/float64(n),
				busy/wall.Seconds(), float64(n)/wall.Seconds())
		})
	}
}
