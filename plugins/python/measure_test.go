package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc/sandbox"
)

// TestMeasure prints the cost of a sandbox: a trivial tool call through the kind (a cold sandbox
// each time), its parts, a plain Debian python3 subprocess under the same rlimits (the
// predecessor's design), and the memory of one sandbox. It runs only when TOOLHOST_BENCH=1:
//
//	TOOLHOST_BENCH=1 go test -run TestMeasure -v ./plugins/python/
func TestMeasure(t *testing.T) {
	if os.Getenv("TOOLHOST_BENCH") != "1" {
		t.Skip("set TOOLHOST_BENCH=1 to measure")
	}
	c := conn(t, false)
	n := 30
	if v := os.Getenv("TOOLHOST_BENCH_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	ctx := context.Background()
	tool := pyTool(t, "def run():\n    return 1\n", map[string]any{"seconds": 10})

	var call []time.Duration
	for range n {
		t0 := time.Now()
		r := c.Invoke(ctx, tool, map[string]any{})
		call = append(call, time.Since(t0))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	wait := time.Now()
	k, _ := env.walled.current()
	_ = k // the sandboxes of the calls are removed in the background; let that finish first
	time.Sleep(3 * time.Second)
	_ = wait

	// Parts of one call: prepare (runsc run --detach until the runner waits), request to answer
	// on a ready sandbox, and removal.
	var prep, answer, answerOnly, remove []time.Duration
	var idleMem, peakMem []uint64
	cfg, _ := env.walled.current()
	for range min(n, 15) {
		t0 := time.Now()
		sb, err := cfg.mgr.Start(ctx, sandboxOptions(cfg.cfg, runTable{Seconds: 10, MemoryMB: 512}))
		if err != nil {
			t.Fatal(err)
		}
		prep = append(prep, time.Since(t0))
		time.Sleep(500 * time.Millisecond) // let the runner reach its read
		st, _ := sb.Stats()
		idleMem = append(idleMem, st.MemoryBytes)
		t1 := time.Now()
		o := env.walled.drive(ctx, sb, request{Mode: "run", Code: "def run():\n    return 1\n", Args: []byte("{}"), CPUSeconds: 10},
			limits{seconds: 10, outputBytes: 1 << 20}, nil)
		answer = append(answer, time.Since(t1))
		answerOnly = append(answerOnly, o.answered.Sub(t1))
		if o.answer == nil || !o.answer.OK {
			t.Fatalf("no answer: %+v", o)
		}
		peakMem = append(peakMem, o.stats.MemoryMaxBytes)
		t2 := time.Now()
		if err := sb.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		remove = append(remove, time.Since(t2))
	}

	// The predecessor's design: a plain python3 subprocess, rlimits set by the child itself.
	py := "/usr/bin/python3"
	plain := `import json, resource
resource.setrlimit(resource.RLIMIT_CPU, (10, 10))
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
scope = {}
exec(compile("def run():\n    return 1\n", "tool.py", "exec"), scope)
print(json.dumps(scope["run"]()))`
	var sub []time.Duration
	for range n {
		t0 := time.Now()
		cmd := exec.Command(py, "-I", "-B", "-c", plain)
		cmd.Env = sandbox.DefaultEnv()
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		sub = append(sub, time.Since(t0))
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			t.Fatalf("plain python: %v %q", err, out)
		}
	}
	med := func(d []time.Duration) time.Duration { return pct(d, 50) }
	t.Logf("runs: %d (parts: %d)", n, len(prep))
	t.Logf("tool call, cold sandbox:      median %v  p90 %v", med(call).Round(time.Millisecond), pct(call, 90).Round(time.Millisecond))
	t.Logf("  prepare (runsc run -detach): median %v  p90 %v", med(prep).Round(time.Millisecond), pct(prep, 90).Round(time.Millisecond))
	t.Logf("  request → answer, ready:     median %v  p90 %v", med(answer).Round(100*time.Microsecond), pct(answer, 90).Round(100*time.Microsecond))
	t.Logf("    of which until the answer: median %v  p90 %v", med(answerOnly).Round(100*time.Microsecond), pct(answerOnly, 90).Round(100*time.Microsecond))
	t.Logf("  removal (off the call path): median %v  p90 %v", med(remove).Round(time.Millisecond), pct(remove, 90).Round(time.Millisecond))
	t.Logf("plain %s subprocess:  median %v  p90 %v", py, med(sub).Round(100*time.Microsecond), pct(sub, 90).Round(100*time.Microsecond))
	t.Logf("ratio (median): %.1fx", float64(med(call))/float64(med(sub)))
	t.Logf("memory of one ready sandbox (memcg usage): median %.1f MiB; peak during a trivial run: median %.1f MiB",
		float64(pctU(idleMem, 50))/(1<<20), float64(pctU(peakMem, 50))/(1<<20))
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func pctU(d []uint64, p int) uint64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
