package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
)

// TestSweepRemovesLeftovers: what a crashed host leaves (a running sandbox with its network, and
// stray cgroups, chains, rules, namespaces, mounts and folders) is removed by Sweep, and nothing
// of another prefix is touched.
func TestSweepRemovesLeftovers(t *testing.T) {
	t.Parallel()
	other := newTestManager(t, NetworkOptions{}) // the tests' usual prefix: must survive the sweep
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	suffix, _ := NewID("")
	prefix := "ths" + suffix[:4] + "-"
	rt := other.opts.Runtime
	crashed, err := NewManager(ManagerOptions{Runtime: rt, Rootfs: testEnv.Rootfs, StateDir: testEnv.Dir, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	sweepOpts := SweepOptions{Runtime: rt, Prefix: prefix, StateDir: testEnv.Dir}
	t.Cleanup(func() { _ = Sweep(context.Background(), sweepOpts) })

	keep, err := other.Start(ctx, Options{Args: []string{"/bin/sleep", "60"}, Limits: testLimits()})
	if err != nil {
		t.Fatal(err)
	}
	for _, network := range []bool{true, false} {
		if _, err := crashed.Start(ctx, Options{Args: []string{"/bin/sleep", "60"}, Limits: testLimits(), Network: network}); err != nil {
			t.Fatal(err)
		}
	}
	stray, _ := NewID(prefix)
	cg, err := OpenCgroups()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cg.procsDir(stray), 0o755); err != nil {
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
	if err := mountWork(filepath.Join(sandboxesDir(testEnv.Dir), stray, "work"), 1<<20, 16, 0, 0); err != nil {
		t.Fatal(err)
	}

	left, err := Leftovers(ctx, sweepOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) < 8 {
		t.Fatalf("the crash left too little to prove anything: %v", left)
	}
	var heard []string
	told := sweepOpts
	told.Removed = func(what string) { heard = append(heard, what) }
	if err := Sweep(ctx, told); err != nil {
		t.Fatal(err)
	}
	if left, err := Leftovers(ctx, sweepOpts); err != nil || len(left) > 0 {
		t.Fatalf("after the sweep: %v, %v", left, err)
	}
	// What it removed is told, for the python kind's log: the crashed sandboxes, the stray
	// cgroup, and the stray network namespace.
	for _, want := range []string{"runsc container " + prefix, "cgroup ", "/" + stray, "network namespace " + stray} {
		if !slices.ContainsFunc(heard, func(h string) bool { return strings.Contains(h, want) }) {
			t.Errorf("the sweep did not tell of removing %q; it told %q", want, heard)
		}
	}
	if st, err := rt.State(ctx, keep.ID); err != nil || st.Status != "running" {
		t.Errorf("the sweep touched a sandbox of another prefix: %+v, %v", st, err)
	}
	// The crashed manager's own handles still close cleanly over what the sweep removed.
	if err := crashed.Close(ctx); err != nil {
		t.Errorf("closing sandboxes already swept: %v", err)
	}
}

// TestSweepSparesLiveInstances: processes sharing a prefix and state folder (a host, a toolhost
// check beside it, a plugin that died) sweep only what they made and what dead ones left: the
// live one's sandboxes run on, the dead one's go, network and lock file included.
func TestSweepSparesLiveInstances(t *testing.T) {
	t.Parallel()
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	suffix, _ := NewID("")
	prefix := "thi" + suffix[:4] + "-"
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(testEnv.Dir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	sweepOpts := SweepOptions{Runtime: rt, Prefix: prefix, StateDir: testEnv.Dir}
	t.Cleanup(func() { _ = Sweep(context.Background(), sweepOpts) })
	manager := func() *Manager {
		m, err := NewManager(ManagerOptions{Runtime: rt, Rootfs: testEnv.Rootfs, StateDir: testEnv.Dir, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	live, dead, check := manager(), manager(), manager()
	if live.Instance().tag == dead.Instance().tag || live.Instance().tag == check.Instance().tag {
		t.Fatal("two open instances share a tag")
	}
	sleeper := Options{Args: []string{"/bin/sleep", "60"}, Limits: testLimits()}
	var liveIDs, deadIDs []string
	for _, network := range []bool{false, true} {
		sleeper.Network = network
		sb, err := live.Start(ctx, sleeper)
		if err != nil {
			t.Fatal(err)
		}
		liveIDs = append(liveIDs, sb.ID)
		if sb, err = dead.Start(ctx, sleeper); err != nil {
			t.Fatal(err)
		}
		deadIDs = append(deadIDs, sb.ID)
	}
	if !live.Instance().Owns(liveIDs[0]) || live.Instance().Owns(deadIDs[0]) {
		t.Errorf("ids %v, %v: owned by the wrong instance", liveIDs, deadIDs)
	}
	dead.Instance().drop() // its process died: the kernel let its lock go, nothing was removed

	// A check beside the live host: its sweeps at start and at close.
	for range 2 {
		if err := check.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := check.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range liveIDs {
		if st, err := rt.State(ctx, id); err != nil || st.Status != "running" {
			t.Errorf("the live instance's sandbox %s after another's sweep: %+v, %v", id, st, err)
		}
	}
	left, err := Leftovers(ctx, sweepOpts)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		for _, id := range deadIDs {
			if strings.Contains(l, id) || strings.Contains(l, "instance lock") {
				t.Errorf("the dead instance's %s is left after the sweep", l)
			}
		}
	}
	if err := live.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(ctx); err != nil {
		t.Errorf("closing handles of sandboxes already swept: %v", err)
	}
	if left, err := Leftovers(ctx, sweepOpts); err != nil || len(left) > 0 {
		t.Errorf("after closing the live instance: %v %v", left, err)
	}
}

// TestSweepRestoresForwarding: a process that dies with a network sandbox up leaves forwarding on
// and the guard chain in place; a sweep after it removes the sandbox's rules, link and namespace
// and then puts the forwarding settings back, guard chain and all. It runs in a network namespace
// of its own, so it sees and changes only its own settings.
func TestSweepRestoresForwarding(t *testing.T) {
	if runInOwnNetns(t) {
		return
	}
	ctx := context.Background()
	addLink(t, "thfwdwason") // forwarded before: stays so
	setSysctl(t, filepath.Join(ipv4Conf, "all", "forwarding"), "1")
	setSysctl(t, filepath.Join(ipv4Conf, "all", "forwarding"), "0")
	setSysctl(t, filepath.Join(ipv4Conf, "default", "forwarding"), "0")
	setSysctl(t, filepath.Join(ipv4Conf, "thfwdwason", "forwarding"), "1")
	before := forwardingSettings(t)

	suffix, _ := NewID("")
	prefix := "thw" + suffix[:4] + "-"
	id, err := NewID(prefix)
	if err != nil {
		t.Fatal(err)
	}
	n, err := setupNetwork(ctx, id, NetworkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.teardown(ctx) })
	if len(rulesOf(t, forwardChain)) == 0 {
		t.Fatal("no guard chain while a network exists on a machine that doesn't forward")
	}
	// The process dies here: nothing of the network is torn down.
	if err := Sweep(ctx, SweepOptions{Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	if left := rulesOf(t, forwardChain, forwardedBefore, notForwardedBefore, id); len(left) > 0 {
		t.Errorf("rules left after the sweep:\n%s", strings.Join(left, "\n"))
	}
	after := forwardingSettings(t)
	for k, v := range before {
		if _, still := after[k]; still && after[k] != v {
			t.Errorf("after a crash and a sweep: %s: forwarding %s before, %s after", k, v, after[k])
		}
	}
}
