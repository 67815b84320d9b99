package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// The tests run against the real runsc and rootfs built by make runsc rootfs, as root. Their
// sandboxes carry a prefix of their own, and TestMain asserts that none of them is left.

var testEnv sandboxtest.Setup

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, &testEnv, sandboxtest.MainOptions{Who: "the sandbox tests", Prefix: "tht", What: "sandboxes",
		Leftovers: func(s sandboxtest.Setup) sandboxtest.Leftovers {
			return sandboxtest.Leftovers{
				List: func(ctx context.Context) ([]string, error) {
					opts, err := testSweepOptions(s)
					if err != nil {
						return nil, err
					}
					return Leftovers(ctx, opts)
				},
				Sweep: func(ctx context.Context) error {
					opts, err := testSweepOptions(s)
					if err != nil {
						return err
					}
					return Sweep(ctx, opts)
				},
			}
		}}))
}

// testSweepOptions are the sweep's options for the tests' sandboxes.
func testSweepOptions(s sandboxtest.Setup) (SweepOptions, error) {
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: s.Runsc, Root: filepath.Join(s.Dir, "runsc")})
	if err != nil {
		return SweepOptions{}, err
	}
	return SweepOptions{Runtime: rt, Prefix: s.Prefix, StateDir: s.Dir}, nil
}

// newTestManager returns a manager on the test state folder; its sandboxes are closed when the
// test ends.
func newTestManager(t *testing.T, netOpts NetworkOptions) *Manager {
	t.Helper()
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(testEnv.Dir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerOptions{Runtime: rt, Rootfs: testEnv.Rootfs, StateDir: testEnv.Dir,
		Prefix: testEnv.Prefix, Network: netOpts})
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
