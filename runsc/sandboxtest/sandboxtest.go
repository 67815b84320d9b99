// Package sandboxtest holds what the tests that run real sandboxes share:
// their TestMain (Main: finding the runsc and rootfs that make runsc rootfs
// built, a folder and a name prefix of their own, checking the tests left
// nothing behind), and a runsc that hangs on one platform.
//
// It does not import runsc/sandbox, whose own tests use it.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Env is where the tests' runsc and rootfs are, and why the tests skip.
type Env struct {
	Runsc, Rootfs string
	// SessionRootfs is the conversation sandboxes' rootfs ([python] session_rootfs, with the
	// scientific stack): build/rootfs-sessions, or TOOLHOST_SESSION_ROOTFS. Only tests that
	// need it (MainOptions.Sessions, or their own check) skip without it.
	SessionRootfs string
	// Skip says why the tests cannot run here; "" when they can.
	Skip string
}

// Find finds runsc and the rootfs below the repository at repo (build/bin/runsc, build/rootfs,
// build/rootfs-sessions), or where TOOLHOST_RUNSC, TOOLHOST_ROOTFS and TOOLHOST_SESSION_ROOTFS say. Skip names who ("the sandbox tests") when
// this is not root or one of them is missing, with the make target that builds it.
func Find(repo, who string) Env {
	e := Env{
		Runsc:         EnvOr("TOOLHOST_RUNSC", filepath.Join(repo, "build/bin/runsc")),
		Rootfs:        EnvOr("TOOLHOST_ROOTFS", filepath.Join(repo, "build/rootfs")),
		SessionRootfs: EnvOr("TOOLHOST_SESSION_ROOTFS", filepath.Join(repo, "build/rootfs-sessions")),
	}
	switch {
	case os.Geteuid() != 0:
		e.Skip = who + " need root"
	case !Exists(e.Runsc):
		e.Skip = "no runsc at " + e.Runsc + ": make runsc"
	case !Exists(filepath.Join(e.Rootfs, "usr/bin/python3")):
		e.Skip = "no rootfs at " + e.Rootfs + ": make rootfs"
	}
	return e
}

// NeedSessions is e with Skip set when the session rootfs is missing too (and nothing else is).
func (e Env) NeedSessions() Env {
	if e.Skip == "" && !Exists(filepath.Join(e.SessionRootfs, "usr/bin/python3")) {
		e.Skip = "no session rootfs at " + e.SessionRootfs + ": make rootfs"
	}
	return e
}

// EnvOr is the environment variable k, or def when it is empty.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Exists says whether p is there.
func Exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Leftovers lists what tests left behind; Sweep removes it. They are
// sandbox.Leftovers and sandbox.Sweep with the tests' options.
type Leftovers struct {
	List  func(context.Context) ([]string, error)
	Sweep func(context.Context) error // nil: left as it is
}

// NothingLeft says on stderr what the tests left behind, naming what ("sandboxes"), sweeps it
// when l.Sweep is set, and returns 1; it returns 0 when nothing is left.
func NothingLeft(ctx context.Context, what string, l Leftovers) int {
	left, err := l.List(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listing leftovers:", err)
		return 1
	}
	if len(left) == 0 {
		return 0
	}
	fmt.Fprintf(os.Stderr, "the tests left %s behind:\n  %v\n", what, left)
	if l.Sweep != nil {
		_ = l.Sweep(ctx)
	}
	return 1
}

// HangingRunsc writes a wrapper around the real runsc that hangs, as kvm does on some machines,
// when asked to start a sandbox on platform: it becomes "sleep seconds", which a test may look
// for; every other command goes to the real runsc.
func HangingRunsc(t testing.TB, realRunsc, platform string, seconds int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runsc")
	script := `#!/bin/sh
hang=
verb=
for a in "$@"; do
	case "$a" in
	--platform=` + platform + `) hang=1 ;;
	run|create) verb=1 ;;
	esac
done
if [ -n "$hang" ] && [ -n "$verb" ]; then
	exec sleep ` + strconv.Itoa(seconds) + `
fi
exec ` + realRunsc + ` "$@"
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// Setup is where one package's sandbox tests run: runsc and the rootfs (or why the tests skip),
// a folder of their own (Dir: state and scratch, removed at the end) and the prefix of their
// sandboxes' names, so that what they leave can be told from everyone else's.
type Setup struct {
	Env
	Dir, Prefix string
}

// MainOptions say what Main needs of one package.
type MainOptions struct {
	// Who names the tests in a skip ("the sandbox tests").
	Who string
	// Prefix starts the tests' sandbox names (3 letters, e.g. "tht"); Main adds 4 random hex
	// digits and "-", so that two runs at once don't take each other's sandboxes for their own.
	Prefix string
	// What names what Leftovers lists, in the message when some is left ("sandboxes").
	What string
	// Leftovers lists (and sweeps) what the tests left under the setup; nil checks nothing.
	Leftovers func(Setup) Leftovers
	// Sessions says the tests run conversation sandboxes, on the session rootfs: they skip
	// without it too.
	Sessions bool
}

// Main runs one package's sandbox tests (its TestMain calls it) and returns the exit code. It
// finds runsc and the rootfs below the repository (Find), and when the tests can run, makes
// their folder and prefix, puts them in *s for the tests to read, runs the tests and checks that
// nothing is left (NothingLeft). When they can't, s.Skip says why and the tests run to skip.
func Main(m *testing.M, s *Setup, opts MainOptions) int {
	repo, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.Env = Find(repo, opts.Who)
	if opts.Sessions {
		s.Env = s.NeedSessions()
	}
	if s.Skip != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", opts.Prefix+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	var id [2]byte
	if _, err := rand.Read(id[:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.Dir, s.Prefix = dir, opts.Prefix+hex.EncodeToString(id[:])+"-"
	code := m.Run()
	if opts.Leftovers == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return max(code, NothingLeft(ctx, opts.What, opts.Leftovers(*s)))
}

// repoRoot is the folder of go.mod at or above the working folder (a package's tests run in
// the package's folder), or the working folder itself when there is none: a test binary run
// outside the repository (in the VMs) is given runsc and the rootfs by TOOLHOST_RUNSC,
// TOOLHOST_ROOTFS and TOOLHOST_SESSION_ROOTFS.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if Exists(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return dir, nil
		}
	}
}
