package runsc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// The tests run runsc's verbs against the real runsc and rootfs built by make runsc rootfs, as
// root. Their containers carry a prefix of their own, and TestMain asserts that none is left.

var testEnv struct {
	runsc, rootfs, stateDir, prefix string
	skip                            string
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		repo, _ := filepath.Abs("..")
		env := sandboxtest.Find(repo, "the runtime tests")
		testEnv.runsc, testEnv.rootfs, testEnv.skip = env.Runsc, env.Rootfs, env.Skip
		if testEnv.skip != "" {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "runsc-runtime-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		testEnv.stateDir = dir
		id, _ := sandbox.NewID("")
		testEnv.prefix = "thr" + id[:4] + "-"
		code := m.Run()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		opts := sandbox.SweepOptions{Runtime: newRuntime(), Prefix: testEnv.prefix, StateDir: dir}
		return max(code, sandboxtest.NothingLeft(ctx, "containers", sandboxtest.Leftovers{
			List:  func(ctx context.Context) ([]string, error) { return sandbox.Leftovers(ctx, opts) },
			Sweep: func(ctx context.Context) error { return sandbox.Sweep(ctx, opts) },
		}))
	}())
}

func newRuntime() *runsc.Runtime {
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.runsc, Root: filepath.Join(testEnv.stateDir, "runsc")})
	if err != nil {
		panic(err)
	}
	return rt
}
