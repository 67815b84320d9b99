package runsc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSweepRemovesLeftovers: what a crashed host leaves (a running sandbox with its network, and
// stray cgroups, chains, rules, namespaces, mounts and folders) is removed by Sweep, and nothing
// of another prefix is touched.
func TestSweepRemovesLeftovers(t *testing.T) {
	t.Parallel()
	other := newTestManager(t, NetworkOptions{}) // the tests' usual prefix: must survive the sweep
	if testEnv.skip != "" {
		t.Skip(testEnv.skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	suffix, _ := NewID("")
	prefix := "ths" + suffix[:4] + "-"
	rt := other.opts.Runtime
	crashed, err := NewManager(ManagerOptions{Runtime: rt, Rootfs: testEnv.rootfs, StateDir: testEnv.stateDir, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	sweepOpts := SweepOptions{Runtime: rt, Prefix: prefix, StateDir: testEnv.stateDir}
	t.Cleanup(func() { _ = Sweep(context.Background(), sweepOpts) })

	keep, err := other.Prepare(ctx, SandboxOptions{Args: []string{"/bin/sleep", "60"}, Limits: testLimits()})
	if err != nil {
		t.Fatal(err)
	}
	for _, network := range []bool{true, false} {
		if _, err := crashed.Prepare(ctx, SandboxOptions{Args: []string{"/bin/sleep", "60"}, Limits: testLimits(), Network: network}); err != nil {
			t.Fatal(err)
		}
	}
	stray, _ := NewID(prefix)
	if err := os.MkdirAll(filepath.Join(CgroupRoot, "pids", stray), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"iptables", "-w", "-N", stray},
		{"iptables", "-w", "-A", "INPUT", "-i", "thnone0", "-m", "comment", "--comment", stray, "-j", stray},
		{"ip", "netns", "add", stray},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	if err := mountWork(filepath.Join(sandboxesDir(testEnv.stateDir), stray, "work"), 1<<20, 16, 0, 0); err != nil {
		t.Fatal(err)
	}

	left, err := Leftovers(ctx, sweepOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) < 8 {
		t.Fatalf("the crash left too little to prove anything: %v", left)
	}
	if err := Sweep(ctx, sweepOpts); err != nil {
		t.Fatal(err)
	}
	if left, err := Leftovers(ctx, sweepOpts); err != nil || len(left) > 0 {
		t.Fatalf("after the sweep: %v, %v", left, err)
	}
	if st, err := rt.State(ctx, keep.ID); err != nil || st.Status != "running" {
		t.Errorf("the sweep touched a sandbox of another prefix: %+v, %v", st, err)
	}
	// The crashed manager's own handles still close cleanly over what the sweep removed.
	if err := crashed.Close(ctx); err != nil {
		t.Errorf("closing sandboxes already swept: %v", err)
	}
}
