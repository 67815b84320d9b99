package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The booted-container test of the unit and the Debian package. It boots a minimal Debian with
// systemd (build/systemd-tree: `make systemd-tree`) in systemd-nspawn, installs the .deb of
// `make deb` with dpkg, and drives the real systemd through operatorFlow (operator_test.go): start,
// reload, a refused reload, every limit of a python tool, the network, the watchdog, a crash,
// stop. The toolhost in it runs python tools in gVisor, with the rootfs and the session rootfs
// the tests use bound in read-only (the container has no network to build them).
//
// Two changes to the container are not the product's: systemd-nspawn mounts the cgroup v1
// controllers read-only in a container (on this machine's hybrid hierarchy it delegates none),
// and runsc must make a cgroup per sandbox, so the test remounts them writable, as they are on
// a machine that runs toolhost itself; and nspawn gives a container no loop devices, which the
// disk images of conversation sandboxes need, so the test binds this machine's in.

// TestTheDebianPackageUnderABootedSystemd: see the file's comment. The commands and what they
// printed are written to artifacts/systemd-transcript.txt.
func TestTheDebianPackageUnderABootedSystemd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test boots a container and needs root")
	}
	debs, _ := filepath.Glob("../build/toolhost_*_amd64.deb")
	if len(debs) != 1 {
		t.Fatalf("want exactly one build/toolhost_*_amd64.deb, found %v: run `make deb` (make test does)", debs)
	}
	deb, _ := filepath.Abs(debs[0])
	tree, _ := filepath.Abs("../build/systemd-tree")
	rootfs, _ := filepath.Abs("../build/rootfs")
	sessionRootfs, _ := filepath.Abs("../build/rootfs-sessions")
	for _, p := range []string{filepath.Join(tree, "lib/systemd/systemd"), filepath.Join(rootfs, "usr/bin/python3"),
		filepath.Join(sessionRootfs, "usr/bin/python3")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run `make systemd-tree sandbox` (make test does)", p)
		}
	}
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		t.Fatal("systemd-nspawn is missing: apt-get install systemd-container (make systemd-tree does)")
	}

	c := bootContainer(t, tree, deb, rootfs, sessionRootfs)
	// The container shares this machine's cgroup v1 hierarchy (see the file's comment), so its
	// sandboxes get a prefix of their own: the sweep of leftovers at start must not meet the
	// sandboxes of tests running beside this one, nor theirs meet these.
	prefix := fmt.Sprintf("thunit%d-", os.Getpid()%100000)
	operatorFlow(t, c, "/mnt/deb/"+filepath.Base(deb), prefix)
}

var _ machine = (*container)(nil)

// container is a booted systemd-nspawn container.
type container struct {
	t      *testing.T
	root   string
	leader int // the container's init, as this machine sees it
	mu     sync.Mutex
	log    strings.Builder
}

// bootContainer copies tree, boots it with the .deb's folder at /mnt/deb and rootfs and
// sessionRootfs at the installed rootfs paths, waits for its systemd to finish booting, and
// powers it off at cleanup.
func bootContainer(t *testing.T, tree, deb, rootfs, sessionRootfs string) *container {
	c := &container{t: t, root: filepath.Join(t.TempDir(), "root")}
	start := time.Now()
	if out, err := exec.Command("cp", "-a", tree, c.root).CombinedOutput(); err != nil {
		t.Fatalf("copying the tree: %v\n%s", err, out)
	}
	c.note(fmt.Sprintf("copied %s (%.1f s)", tree, time.Since(start).Seconds()), "", nil)
	// No "toolhost" in the name: the checks after stop look for it in mounts, and nspawn's own
	// are named after the machine.
	name := fmt.Sprintf("th-unit-test-%d", os.Getpid())
	console, err := os.Create(filepath.Join(t.TempDir(), "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--boot", "--quiet", "--register=no", "--keep-unit", "--private-network",
		"--machine=" + name, "-D", c.root, "--bind-ro=" + filepath.Dir(deb) + ":/mnt/deb", "--bind-ro=" + rootfs + ":/var/lib/toolhost/rootfs",
		"--bind-ro=" + sessionRootfs + ":/var/lib/toolhost/rootfs-sessions"}
	// The loop devices, for the disk images of conversation sandboxes: nspawn gives a container
	// none, a machine has them.
	loops, _ := filepath.Glob("/dev/loop*")
	for _, l := range loops {
		args = append(args, "--bind="+l)
	}
	nspawn := exec.Command("systemd-nspawn", args...)
	nspawn.Stdout, nspawn.Stderr = console, console
	nspawn.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start = time.Now()
	if err := nspawn.Start(); err != nil {
		t.Fatalf("starting systemd-nspawn: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = nspawn.Wait(); close(exited) }()
	t.Cleanup(func() {
		if c.leader > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, _ = c.command(ctx, "systemctl", "poweroff")()
			cancel()
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			if c.leader > 0 {
				_ = syscall.Kill(c.leader, syscall.SIGKILL)
			}
			_ = syscall.Kill(-nspawn.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		console.Close()
		// nspawn can't remove the folder of its mount propagation itself when it is on another
		// file system than /run's ("we can't allow that"); it is empty by now.
		_ = os.Remove("/run/systemd/nspawn/propagate/" + name)
		if t.Failed() {
			b, _ := os.ReadFile(console.Name())
			t.Logf("the container's console:\n%s", tail(string(b), 60))
		}
		_ = os.MkdirAll("artifacts", 0o755)
		c.mu.Lock()
		_ = os.WriteFile("artifacts/systemd-transcript.txt", []byte(c.log.String()), 0o644)
		c.mu.Unlock()
	})
	deadline := time.Now().Add(60 * time.Second)
	for c.leader == 0 {
		if time.Now().After(deadline) {
			t.Fatal("systemd-nspawn started no container within 60 s")
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(console.Name())
			t.Fatalf("systemd-nspawn ended:\n%s", b)
		case <-time.After(100 * time.Millisecond):
		}
		c.leader = childNamed(nspawn.Process.Pid, "systemd")
	}
	// Until systemd's own socket is there, systemctl can't ask it anything.
	var state string
	for deadline = time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		out, _ := c.command(ctx, "systemctl", "is-system-running", "--wait")()
		cancel()
		if state = strings.TrimSpace(out); state == "running" || state == "degraded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container's systemd did not finish booting within 90 s: %q", state)
		}
	}
	c.note(fmt.Sprintf("booted %s with systemd-nspawn --boot (%.1f s)", name, time.Since(start).Seconds()), state, nil)
	// See the file's comment: the cgroup controllers, writable as on a machine of its own.
	c.must("sh", "-c", `for m in /sys/fs/cgroup/*; do mount -o remount,bind,rw "$m"; done`)
	return c
}

// childNamed is the pid of a child of parent whose command is name, or 0.
func childNamed(parent int, name string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 || s[open+1:close] != name {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	return 0
}

func (c *container) name() string { return "the container" }

func (c *container) slowdown() float64 { return 1 }

// cgroupV2: the container has this machine's hybrid cgroup v1 hierarchy.
func (c *container) cgroupV2() bool { return false }

// command runs a command in every namespace of the container, with a clean environment.
func (c *container) command(ctx context.Context, args ...string) func() (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(c.leader), "-a", "--"}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "LANG=C.UTF-8"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Killing nsenter when ctx ends leaves the command it forked in the container, which may
	// keep the pipe open: wait for that no longer than this.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return func() (string, error) { return "", err }
	}
	return sync.OnceValues(func() (string, error) {
		err := cmd.Wait()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			err = &exitError{status: ee.ExitCode()}
		}
		return out.String(), err
	})
}

// run runs a command in the container and writes it and what it printed to the transcript.
func (c *container) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	start := time.Now()
	out, err := c.command(ctx, args...)()
	c.note(fmt.Sprintf("%s (%.2f s)", strings.Join(args, " "), time.Since(start).Seconds()), out, err)
	return out, err
}

// quiet runs a command in the container, for a check, and keeps it out of the transcript.
func (c *container) quiet(args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := c.command(ctx, args...)()
	return out
}

func (c *container) must(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("in the container, %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *container) note(what, out string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(&c.log, "# %s\n", what)
	if out = strings.TrimRight(out, "\n"); out != "" {
		fmt.Fprintln(&c.log, out)
	}
	if err != nil {
		fmt.Fprintf(&c.log, "(%v)\n", err)
	}
}

// write writes the container's file p from this machine, through its root folder: a link on the
// way that leaves the container's tree is an error, not followed here.
func (c *container) write(p, content string) {
	c.t.Helper()
	rel := c.rel(p)
	root, err := os.OpenRoot(c.root)
	if err != nil {
		c.t.Fatal(err)
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		c.t.Fatalf("writing %s in the container: %v", p, err)
	}
	if err := root.WriteFile(rel, []byte(content), 0o644); err != nil {
		c.t.Fatalf("writing %s in the container: %v", p, err)
	}
	c.note("wrote "+p, "", nil)
}

// read reads p with cat in the container, so that its own /proc and /sys are the ones read.
func (c *container) read(p string) (string, error) {
	c.rel(p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.command(ctx, "cat", "--", p)()
	if err != nil {
		return "", fmt.Errorf("reading %s in the container: %v: %s", p, err, strings.TrimSpace(out))
	}
	return out, nil
}

// rel is the absolute path p in the container, relative to its root.
func (c *container) rel(p string) string {
	c.t.Helper()
	if !filepath.IsAbs(p) {
		c.t.Fatalf("%q is not an absolute path in the container", p)
	}
	return strings.TrimPrefix(filepath.Clean(p), "/")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
