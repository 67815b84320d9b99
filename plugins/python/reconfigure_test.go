package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
)

// TestReconfigureKeepsRunsInFlight: a new config (a reload) doesn't stop a run already going; the
// same config again changes nothing; Close leaves nothing of the kind's prefix.
func TestReconfigureKeepsRunsInFlight(t *testing.T) {
	t.Parallel()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	prefix := testPrefix("thrc")
	table := func(workMB int) json.RawMessage {
		raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": env.rootfs, "session_rootfs": env.sessionRootfs,
			"state_dir": env.stateDir, "sandbox_prefix": prefix, "work_mb": workMB})
		return raw
	}
	k := newKind(kindOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.Configure(ctx, table(32)); err != nil {
		t.Fatal(err)
	}
	first, _ := k.current()
	if err := k.Configure(ctx, table(32)); err != nil {
		t.Fatal(err)
	}
	if again, _ := k.current(); again.mgr != first.mgr {
		t.Error("the same config made a new sandbox manager")
	}

	tool := pyTool(t, "import time\ndef run():\n    time.sleep(2)\n    return 'slept'\n", nil)
	done := make(chan *struct {
		res json.RawMessage
		err error
	}, 1)
	go func() {
		res, err := k.Invoke(ctx, sdk.Call{Tool: tool, Args: json.RawMessage(`{}`)}, func(sdk.Event) {})
		done <- &struct {
			res json.RawMessage
			err error
		}{res, err}
	}()
	time.Sleep(time.Second)
	if err := k.Configure(ctx, table(48)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || string(r.res) != `"slept"` {
		t.Errorf("a run in flight during a reload = %s, %v", r.res, r.err)
	}
	if now, _ := k.current(); now.cfg.WorkMB != 48 {
		t.Errorf("the new config didn't take: work_mb %d", now.cfg.WorkMB)
	}
	res, err := k.Invoke(ctx, sdk.Call{Tool: pyTool(t, "import os\ndef run():\n    s = os.statvfs('/work')\n    return s.f_blocks * s.f_frsize >> 20\n", nil)}, func(sdk.Event) {})
	if err != nil || string(res) != "48" {
		t.Errorf("/work after the reload = %s MiB, %v; want 48", res, err)
	}
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	rt, _ := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(env.stateDir, "runsc")})
	// The replaced manager closes in the background; give it a moment, then nothing may be left.
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := sandbox.Leftovers(ctx, sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: env.stateDir})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after Close: %v", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
