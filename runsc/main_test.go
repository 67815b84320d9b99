package runsc_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// The tests run runsc's verbs against the real runsc and rootfs built by make runsc rootfs, as
// root. Their containers carry a prefix of their own, and TestMain asserts that none is left.

var testEnv sandboxtest.Setup

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, &testEnv, sandboxtest.MainOptions{Who: "the runtime tests", Prefix: "thr", What: "containers",
		Leftovers: func(s sandboxtest.Setup) sandboxtest.Leftovers {
			opts := sandbox.SweepOptions{Runtime: newRuntime(), Prefix: s.Prefix, StateDir: s.Dir}
			return sandboxtest.Leftovers{
				List:  func(ctx context.Context) ([]string, error) { return sandbox.Leftovers(ctx, opts) },
				Sweep: func(ctx context.Context) error { return sandbox.Sweep(ctx, opts) },
			}
		}}))
}

func newRuntime() *runsc.Runtime {
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(testEnv.Dir, "runsc")})
	if err != nil {
		panic(err)
	}
	return rt
}
