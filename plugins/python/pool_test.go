package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// poolKind is a kind of the test's own whose pool keeps size sandboxes ready, so the test knows
// which runs got a ready sandbox. It is closed, and nothing of its prefix may be left, when the
// test ends.
func poolKind(t *testing.T, size int, extra map[string]any) (*kind, *sdktest.Conn) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	if env.poolSize == 0 {
		t.Skip("the pool's own tests run in the pass of the suite with the pool on")
	}
	prefix := testPrefix("thpp")
	pool := map[string]any{"size": size, "max": 4, "max_idle_minutes": 10}
	for k, v := range extra {
		pool[k] = v
	}
	raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": env.rootfs, "session_rootfs": env.sessionRootfs,
		"state_dir": env.stateDir, "sandbox_prefix": prefix, "work_mb": env.workMB, "tmp_mb": 32, "pids": 64,
		"max_output_bytes": env.outputB, "pool": pool})
	k := newKind(kindOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.Configure(ctx, raw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			t.Errorf("closing the kind: %v", err)
		}
		rt, _ := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(env.stateDir, "runsc")})
		left, err := sandbox.Leftovers(ctx, sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: env.stateDir})
		if err != nil || len(left) > 0 {
			t.Errorf("left after Close: %v %v", left, err)
		}
	})
	return k, sdktest.Start(t, k, nil)
}

func poolStats(t *testing.T, k *kind) sandbox.PoolStats {
	t.Helper()
	c, err := k.current()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.pool.Stats() {
		if s.Shape == "no_network" {
			return s
		}
	}
	return sandbox.PoolStats{}
}

// awaitReady waits until the kind's pool has a sandbox ready (generously: a shared machine).
func awaitReady(t *testing.T, k *kind) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if poolStats(t, k).Ready > 0 {
			return
		}
	}
	t.Fatalf("no sandbox got ready: %+v", poolStats(t, k))
}

// runPooled waits for a ready sandbox, runs code on it and asserts that it was handed a ready one.
func runPooled(t *testing.T, k *kind, c *sdktest.Conn, code string, extra map[string]any) *sdktest.Run {
	t.Helper()
	awaitReady(t, k)
	before := poolStats(t, k)
	r := invoke(t, c, code, extra, nil)
	after := poolStats(t, k)
	if after.HandedOut != before.HandedOut+1 || after.Cold != before.Cold {
		t.Fatalf("the run wasn't handed a ready sandbox: before %+v, after %+v", before, after)
	}
	return r
}

// TestPooledRunsAreFreshAndKeepTheirLimits: every run handed a ready sandbox finds /work and /tmp
// empty, and every limit (memory, CPU, processes, disk, output, network off) stops it there as
// in a sandbox started for it.
func TestPooledRunsAreFreshAndKeepTheirLimits(t *testing.T) {
	t.Parallel()
	k, c := poolKind(t, 1, nil)
	fresh := `import os
def run():
    seen = [p for p in ("/work/mark", "/tmp/mark") if os.path.exists(p)]
    for p in ("/work/mark", "/tmp/mark"):
        open(p, "w").write("x")
    return seen
`
	for range 3 {
		wantResult(t, runPooled(t, k, c, fresh, nil), `[]`)
	}
	cases := append(limitCases(), limitCase{"network off",
		"import socket\ndef run():\n    socket.create_connection(('127.0.0.1', 80), timeout=5)\n",
		nil, "network", "this tool has no network: say it needs it (network = true)"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run(t, func() *sdktest.Run { return runPooled(t, k, c, tc.code, tc.extra) })
			wantError(t, r, tc.errCode, tc.message)
		})
	}
}

// TestKilledReadySandboxIsNeverHandedOut: a ready sandbox killed from outside is replaced; runs
// never get it.
func TestKilledReadySandboxIsNeverHandedOut(t *testing.T) {
	t.Parallel()
	k, c := poolKind(t, 1, nil)
	awaitReady(t, k)
	cfg, _ := k.current()
	ids := cfg.pool.ReadyIDs()
	if len(ids) != 1 {
		t.Fatalf("ready sandboxes %v", ids)
	}
	cg, err := sandbox.OpenCgroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range cg.Procs(ids[0]) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if empty, ok := cg.Empty(ids[0]); empty || !ok {
			break // every task gone: cgroup.procs empties while the last threads still hold files
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed sandbox's processes didn't end")
		}
	}
	r := invoke(t, c, "def run():\n    return 'alive'\n", nil, nil)
	wantResult(t, r, `"alive"`)
	// The pool noticed (at the hand-out or its periodic check) and starts another.
	awaitReady(t, k)
	if st := poolStats(t, k); st.Died != 1 {
		t.Errorf("stats %+v; want the dead sandbox counted", st)
	}
	if now := cfg.pool.ReadyIDs(); len(now) == 1 && now[0] == ids[0] {
		t.Errorf("the dead sandbox %s is still ready", ids[0])
	}
}

// TestPoolMetrics: the pool's state per shape is in the kind's metrics.
func TestPoolMetrics(t *testing.T) {
	t.Parallel()
	k, c := poolKind(t, 1, nil)
	wantResult(t, runPooled(t, k, c, "def run():\n    return 1\n", nil), `1`)
	awaitReady(t, k)
	got := map[string]sdk.Metric{}
	for _, m := range k.Metrics(context.Background()) {
		if m.Labels["shape"] == "no_network" {
			got[m.Name] = m
		}
	}
	for name, want := range map[string]float64{"pool_ready": 1, "pool_handed_out_total": 1, "pool_cold_starts_total": 0, "pool_in_use": 0} {
		if m, ok := got[name]; !ok || m.Value != want {
			t.Errorf("metric %s = %+v; want %v", name, m, want)
		}
	}
	if got["pool_handed_out_total"].Type != "counter" || got["pool_ready"].Type != "gauge" {
		t.Errorf("metric types: %+v", got)
	}
}

// TestPoolPreload: the modules of [python.pool] preload are imported before the run; a module
// that can't be imported is refused when the kind is configured.
func TestPoolPreload(t *testing.T) {
	t.Parallel()
	k, c := poolKind(t, 1, map[string]any{"preload": []string{"decimal", "xml.dom.minidom"}})
	r := runPooled(t, k, c, "import sys\ndef run():\n    return [m in sys.modules for m in ('decimal', 'xml.dom.minidom', 'fractions')]\n", nil)
	wantResult(t, r, `[true, true, false]`)

	raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": env.rootfs, "session_rootfs": env.sessionRootfs,
		"state_dir": env.stateDir, "sandbox_prefix": "thpq" + strconv.Itoa(os.Getpid()%10000) + "-", // TestMain's prefixes are thpy…
		"pool": map[string]any{"size": 1, "max": 4, "max_idle_minutes": 10, "preload": []string{"no_such_module_here"}}})
	bad := newKind(kindOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := bad.Configure(ctx, raw)
	if err == nil || !strings.Contains(err.Error(), "python.pool.preload: a sandbox can't preload these modules") ||
		!strings.Contains(err.Error(), "preloading no_such_module_here failed: ModuleNotFoundError") {
		t.Errorf("Configure with a missing module = %v", err)
	}
	_ = bad.Close(ctx)
	rt, _ := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(env.stateDir, "runsc")})
	prefix := "thpq" + strconv.Itoa(os.Getpid()%10000) + "-"
	if left, err := sandbox.Leftovers(ctx, sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: env.stateDir}); err != nil || len(left) > 0 {
		t.Errorf("a refused Configure left %v %v", left, err)
	}
}
