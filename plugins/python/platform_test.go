package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
)

// TestConfigureRefusesAPlatformThatDoesntStart: kvm doesn't start in a VM guest like this one; the kind says so,
// names the platform that works, and takes no config.
func TestConfigureRefusesAPlatformThatDoesntStart(t *testing.T) {
	t.Parallel()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	repo, _ := filepath.Abs("../..")
	prefix := testPrefix("thkvm")
	raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": envOr("TOOLHOST_ROOTFS", filepath.Join(repo, "build/rootfs")),
		"state_dir": env.stateDir, "sandbox_prefix": prefix, "platform": "kvm"})
	k := newKind(kindOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := k.Configure(ctx, raw)
	if err == nil {
		_ = k.Close(ctx)
		t.Skip("kvm starts sandboxes on this machine")
	}
	if !strings.Contains(err.Error(), "the python kind can't start") || !strings.Contains(err.Error(), `set [python] platform = "systrap"`) {
		t.Fatalf("Configure with kvm = %v", err)
	}
	if _, cerr := k.current(); cerr == nil {
		t.Error("the kind took a config it refused")
	}
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(env.stateDir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	if left, err := runsc.Leftovers(ctx, runsc.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: env.stateDir}); err != nil || len(left) > 0 {
		t.Errorf("the refused config left %v, %v", left, err)
	}
}
