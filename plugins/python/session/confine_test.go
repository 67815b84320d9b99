package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// TestSessionsCantSeeEachOther: a session's code finds no trace of another session's files by
// any path from inside (../, /work/../.., /proc/*/root, a search of the whole tree), and the Go
// API confines every path to the session's /work: .., absolute paths, symbolic links planted
// inside pointing out (to another session's mount, to /etc) refuse to read, write or list
// through them, and nothing is written outside.
func TestSessionsCantSeeEachOther(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	ctx := context.Background()
	a, b := testID("alice"), testID("bob")
	runOK(t, m, a, "bash", "echo alice-secret-7f3 > secret.txt; mkdir d; echo x > d/inner")
	runOK(t, m, b, "bash", "true")

	// From inside b.
	_, out, errOut := runOK(t, m, b, "bash", `
ls -a ../ /work/../.. 2>&1
ls /proc/*/root/work 2>&1
cat /proc/*/root/work/secret.txt 2>&1
grep -rs "alice-sec""ret-7f3" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3
cat /proc/self/mountinfo
true`)
	if strings.Contains(out, "alice-secret-7f3") || strings.Contains(out, a) {
		t.Errorf("session b sees session a's files:\n%s\n%s", out, errOut)
	}
	if strings.Contains(out, ts.dir) {
		t.Errorf("session b learns the host's session folder from inside:\n%s", out)
	}

	// Through the Go API, as b.
	bad := []string{"../" + a + "/secret.txt", "../../" + a + ".img", "/etc/passwd", "/work/../etc/passwd",
		"d/../../secret.txt", filepath.Join(m.mountPath(a), "secret.txt")}
	for _, p := range bad {
		if _, err := m.ReadFile(ctx, b, p, 1<<20); errcode.Code(err) != errcode.BadPath {
			t.Errorf("ReadFile(b, %q): %v; want bad_path", p, err)
		}
		if _, err := m.WriteFile(ctx, b, p, strings.NewReader("pwned")); errcode.Code(err) != errcode.BadPath {
			t.Errorf("WriteFile(b, %q): %v; want bad_path", p, err)
		}
		if err := m.RemoveFile(ctx, b, p); errcode.Code(err) != errcode.BadPath {
			t.Errorf("RemoveFile(b, %q): %v; want bad_path", p, err)
		}
	}
	// Symbolic links planted by b's code: to a's mount on the host (absolute), to /etc, and
	// relative ones climbing out; a folder that is a link.
	runOK(t, m, b, "bash", "ln -s "+m.mountPath(a)+" toa; ln -s "+filepath.Join(m.mountPath(a), "secret.txt")+" secret; ln -s /etc etc; ln -s ../../../../../../etc/passwd passwd; ln -s /tmp/outside-"+b+" out; ln -s . self")
	for _, p := range []string{"toa/secret.txt", "secret", "etc/passwd", "passwd", "self/secret", "toa"} {
		if _, err := m.ReadFile(ctx, b, p, 1<<20); errcode.Code(err) != errcode.BadPath {
			t.Errorf("ReadFile(b, %q) through a planted link: %v; want bad_path", p, err)
		}
	}
	for _, p := range []string{"toa/new.txt", "etc/evil", "out/x", "self/x"} {
		if _, err := m.WriteFile(ctx, b, p, strings.NewReader("pwned")); errcode.Code(err) != errcode.BadPath {
			t.Errorf("WriteFile(b, %q) through a planted link: %v; want bad_path", p, err)
		}
	}
	// A write onto a link replaces the link, never what it points to.
	if _, err := m.WriteFile(ctx, b, "out", strings.NewReader("mine")); err != nil {
		t.Errorf("WriteFile(b, \"out\") onto a link: %v", err)
	}
	if _, err := os.Stat("/tmp/outside-" + b); err == nil {
		os.RemoveAll("/tmp/outside-" + b)
		t.Errorf("a write through a link made a file outside the workspace")
	}
	if entries, _ := os.ReadDir(m.mountPath(a)); len(entries) != 2 {
		t.Errorf("session a's workspace changed: %v", entries)
	}
	// Removing a link removes the link, never what it points to.
	if err := m.RemoveFile(ctx, b, "toa"); err != nil {
		t.Errorf("removing a link: %v", err)
	}
	if err := m.RemoveFile(ctx, b, "self/etc"); errcode.Code(err) != errcode.BadPath {
		t.Errorf("removing through a link: %v; want bad_path", err)
	}
	if _, err := os.Stat(filepath.Join(m.mountPath(a), "secret.txt")); err != nil {
		t.Errorf("session a's file after b removed its link: %v", err)
	}
	files, err := m.Files(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "out" || files[0].Size != 4 {
		t.Errorf("Files(b) = %+v; want only out, the file that replaced a link (links are neither files nor folders)", files)
	}
	if b, err := m.ReadFile(ctx, a, "secret.txt", 100); err != nil || string(b) != "alice-secret-7f3\n" {
		t.Errorf("session a's own file: %q, %v", b, err)
	}
	if _, err := m.ReadFile(ctx, "s../../x", "secret.txt", 100); errcode.Code(err) != errcode.BadArgs {
		t.Errorf("a session id that is a path: %v; want bad_args", err)
	}
}

// TestCodeCantCrippleTheAgent: the code can't lower the agent's (PID 1's) limits, priority or
// CPUs either (prlimit64, setpriority by process, group or user, sched_setaffinity,
// sched_setscheduler, sched_setparam): each is refused with EPERM, while the same calls on the
// code's own process still work; and the session's next run is served by the same sandbox.
func TestCodeCantCrippleTheAgent(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("cripple")
	runOK(t, m, id, "bash", "true")
	_, out, errOut := runOK(t, m, id, "python", `
import errno, os, resource
def attempt(name, f):
    try:
        f()
        print(name, "done")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
attempt("prlimit64", lambda: resource.prlimit(1, resource.RLIMIT_CORE, (0, hard)))
attempt("setpriority-process", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
attempt("setpriority-group", lambda: os.setpriority(os.PRIO_PGRP, 1, 19))
attempt("setpriority-user", lambda: os.setpriority(os.PRIO_USER, os.getuid(), 19))
attempt("sched_setaffinity", lambda: os.sched_setaffinity(1, os.sched_getaffinity(1)))
attempt("sched_setscheduler", lambda: os.sched_setscheduler(1, os.SCHED_OTHER, os.sched_param(0)))
attempt("sched_setparam", lambda: os.sched_setparam(1, os.sched_param(0)))
attempt("own-prlimit64", lambda: resource.prlimit(0, resource.RLIMIT_CORE, (0, hard)))
attempt("own-setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))
attempt("own-sched_setaffinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
`)
	want := "prlimit64 EPERM\nsetpriority-process EPERM\nsetpriority-group EPERM\nsetpriority-user EPERM\n" +
		"sched_setaffinity EPERM\nsched_setscheduler EPERM\nsched_setparam EPERM\n" +
		"own-prlimit64 done\nown-setpriority done\nown-sched_setaffinity done\n"
	if out != want {
		t.Errorf("calls aimed at the agent and at the code itself:\n%s%s\nwant:\n%s", out, errOut, want)
	}
	res, out, _ := runOK(t, m, id, "bash", "echo still")
	if res.Cold || out != "still\n" {
		t.Errorf("the next run: %+v, %q; want the same sandbox", res, out)
	}
}

// TestCodeCantTouchTheAgent: the sandbox's agent (PID 1, which starts the runs and carries their
// output) is out of the code's reach: it can't be signalled, its memory, environment and open
// files can't be read, and the session's next run is served by the same sandbox. (kill -9 -1
// kills the run's shepherd, which the code may: TestKilledShepherdStillEndsTheRun.)
func TestCodeCantTouchTheAgent(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("agent")
	runOK(t, m, id, "bash", "true")
	_, out, _ := runOK(t, m, id, "bash", `
kill -STOP 1 && echo stopped-1
kill -9 1 && echo killed-1
kill -9 -1 2>/dev/null
cat /proc/1/environ >/dev/null 2>&1 && echo read-environ
readlink /proc/1/fd/3 >/dev/null 2>&1 && echo read-fd-link
cat /proc/1/fd/3 >/dev/null 2>&1 && echo opened-socket
python3 -c 'open("/proc/1/mem","rb")' 2>/dev/null && echo opened-mem
echo done`)
	if out != "done\n" {
		t.Errorf("the code reached the agent:\n%s", out)
	}
	res, out, _ := runOK(t, m, id, "bash", "echo still")
	if res.Cold || out != "still\n" {
		t.Errorf("the next run: %+v, %q; want the same sandbox", res, out)
	}
}
