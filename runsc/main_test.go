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
		testEnv.runsc = envOr("TOOLHOST_RUNSC", filepath.Join(repo, "build/bin/runsc"))
		testEnv.rootfs = envOr("TOOLHOST_ROOTFS", filepath.Join(repo, "build/rootfs"))
		switch {
		case os.Geteuid() != 0:
			testEnv.skip = "the runtime tests need root"
		case !exists(testEnv.runsc):
			testEnv.skip = "no runsc at " + testEnv.runsc + ": make runsc"
		case !exists(filepath.Join(testEnv.rootfs, "usr/bin/python3")):
			testEnv.skip = "no rootfs at " + testEnv.rootfs + ": make rootfs"
		}
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
		left, err := sandbox.Leftovers(ctx, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "listing leftovers:", err)
			return 1
		}
		if len(left) > 0 {
			fmt.Fprintf(os.Stderr, "the tests left containers behind:\n  %v\n", left)
			_ = sandbox.Sweep(ctx, opts)
			return 1
		}
		return code
	}())
}

func newRuntime() *runsc.Runtime {
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.runsc, Root: filepath.Join(testEnv.stateDir, "runsc")})
	if err != nil {
		panic(err)
	}
	return rt
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
