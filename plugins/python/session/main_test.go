package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// The tests run real sandboxes (runsc and the session rootfs of make runsc rootfs, as root: the
// conversation sandboxes' own, build/rootfs-sessions) on real loop mounts. Everything carries a prefix and a folder of the tests' own; TestMain asserts that no
// sandbox, mount or loop device of theirs is left.

var testEnv sandboxtest.Setup

// childEnv names the variable that makes the test binary a host to kill (TestKilledHost…).
const childEnv = "TOOLHOST_SESSION_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(sandboxtest.Main(m, &testEnv, sandboxtest.MainOptions{Who: "the session tests", Prefix: "ths", What: "sandboxes, mounts or loop devices",
		Sessions: true,
		Leftovers: func(s sandboxtest.Setup) sandboxtest.Leftovers {
			sweep := func() (sandbox.SweepOptions, error) {
				rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: s.Runsc, Root: filepath.Join(s.Dir, "state", "runsc")})
				return sandbox.SweepOptions{Runtime: rt, Prefix: s.Prefix, StateDir: filepath.Join(s.Dir, "state")}, err
			}
			return sandboxtest.Leftovers{
				List: func(ctx context.Context) ([]string, error) {
					opts, err := sweep()
					if err != nil {
						return nil, err
					}
					left, err := sandbox.Leftovers(ctx, opts)
					return append(left, hostLeftovers(s.Dir)...), err
				},
				Sweep: func(ctx context.Context) error {
					opts, err := sweep()
					if err != nil {
						return err
					}
					return sandbox.Sweep(ctx, opts)
				},
			}
		}}))
}

// hostLeftovers lists the mounts below dir and the loop devices on files below it.
func hostLeftovers(dir string) []string {
	var out []string
	ms, _ := readMounts()
	for _, mi := range ms {
		if mi.point == dir || strings.HasPrefix(mi.point, dir+"/") {
			out = append(out, "mount "+mi.point)
		}
	}
	for _, l := range loopDevices() {
		if strings.HasPrefix(l.file, dir+"/") {
			out = append(out, "loop "+l.dev+" on "+l.file)
		}
	}
	return out
}

// testSetup is what a test's managers share: the sandboxes' state folder and the sessions'
// folder.
type testSetup struct {
	state, dir string
}

func newSetup(t *testing.T) testSetup {
	t.Helper()
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	d, err := os.MkdirTemp(testEnv.Dir, "t-")
	if err != nil {
		t.Fatal(err)
	}
	// Removed once the test's managers are closed (their cleanups run first): images and
	// checkpoints of every test would otherwise fill a small disk (the VMs').
	t.Cleanup(func() { os.RemoveAll(d) })
	return testSetup{state: filepath.Join(testEnv.Dir, "state"), dir: filepath.Join(d, "sessions")}
}

// sandboxes makes a sandbox manager of the tests' prefix on the session rootfs (a new instance,
// as a new process would have).
func (ts testSetup) sandboxes(t testing.TB) *sandbox.Manager {
	t.Helper()
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(ts.state, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := sandbox.NewManager(sandbox.ManagerOptions{Runtime: rt, Rootfs: testEnv.SessionRootfs, StateDir: ts.state, Prefix: testEnv.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	return sm
}

func testLimits() sandbox.Limits {
	return sandbox.Limits{MemoryBytes: 256 << 20, Pids: 256, CPUs: 1, OpenFiles: 256}
}

// manager makes a session manager over the setup's folder, with a sandbox manager of its own;
// both are closed when the test ends. opts fills in what the test sets.
func (ts testSetup) manager(t *testing.T, opts Options) *Manager {
	t.Helper()
	sm := ts.sandboxes(t)
	opts.Sandboxes, opts.Dir = sm, ts.dir
	if opts.DiskMB == 0 {
		opts.DiskMB = 16
	}
	if opts.Limits.MemoryBytes == 0 {
		opts.Limits = testLimits()
	}
	if opts.KeepFreeMB == 0 {
		// The VMs' disk has little more than the default's 1024 MiB free: their checkpoints
		// (made only while that much stays free beside their memory limit) would never be.
		opts.KeepFreeMB = 64
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("closing the session manager: %v", err)
		}
		if err := sm.Close(ctx); err != nil {
			t.Errorf("closing the sandbox manager: %v", err)
		}
	})
	return m
}

// testID makes a session id from a name.
func testID(name string) string {
	id := "s" + fmt.Sprintf("%x", name)
	for len(id) < 25 {
		id += "0"
	}
	return id[:25]
}

// output collects what a run prints.
type output struct {
	mu          sync.Mutex
	out, errOut strings.Builder
}

func (o *output) run(r Run) Run {
	r.Stdout = func(b []byte) { o.mu.Lock(); o.out.Write(b); o.mu.Unlock() }
	r.Stderr = func(b []byte) { o.mu.Lock(); o.errOut.Write(b); o.mu.Unlock() }
	return r
}

func (o *output) stdout() string { o.mu.Lock(); defer o.mu.Unlock(); return o.out.String() }
func (o *output) stderr() string { o.mu.Lock(); defer o.mu.Unlock(); return o.errOut.String() }

// runOK runs code and returns the result and what it printed; an error fails the test.
func runOK(t *testing.T, m *Manager, id, lang, code string) (Result, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var o output
	res, err := m.Run(ctx, id, o.run(Run{Language: lang, Code: code, Timeout: time.Minute}))
	if err != nil {
		t.Fatalf("%s run %q: %v (stdout %q, stderr %q)", lang, code, err, o.stdout(), o.stderr())
	}
	return res, o.stdout(), o.stderr()
}

// child is a host that the test kills: it runs code that writes a file and then waits, says
// so on stdout, and is killed with SIGKILL meanwhile.
func child() int {
	var ts testSetup
	ts.state, ts.dir = os.Getenv("STATE"), os.Getenv("DIR")
	testEnv.Runsc, testEnv.SessionRootfs, testEnv.Prefix = os.Getenv("RUNSC"), os.Getenv("ROOTFS"), os.Getenv("PREFIX")
	fail := func(err error) int { fmt.Println("child:", err); return 1 }
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(ts.state, "runsc")})
	if err != nil {
		return fail(err)
	}
	sm, err := sandbox.NewManager(sandbox.ManagerOptions{Runtime: rt, Rootfs: testEnv.SessionRootfs, StateDir: ts.state, Prefix: testEnv.Prefix})
	if err != nil {
		return fail(err)
	}
	m, err := New(Options{Sandboxes: sm, Dir: ts.dir, DiskMB: 16, Limits: testLimits()})
	if err != nil {
		return fail(err)
	}
	_, err = m.Run(context.Background(), os.Getenv("SESSION"), Run{Language: "bash", Timeout: 10 * time.Minute,
		Code:   `echo kept > /work/before && echo mid-run && sleep 600`,
		Stdout: func(b []byte) { os.Stdout.Write(b) }})
	if err != nil {
		return fail(err)
	}
	return fail(errors.New("the run ended"))
}

// bothWays runs test with the runs started by the sandbox's agent, then by runsc exec.
func bothWays(t *testing.T, test func(t *testing.T, viaExec bool)) {
	t.Run("agent", func(t *testing.T) { test(t, false) })
	t.Run("exec", func(t *testing.T) { test(t, true) })
}
