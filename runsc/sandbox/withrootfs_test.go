package sandbox

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWithRootfsStartsOnTheOtherRootfs: a manager made by WithRootfs starts its sandboxes on its
// own rootfs (the session rootfs: pandas imports there, not on the lean one), as sandboxes of the
// same instance, which Leftovers lists while they run; a missing rootfs is an error naming it and
// saying how to build it.
func TestWithRootfsStartsOnTheOtherRootfs(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	missing := filepath.Join(t.TempDir(), "rootfs-sessions")
	if _, err := m.WithRootfs(missing); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "toolhost rootfs") {
		t.Errorf("a missing rootfs: %v; want an error naming %s and toolhost rootfs", err, missing)
	}
	env := testEnv.NeedSessions()
	if env.Skip != "" {
		t.Skip(env.Skip)
	}
	sm, err := m.WithRootfs(env.SessionRootfs)
	if err != nil {
		t.Fatal(err)
	}
	if sm.Rootfs() != env.SessionRootfs || m.Rootfs() != testEnv.Rootfs {
		t.Errorf("rootfs: %s and %s; want %s and %s", m.Rootfs(), sm.Rootfs(), testEnv.Rootfs, env.SessionRootfs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	imports := func(m *Manager) int {
		t.Helper()
		sb, err := m.Start(ctx, Options{Args: []string{"/bin/sleep", "600"}, Limits: testLimits(), Lifetime: LongLived})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := sb.Destroy(ctx); err != nil {
				t.Error(err)
			}
		}()
		left, err := Leftovers(ctx, SweepOptions{Runtime: m.opts.Runtime, Prefix: testEnv.Prefix, StateDir: testEnv.Dir})
		if err != nil || !slices.ContainsFunc(left, func(s string) bool { return strings.Contains(s, sb.ID) }) {
			t.Errorf("Leftovers while %s runs: %v, %v; want it listed", sb.ID, left, err)
		}
		status, err := sb.Exec(ctx, []string{"/usr/bin/python3", "-I", "-c", "import pandas"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return status
	}
	if status := imports(sm); status != 0 {
		t.Errorf("import pandas on the session rootfs: status %d; want 0", status)
	}
	if status := imports(m); status == 0 {
		t.Error("import pandas on the lean rootfs worked: it has no pandas")
	}
	if err := sm.Close(ctx); err != nil {
		t.Error(err)
	}
}
