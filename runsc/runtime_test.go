package runsc_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
)

// TestRuntimeVerbs drives one container through runsc's verbs: create, state, start, exec, kill,
// delete; and a failing verb returns an *Error carrying runsc's stderr.
func TestRuntimeVerbs(t *testing.T) {
	t.Parallel()
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	rt := newRuntime()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := sandbox.NewID(testEnv.Prefix)
	spec, err := sandbox.Spec(sandbox.BundleOptions{Rootfs: testEnv.Rootfs, Args: []string{"/bin/sleep", "60"}, UID: 65534, GID: 65534,
		CgroupsPath: "/" + id, Limits: sandbox.Limits{MemoryBytes: 256 << 20, Pids: 256, CPUs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	if err := sandbox.WriteBundle(bundle, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The cgroup runsc made goes with the sweep (TestMain asserts nothing is left).
		_ = rt.Delete(context.Background(), id, &runsc.DeleteOpts{Force: true})
		_ = sandbox.Sweep(context.Background(), sandbox.SweepOptions{Runtime: rt, Prefix: testEnv.Prefix, StateDir: testEnv.Dir})
	})
	if err := rt.Create(ctx, id, bundle, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.State(ctx, id); err != nil || st.Status != "created" || st.ID != id {
		t.Fatalf("state after create = %+v, %v", st, err)
	}
	if err := rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.State(ctx, id); err != nil || st.Status != "running" || st.Pid == 0 {
		t.Fatalf("state after start = %+v, %v", st, err)
	}
	list, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list {
		found = found || s.ID == id
	}
	if !found {
		t.Errorf("runsc list doesn't show %s: %+v", id, list)
	}
	if code, err := rt.Exec(ctx, id, []string{"/bin/true"}, nil); err != nil || code != 0 {
		t.Errorf("exec true = %d, %v", code, err)
	}
	if code, err := rt.Exec(ctx, id, []string{"/bin/sh", "-c", "exit 3"}, &runsc.ExecOpts{User: "65534:65534"}); err != nil || code != 3 {
		t.Errorf("exec exit 3 = %d, %v", code, err)
	}
	if err := rt.Kill(ctx, id, syscall.SIGKILL, &runsc.KillOpts{All: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := rt.State(ctx, id)
		if err == nil && st.Status == "stopped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container didn't stop: %+v, %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := rt.Delete(ctx, id, &runsc.DeleteOpts{Force: true}); err != nil {
		t.Fatal(err)
	}
	_, err = rt.State(ctx, id)
	var ce *runsc.Error
	if !errors.As(err, &ce) || !runsc.IsNotExist(err) || ce.Stderr == "" || !strings.Contains(err.Error(), "runsc state failed") {
		t.Errorf("state of a deleted container = %v; want an *Error saying it doesn't exist", err)
	}
}
