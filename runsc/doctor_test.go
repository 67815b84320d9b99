package runsc

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDoctorPassesOnThisMachine(t *testing.T) {
	t.Parallel()
	if testEnv.skip != "" {
		t.Skip(testEnv.skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checks := Doctor(ctx, DoctorOptions{Runsc: testEnv.runsc, Rootfs: testEnv.rootfs, StateDir: testEnv.stateDir, Prefix: testEnv.prefix})
	names := map[string]bool{}
	for _, c := range checks {
		names[c.Name] = true
		t.Logf("%v %s: %s", c.OK, c.Name, c.Detail)
		if !c.OK {
			t.Errorf("%s failed: %s (%s)", c.Name, c.Detail, c.Fix)
		}
	}
	for _, n := range []string{"root", "runsc", "rootfs", "cgroups", "network namespaces", "iptables", "platform"} {
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
	if testEnv.skip != "" {
		t.Skip(testEnv.skip)
	}
	dir := t.TempDir()
	checks := Doctor(context.Background(), DoctorOptions{Runsc: filepath.Join(dir, "runsc"), Rootfs: dir, StateDir: dir, Prefix: testEnv.prefix})
	fails := map[string]Check{}
	for _, c := range checks {
		if !c.OK {
			fails[c.Name] = c
		}
	}
	if !strings.Contains(fails["runsc"].Fix, "make runsc") || !strings.Contains(fails["rootfs"].Fix, "make rootfs") {
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
