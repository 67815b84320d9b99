package sandbox

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStartFailureLeavesNothing: a sandbox that can't start fails with runsc's words and leaves
// nothing behind, network and all.
func TestStartFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	base := newTestManager(t, NetworkOptions{})
	suffix, _ := NewID("")
	prefix := "thf" + suffix[:4] + "-" // a prefix of its own: other tests' sandboxes don't count
	m, err := NewManager(ManagerOptions{Runtime: base.opts.Runtime, Rootfs: testEnv.Rootfs, StateDir: testEnv.Dir, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	opts := SweepOptions{Runtime: base.opts.Runtime, Prefix: prefix, StateDir: testEnv.Dir}
	t.Cleanup(func() { _ = Sweep(context.Background(), opts) })
	// m holds its instance lock for as long as it lives: closed when the
	// test ends, not when the garbage collector finds m unused after Start
	// (the lock's file would then be closed, and Leftovers would rightly
	// report a lock nobody holds).
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = m.Start(ctx, Options{Args: []string{"/no/such/program"}, Limits: testLimits(), Network: true})
	if err == nil || !strings.Contains(err.Error(), "starting the sandbox: runsc run failed") ||
		!strings.Contains(err.Error(), "/no/such/program: no such file or directory") {
		t.Fatalf("Start of a missing program = %v", err)
	}
	runtime.GC() // what would close an unreferenced m's lock
	left, err := Leftovers(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("a failed Start left %v", left)
	}
}
