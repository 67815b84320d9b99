package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// platformConfig is a [python] table with prefix and platform.
func platformConfig(prefix, platform string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": env.rootfs, "session_rootfs": env.sessionRootfs,
		"state_dir": env.stateDir, "sandbox_prefix": prefix, "platform": platform, "pool": map[string]any{"size": 0}})
	return raw
}

// TestConfigureRefusesAPlatformThatDoesntStart: the real kvm platform fails at once in a VM guest
// like this one, hangs on some machines and works on others. When it doesn't work the kind says
// so within the probe's bound, names the platform that works, takes no config and leaves
// nothing behind.
func TestConfigureRefusesAPlatformThatDoesntStart(t *testing.T) {
	t.Parallel()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	prefix := testPrefix("thkvm")
	k := newKind(kindOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := k.Configure(ctx, platformConfig(prefix, "kvm"))
	if err == nil {
		_ = k.Close(ctx)
		assertNothingLeft(t, prefix)
		t.Skip("kvm starts sandboxes on this machine: nothing to refuse")
	}
	t.Logf("Configure with kvm: %v", err)
	if !strings.Contains(err.Error(), "the python kind can't start") || !strings.Contains(err.Error(), "the kvm platform") ||
		!strings.Contains(err.Error(), `set [python] platform = "systrap"`) {
		t.Fatalf("Configure with kvm = %v", err)
	}
	if _, cerr := k.current(); cerr == nil {
		t.Error("the kind took a config it refused")
	}
	assertNothingLeft(t, prefix)
}

// hangingRunsc is a runsc that hangs ("sleep 3599") when asked to start a sandbox on platform.
func hangingRunsc(t *testing.T, platform string) string {
	return sandboxtest.HangingRunsc(t, env.runscBin, platform, 3599)
}

// TestConfigureGivesUpOnAHangingPlatform: a platform that neither starts a sandbox nor fails is
// given up on after the probe's bound, with a message naming it and the platform that works, and
// the probe leaves nothing behind.
func TestConfigureGivesUpOnAHangingPlatform(t *testing.T) {
	t.Parallel()
	onlyOnce(t)
	prefix := testPrefix("thhg")
	k := newKind(kindOptions{runtimeBinary: hangingRunsc(t, "kvm")})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	err := k.Configure(ctx, platformConfig(prefix, "kvm"))
	t.Logf("Configure took %v: %v", time.Since(t0), err)
	if err == nil {
		t.Fatal("the kind took a platform that hangs")
	}
	want := "the kvm platform did not start a sandbox within 15 s (it hangs on this machine); the systrap platform does"
	if ctx.Err() != nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `set [python] platform = "systrap"`) {
		t.Fatalf("Configure with a hanging kvm = %v; want %q and the fix", err, want)
	}
	if _, cerr := k.current(); cerr == nil {
		t.Error("the kind took a config it refused")
	}
	assertNothingLeft(t, prefix)
	if pids := processesRunning("sleep", "3599"); len(pids) > 0 {
		t.Errorf("the hung probe's runsc is still running: %v", pids)
	}
	// The same machine, the platform that works: the kind starts.
	ok := newKind(kindOptions{runtimeBinary: hangingRunsc(t, "kvm")})
	if err := ok.Configure(ctx, platformConfig(prefix, runsc.PlatformSystrap)); err != nil {
		t.Fatalf("Configure with systrap through the wrapper: %v", err)
	}
	if err := ok.Close(ctx); err != nil {
		t.Error(err)
	}
	assertNothingLeft(t, prefix)
}

// processesRunning lists the pids whose command line is exactly args.
func processesRunning(args ...string) []string {
	want := strings.Join(args, "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.TrimRight(string(b), "\x00") == want {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
