package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// The tests run against the real runsc and rootfs built by make runsc rootfs, as root. Their
// sandboxes carry a prefix of their own, and TestMain asserts that none of them is left.

var testEnv struct {
	runsc, rootfs, stateDir, prefix string
	skip                            string
}

func TestMain(m *testing.M) {
	code := func() int {
		repo, _ := filepath.Abs("../..")
		env := sandboxtest.Find(repo, "the sandbox tests")
		testEnv.runsc, testEnv.rootfs, testEnv.skip = env.Runsc, env.Rootfs, env.Skip
		if testEnv.skip != "" {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "runsc-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		testEnv.stateDir = dir
		id, _ := NewID("")
		testEnv.prefix = "tht" + id[:4] + "-"
		code := m.Run()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.runsc, Root: filepath.Join(dir, "runsc")})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts := SweepOptions{Runtime: rt, Prefix: testEnv.prefix, StateDir: dir}
		return max(code, sandboxtest.NothingLeft(ctx, "sandboxes", sandboxtest.Leftovers{
			List:  func(ctx context.Context) ([]string, error) { return Leftovers(ctx, opts) },
			Sweep: func(ctx context.Context) error { return Sweep(ctx, opts) },
		}))
	}()
	os.Exit(code)
}

// newTestManager returns a manager on the test state folder; its sandboxes are closed when the
// test ends.
func newTestManager(t *testing.T, netOpts NetworkOptions) *Manager {
	t.Helper()
	if testEnv.skip != "" {
		t.Skip(testEnv.skip)
	}
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.runsc, Root: filepath.Join(testEnv.stateDir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerOptions{Runtime: rt, Rootfs: testEnv.rootfs, StateDir: testEnv.stateDir,
		Prefix: testEnv.prefix, Network: netOpts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("closing the manager: %v", err)
		}
	})
	return m
}
