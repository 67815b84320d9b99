package sandbox

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

func TestDoctorPassesOnThisMachine(t *testing.T) {
	t.Parallel()
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The lean rootfs stands in for the session rootfs: the line checks the folder, not its packages.
	checks := Doctor(ctx, DoctorOptions{Runsc: testEnv.Runsc, Rootfs: testEnv.Rootfs, SessionRootfs: testEnv.Rootfs, StateDir: testEnv.Dir, Prefix: testEnv.Prefix})
	names := map[string]bool{}
	for _, c := range checks {
		names[c.Name] = true
		t.Logf("%v %s: %s", c.OK, c.Name, c.Detail)
		if !c.OK {
			t.Errorf("%s failed: %s (%s)", c.Name, c.Detail, c.Fix)
		}
	}
	for _, n := range []string{"root", "runsc", "rootfs", "session rootfs", "cgroups", "network namespaces", "iptables", "platform"} {
		if !names[n] {
			t.Errorf("no %q line", n)
		}
	}
	if err := Ready(checks); err != nil {
		t.Error(err)
	}
}

func TestDoctorSaysHowToFix(t *testing.T) {
	t.Parallel()
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	dir := t.TempDir()
	checks := Doctor(context.Background(), DoctorOptions{Runsc: filepath.Join(dir, "runsc"), Rootfs: dir,
		SessionRootfs: filepath.Join(dir, "rootfs-sessions"), StateDir: dir, Prefix: testEnv.Prefix})
	fails := map[string]Check{}
	for _, c := range checks {
		if !c.OK {
			fails[c.Name] = c
		}
	}
	if !strings.Contains(fails["runsc"].Fix, "make runsc") || !strings.Contains(fails["rootfs"].Fix, "make rootfs") || !strings.Contains(fails["rootfs"].Fix, "toolhost rootfs") ||
		!strings.Contains(fails["session rootfs"].Detail, filepath.Join(dir, "rootfs-sessions")) || !strings.Contains(fails["session rootfs"].Fix, "toolhost rootfs") {
		t.Errorf("failing lines don't say how to fix them: %+v", fails)
	}
	if _, ok := fails["platform"]; !ok {
		t.Error("the platform line should fail (not tried) when runsc is missing")
	}
	err := Ready(checks)
	if err == nil || !strings.Contains(err.Error(), "make runsc") {
		t.Errorf("Ready = %v", err)
	}
}

// hangingRunsc is a runsc that hangs ("sleep 3598") when asked to start a sandbox on platform.
func hangingRunsc(t *testing.T, platform string) string {
	return sandboxtest.HangingRunsc(t, testEnv.Runsc, platform, 3598)
}

// TestPlatformCheckGivesUpOnAHangingPlatform: doctor's platform line gives up on a platform that
// hangs after the probe's bound, names it and the platform that works, and leaves nothing.
func TestPlatformCheckGivesUpOnAHangingPlatform(t *testing.T) {
	t.Parallel()
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	suffix, _ := NewID("")
	prefix := "thh" + suffix[:4] + "-"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	c := PlatformCheck(ctx, DoctorOptions{Runsc: hangingRunsc(t, "kvm"), Rootfs: testEnv.Rootfs, StateDir: testEnv.Dir,
		Platform: "kvm", Prefix: prefix})
	t.Logf("after %v: %+v", time.Since(t0), c)
	want := "the kvm platform did not start a sandbox within 15 s (it hangs on this machine); the systrap platform does"
	if c.OK || ctx.Err() != nil || !strings.Contains(c.Detail, want) || c.Fix != `set [python] platform = "systrap"` {
		t.Errorf("platform line = %+v; want %q", c, want)
	}
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(testEnv.Dir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	if left, err := Leftovers(ctx, SweepOptions{Runtime: rt, Prefix: prefix, StateDir: testEnv.Dir}); err != nil || len(left) > 0 {
		t.Errorf("the probes left %v %v", left, err)
	}
}
