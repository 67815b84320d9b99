package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// The tests run the kind in-process (sdktest) against the real runsc and rootfs of make runsc
// rootfs, as root. Two kinds serve them: "walled" (the tests' config) and "open" (the same, but
// its network = true sandboxes may also reach a lab subnet the tests make). Each has a sandbox
// prefix of its own; TestMain asserts that nothing of either is left at the end.

const testSecret = "s3cr3t-of-the-host-7f1c"

var env struct {
	skip         string
	walled, open *kind
	poolSize     int // [python.pool] size of walled and open in this pass of the suite
	stateDir     string
	runscBin     string
	// rootfs and sessionRootfs are [python] rootfs and session_rootfs (TOOLHOST_ROOTFS,
	// TOOLHOST_SESSION_ROOTFS): the session rootfs has numpy, pandas and matplotlib.
	rootfs, sessionRootfs string
	labRange              netip.Prefix // the /16 the open kind may reach: openLab cuts its labs from it
	labs                  atomic.Int32 // how many labs openLab made
	workMB, outputB       int
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if spec := os.Getenv(helperEnv); spec != "" {
		return runHelper(spec) // the test binary as a stand-in for the plugin (lifetime_test.go)
	}
	repo, _ := filepath.Abs("../..")
	found := sandboxtest.Find(repo, "the python kind's tests")
	env.runscBin, env.skip = found.Runsc, found.Skip
	rootfs := found.Rootfs
	env.rootfs, env.sessionRootfs = found.Rootfs, found.SessionRootfs
	if env.skip != "" {
		return m.Run()
	}
	// A secret in the environment of the process that runs sandboxes: no sandbox may see it.
	os.Setenv("TOOLHOST_TEST_SECRET", testSecret)
	dir, err := os.MkdirTemp("", "python-kind-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env.stateDir = dir
	env.labRange = randomLabRange()
	env.workMB, env.outputB = 64, 1<<20
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: env.runscBin, Root: filepath.Join(dir, "runsc")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The whole suite runs twice, pool off and pool on, and must pass the same both times
	// (TOOLHOST_TEST_POOL=off or =on runs one of them).
	sizes := []int{0, 2}
	switch os.Getenv("TOOLHOST_TEST_POOL") {
	case "off":
		sizes = []int{0}
	case "on":
		sizes = []int{2}
	}
	code := 0
	for _, size := range sizes {
		fmt.Printf("python kind suite, [python.pool] size = %d\n", size)
		if c := runSuite(ctx, m, rt, rootfs, size); c != 0 {
			code = c
		}
	}
	return code
}

// runSuite runs the tests with kinds whose pool keeps size ready sandboxes, then closes them and
// asserts nothing of theirs is left.
func runSuite(ctx context.Context, m *testing.M, rt *runsc.Runtime, rootfs string, size int) int {
	mk := func(extra []string) (*kind, string, error) {
		prefix := testPrefix("thpy")
		k := newKind(kindOptions{})
		cfg, _ := json.Marshal(map[string]any{
			"runsc": env.runscBin, "rootfs": rootfs, "session_rootfs": env.sessionRootfs, "state_dir": env.stateDir, "sandbox_prefix": prefix,
			"max_memory_mb": 1024, "max_output_bytes": env.outputB, "pids": 64, "tmp_mb": 32,
			"work_mb": env.workMB, "extra_allowed_cidrs": extra,
			"pool": map[string]any{"size": size, "max": 16, "max_idle_minutes": 10},
		})
		return k, prefix, k.Configure(ctx, cfg)
	}
	var (
		p1, p2 string
		err    error
	)
	env.poolSize = size
	if env.walled, p1, err = mk(nil); err == nil {
		env.open, p2, err = mk([]string{env.labRange.String()})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "configuring the kind:", err)
		return 1
	}
	prefixes := []string{p1, p2}

	code := m.Run()

	// The close has a time of its own: the tests may have taken most of ctx's (the VMs'
	// emulated CPU takes minutes).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, k := range []*kind{env.walled, env.open} {
		if err := k.Close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "closing the kind:", err)
			code = 1
		}
	}
	for _, p := range prefixes {
		code = max(code, sandboxtest.NothingLeft(ctx, "sandboxes", sandboxtest.Leftovers{List: func(ctx context.Context) ([]string, error) {
			return sandbox.Leftovers(ctx, sandbox.SweepOptions{Runtime: rt, Prefix: p, StateDir: env.stateDir})
		}}))
	}
	return code
}

// conn serves the walled kind (or the open one) to one test over the SDK's in-process gRPC.
func conn(t *testing.T, open bool) *sdktest.Conn {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	k := env.walled
	if open {
		k = env.open
	}
	return sdktest.Start(t, k, nil)
}

// pyTool makes a python tool from code and run-table extras.
func pyTool(t *testing.T, code string, extra map[string]any) sdk.Tool {
	t.Helper()
	run := map[string]any{"type": "python", "code": code}
	for k, v := range extra {
		run[k] = v
	}
	return sdktest.Tool(t, "test_tool", run)
}

// invoke runs code once with args and returns the run.
func invoke(t *testing.T, c *sdktest.Conn, code string, extra map[string]any, args any) *sdktest.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	return c.Invoke(ctx, pyTool(t, code, extra), args)
}

// wantError asserts the run failed with code and exactly message.
func wantError(t *testing.T, r *sdktest.Run, code, message string) {
	t.Helper()
	if r.Err == nil {
		t.Fatalf("the run succeeded with %s; want error %s %q (stderr %q)", r.Result, code, message, tail(r.Stderr()))
	}
	if r.ErrorCode() != code || r.Err.Error() != message {
		t.Fatalf("error = %s %q; want %s %q (stderr %q)", r.ErrorCode(), r.Err, code, message, tail(r.Stderr()))
	}
}

// wantResult asserts the run returned JSON equal to want.
func wantResult(t *testing.T, r *sdktest.Run, want string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("the run failed: %s %v (stderr %q)", r.ErrorCode(), r.Err, tail(r.Stderr()))
	}
	var got, exp any
	if err := json.Unmarshal(r.Result, &got); err != nil {
		t.Fatalf("result %s isn't JSON: %v", r.Result, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	e, _ := json.Marshal(exp)
	if string(g) != string(e) {
		t.Fatalf("result = %s; want %s", g, e)
	}
}

func tail(s string) string {
	if len(s) > 600 {
		return "…" + s[len(s)-600:]
	}
	return s
}

// testPrefix is a sandbox prefix of its own for one test: a stem and four
// random hex digits, so runs at the same time never sweep each other.
func testPrefix(stem string) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return stem + hex.EncodeToString(b) + "-"
}
