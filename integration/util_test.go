package integration

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testSlowdown is how much slower than this machine the tests run where they
// run: TOOLHOST_TEST_SLOWDOWN, set where the VMs run this package's tests
// (about 10 under TCG), else 1.
func testSlowdown() float64 {
	if f, err := strconv.ParseFloat(os.Getenv("TOOLHOST_TEST_SLOWDOWN"), 64); err == nil && f >= 1 {
		return f
	}
	return 1
}

// slow is d times testSlowdown.
func slow(d time.Duration) time.Duration { return time.Duration(float64(d) * testSlowdown()) }

func errorsAs(err error, target any) bool { return err != nil && errors.As(err, target) }

// pluginChildren are the plugin processes of a host: pid → kind, read from each child's argv[0]
// (the host runs a sealed copy of each binary, so /proc/PID/exe is /memfd:…). A zombie's kind is
// marked "zombie <kind>".
func pluginChildren(hostPID int) map[int]string {
	out := map[int]string{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(hostPID) {
			continue
		}
		dir := filepath.Dir(stat)
		pid, _ := strconv.Atoi(filepath.Base(dir))
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		kind := strings.TrimPrefix(filepath.Base(string(argv0)), "toolhost-plugin-")
		if fields[0] == "Z" {
			kind = "zombie " + kind
		}
		out[pid] = kind
	}
	return out
}

// pluginPIDOf is the pid of a host's running plugin of a kind, or 0 while there is none.
func pluginPIDOf(hostPID int, kind string) int {
	for pid, k := range pluginChildren(hostPID) {
		if k == kind {
			return pid
		}
	}
	return 0
}

// sessionRootfs is the conversation sandboxes' rootfs beside rootfs (sandboxBuild's): where
// TOOLHOST_SESSION_ROOTFS says, else the rootfs's folder with -sessions (build/rootfs-sessions, in
// a VM /var/lib/toolhost/rootfs-sessions), which [python] session_rootfs also is when left out.
// It skips the test when it is missing.
func sessionRootfs(t testing.TB, rootfs string) string {
	t.Helper()
	dir := rootfs + "-sessions"
	if v := os.Getenv("TOOLHOST_SESSION_ROOTFS"); v != "" {
		dir = v
	}
	if !fileExists(filepath.Join(dir, "usr/bin/python3")) {
		t.Skip("no session rootfs at " + dir + ": make rootfs")
	}
	return dir
}

// sandboxBuild is what python tools need, built by make runsc rootfs: the repository (by its real
// path: runsc mounts the rootfs by it), runsc and the rootfs. It skips the test when they are missing
// or the test isn't root.
func sandboxBuild(t testing.TB) (repo, runscBin, rootfs string) {
	t.Helper()
	repo = pythonRepo(t)
	if build, err := filepath.EvalSymlinks(filepath.Join(repo, "build")); err == nil {
		repo = filepath.Dir(build)
	}
	runscBin = filepath.Join(repo, "build/bin/runsc")
	rootfs = filepath.Join(repo, "build/rootfs")
	// In a VM (vm_packages_test.go) the build is the share disk's runsc and the
	// package's rootfs.
	if v := os.Getenv("TOOLHOST_RUNSC"); v != "" {
		runscBin = v
	}
	if v := os.Getenv("TOOLHOST_ROOTFS"); v != "" {
		rootfs = v
	}
	switch {
	case os.Geteuid() != 0:
		t.Skip("python tools need root")
	case !fileExists(runscBin) || !fileExists(filepath.Join(rootfs, "usr/bin/python3")):
		t.Skip("no runsc or rootfs: make runsc rootfs")
	}
	return repo, runscBin, rootfs
}
