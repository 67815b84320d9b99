package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The booted-container test of the unit and the Debian package. It boots a minimal Debian with
// systemd (build/systemd-tree: `make systemd-tree`) in systemd-nspawn, installs the .deb of
// `make deb` with dpkg, and drives the real systemd: start, reload, a refused reload, the
// watchdog, a crash, stop. The toolhost in it runs python tools in gVisor, with the rootfs the
// tests use bound in read-only (the container has no network to build one).
//
// One change to the container is not the product's: systemd-nspawn mounts the cgroup v1
// controllers read-only in a container (on this machine's hybrid hierarchy it delegates none),
// and runsc must make a cgroup per sandbox, so the test remounts them writable, as they are on
// a machine that runs toolhost itself.

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
	for _, p := range []string{filepath.Join(tree, "lib/systemd/systemd"), filepath.Join(rootfs, "usr/bin/python3")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run `make systemd-tree sandbox` (make test does)", p)
		}
	}
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		t.Fatal("systemd-nspawn is missing: apt-get install systemd-container (make systemd-tree does)")
	}

	c := bootContainer(t, tree, deb, rootfs)

	// Install: dpkg creates the paths and the conffile, enables and starts nothing.
	c.must("dpkg", "-i", "/mnt/deb/"+filepath.Base(deb))
	if out, _ := c.run("systemctl", "is-enabled", "toolhost"); strings.TrimSpace(out) != "disabled" {
		t.Errorf("after dpkg -i the unit is %q, want disabled: the package enables nothing by itself", out)
	}
	if out, _ := c.run("systemctl", "is-active", "toolhost"); strings.TrimSpace(out) != "inactive" {
		t.Errorf("after dpkg -i the unit is %q, want inactive", out)
	}
	if out := c.must("dpkg-query", "-W", "-f=${Conffiles}", "toolhost"); !strings.Contains(out, "/etc/toolhost/toolhost.toml") {
		t.Errorf("the config is not a conffile: %q", out)
	}
	for _, p := range []string{"usr/bin/toolhost", "usr/lib/toolhost/plugins", "usr/lib/toolhost/pins.toml", "usr/lib/toolhost/runsc",
		"usr/lib/toolhost/plugins/toolhost-plugin-python", "usr/lib/toolhost/plugins/toolhost-plugin-http", "etc/toolhost/tools"} {
		fi, err := os.Stat(filepath.Join(c.root, p))
		if err != nil {
			t.Errorf("the package did not make /%s: %v", p, err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("/%s is owned by %d with mode %s: want root's, writable by nobody else", p, st.Uid, fi.Mode().Perm())
		}
	}
	// The installed rootfs builder, through `toolhost rootfs`: the bound rootfs is the one the
	// installed config asks for, so it is up to date.
	if out := c.must("toolhost", "rootfs"); !strings.Contains(out, "is up to date") {
		t.Errorf("toolhost rootfs: %s", out)
	}

	// Configure: an http tool against a server in the container, python tools, and a shorter
	// watchdog than the unit's 30 s so the test can see it act.
	// The container shares this machine's cgroup v1 hierarchy (see the file's comment), so its
	// sandboxes get a prefix of their own: the sweep of leftovers at start must not meet the
	// sandboxes of tests running beside this one, nor theirs meet these.
	prefix := fmt.Sprintf("thunit%d-", os.Getpid()%100000)
	c.edit("etc/toolhost/toolhost.toml", func(s string) string {
		s = strings.Replace(s, "allow_private = false", "allow_private = true", 1)
		s = strings.Replace(s, "[sessions]\n# enabled: serve the session tools and the /api/v1/sessions endpoints. Read at\n# start only. Default: false.\nenabled = false",
			"[sessions]\nenabled = true", 1)
		return strings.Replace(s, `sandbox_prefix = "toolhost-"`, fmt.Sprintf("sandbox_prefix = %q", prefix), 1)
	})
	c.write("srv/hello.json", `{"greeting": "hello from the container"}`)
	c.must("systemd-run", "--unit=fixture-web", "--property=WorkingDirectory=/srv", "python3", "-m", "http.server", "9999", "--bind", "127.0.0.1")
	c.write("etc/toolhost/tools/hello.toml", httpTool("hello"))
	c.write("etc/toolhost/tools/word_count.toml", pythonTool("word_count", "print('counting')\n    return {'words': len(text.split())}", false))
	c.write("etc/toolhost/tools/slow_net.toml", pythonTool("slow_net", "print('waiting', flush=True)\n    import time; time.sleep(55)", true))
	c.write("etc/systemd/system/toolhost.service.d/test-watchdog.conf", "[Service]\nWatchdogSec=5\n")
	c.must("systemctl", "daemon-reload")

	// Start returns only once the host serves (Type=notify): the first request after it, with
	// no retry, must be answered.
	c.must("systemctl", "start", "toolhost")
	if out := c.must("toolhost", "tools"); !strings.Contains(out, "hello") || !strings.Contains(out, "word_count") {
		t.Fatalf("right after systemctl start, the host does not list the tools:\n%s", out)
	}
	if out := c.must("toolhost", "call", "word_count", "text=one two three"); !strings.Contains(out, `"words": 3`) && !strings.Contains(out, `"words":3`) {
		t.Errorf("the python tool in gVisor in the container: %s", out)
	}
	if out := c.must("toolhost", "call", "hello", "name=hello"); !strings.Contains(out, "hello from the container") {
		t.Errorf("the http tool: %s", out)
	}

	// check and doctor beside the live host: they say the installed machine is fine and leave
	// the host serving.
	if out := c.must("toolhost", "check"); !strings.Contains(out, "/etc/toolhost/toolhost.toml: ok") {
		t.Errorf("toolhost check of the installed config: %s", out)
	}
	if out := c.must("toolhost", "doctor"); !strings.Contains(out, "this machine can run python tools") {
		t.Errorf("toolhost doctor in the container: %s", out)
	}
	if out := c.must("toolhost", "call", "word_count", "text=still here"); !strings.Contains(out, `"words": 2`) {
		t.Errorf("after check and doctor beside it, the host: %s", out)
	}

	// Reload applies a changed tool, and returns once it is served.
	c.write("etc/toolhost/tools/hello_again.toml", httpTool("hello_again"))
	c.must("systemctl", "reload", "toolhost")
	if out := c.must("toolhost", "tools"); !strings.Contains(out, "hello_again") {
		t.Errorf("right after systemctl reload, the new tool is not listed:\n%s", out)
	}

	// Broken configs: a TOML mistake (seen before the host is asked) and a value only the http
	// kind refuses (seen by the host). Each time reload fails, the host serves on with the
	// config before, and the journal says where the problem is.
	good, _ := os.ReadFile(filepath.Join(c.root, "etc/toolhost/toolhost.toml"))
	for _, broken := range []struct{ name, config, where string }{
		{"a TOML mistake", string(good) + "\nlisten = \n", "/etc/toolhost/toolhost.toml:"},
		{"a value the http kind refuses", strings.Replace(string(good), "timeout_seconds = 30", "timeout_seconds = 0", 1), "http.timeout_seconds"},
	} {
		c.write("etc/toolhost/toolhost.toml", broken.config)
		if out, err := c.run("systemctl", "reload", "toolhost"); err == nil {
			t.Errorf("systemctl reload of %s succeeded:\n%s", broken.name, out)
		}
		if out, _ := c.run("systemctl", "is-active", "toolhost"); strings.TrimSpace(out) != "active" {
			t.Errorf("after a refused reload of %s the unit is %q, want active", broken.name, out)
		}
		if out := c.must("toolhost", "call", "hello_again", "name=hello"); !strings.Contains(out, "hello from the container") {
			t.Errorf("after a refused reload of %s the host does not serve: %s", broken.name, out)
		}
		if out := c.quiet("journalctl", "-u", "toolhost", "--no-pager", "-o", "cat"); !strings.Contains(out, broken.where) {
			t.Errorf("the journal does not say where %s is (%q):\n%s", broken.name, broken.where, tail(out, 20))
		}
	}
	c.write("etc/toolhost/toolhost.toml", string(good))
	c.must("systemctl", "reload", "toolhost")

	// A conversation's files outlive a restart of the service (its runtime folder is emptied).
	if out := c.runPython("conv-1", "open('/work/kept.txt', 'w').write('written before the restart')"); !strings.Contains(strings.ReplaceAll(out, " ", ""), `"exit_code":0`) {
		t.Fatalf("run_python in a session: %s", out)
	}
	c.must("systemctl", "restart", "toolhost")
	if out := c.runPython("conv-1", "print(open('/work/kept.txt').read())"); !strings.Contains(out, "written before the restart") {
		t.Errorf("after systemctl restart, the session's file is gone: %s", out)
	}
	firstPID := c.mainPID()

	// The watchdog: a host that serves keeps feeding it (no restart over several periods) ...
	time.Sleep(12 * time.Second)
	if pid := c.mainPID(); pid != firstPID || c.restarts() != 0 {
		t.Fatalf("a serving host was restarted (pid %d -> %d, %d restarts): the watchdog is not fed", firstPID, pid, c.restarts())
	}
	// ... and one that stops answering is killed and started again.
	if err := syscall.Kill(c.hostPID(firstPID), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	secondPID := c.waitNewMain(firstPID, 60*time.Second)
	if out := c.must("journalctl", "-u", "toolhost", "--no-pager"); !strings.Contains(strings.ToLower(out), "watchdog timeout") {
		t.Errorf("the journal does not say the watchdog stopped the host:\n%s", tail(out, 20))
	}

	// A crash (kill -9) is restarted, and the new host serves python tools again.
	c.must("systemctl", "kill", "--kill-whom=main", "--signal=SIGKILL", "toolhost")
	c.waitNewMain(secondPID, 60*time.Second)
	if out := c.must("toolhost", "call", "word_count", "text=a b"); !strings.Contains(out, `"words": 2`) && !strings.Contains(out, `"words":2`) {
		t.Errorf("after the crash the python tool: %s", out)
	}
	if n := c.restarts(); n < 2 {
		t.Errorf("NRestarts = %d after a watchdog kill and a crash, want 2", n)
	}

	// The logs are JSON in the journal.
	jsonLines := 0
	for _, line := range strings.Split(c.must("journalctl", "-u", "toolhost", "--no-pager", "-o", "cat"), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["@message"] != nil && m["@level"] != nil {
			jsonLines++
		}
	}
	if jsonLines < 5 {
		t.Errorf("journalctl -u toolhost shows %d JSON log lines, want the host's logs in JSON", jsonLines)
	}

	// Stop, while a python run with a network of its own is going: nothing of toolhost is left:
	// no process, sandbox, network namespace, firewall rule or mount.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := c.command(ctx, "toolhost", "call", "slow_net")
	var callOut bytes.Buffer
	call.Stdout, call.Stderr = &callOut, &callOut
	if err := call.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(c.quiet("ip", "netns", "list"), prefix) {
		if time.Now().After(deadline) {
			t.Fatalf("the networked run made no network namespace; the call said: %s", callOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.must("systemctl", "stop", "toolhost")
	callErr := call.Wait()
	c.note("toolhost call slow_net (stopped by systemctl stop)", callOut.String(), callErr)
	if callErr == nil || !strings.Contains(callOut.String(), "the host is stopping") {
		t.Errorf("the run cut off by stop did not end saying the host stopped: %v: %s", callErr, callOut.String())
	}
	if out := c.quiet("sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"); strings.Contains(out, "toolhost-plugin") ||
		strings.Contains(out, "runsc") || strings.Contains(out, "toolhost serve") {
		t.Errorf("processes are left after stop:\n%s", out)
	}
	if cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/" + prefix + "*"); len(cgroups) > 0 {
		t.Errorf("sandbox cgroups are left after stop: %v", cgroups)
	}
	if out := c.quiet("ip", "netns", "list"); strings.Contains(out, prefix) {
		t.Errorf("network namespaces are left after stop: %s", out)
	}
	if out := c.quiet("iptables-save"); strings.Contains(out, prefix) || strings.Contains(out, "toolhost") {
		t.Errorf("firewall rules are left after stop:\n%s", out)
	}
	for _, line := range strings.Split(c.quiet("cat", "/proc/self/mountinfo"), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == "/var/lib/toolhost/rootfs" || f[4] == "/mnt/deb") {
			continue // the test's own binds
		}
		if strings.Contains(line, "toolhost") || strings.Contains(line, "runsc") {
			t.Errorf("a mount is left after stop: %s", line)
		}
	}
	if out := c.quiet("ip", "link"); strings.Contains(out, "veth") {
		t.Errorf("links are left after stop:\n%s", out)
	}
}

// container is a booted systemd-nspawn container.
type container struct {
	t      *testing.T
	root   string
	leader int // the container's init, as this machine sees it
	log    strings.Builder
}

// bootContainer copies tree, boots it with the .deb's folder at /mnt/deb and rootfs at the
// installed rootfs path, waits for its systemd to finish booting, and powers it off at cleanup.
func bootContainer(t *testing.T, tree, deb, rootfs string) *container {
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
		"--machine=" + name, "-D", c.root, "--bind-ro=" + filepath.Dir(deb) + ":/mnt/deb", "--bind-ro=" + rootfs + ":/var/lib/toolhost/rootfs"}
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
			_, _ = c.command(context.Background(), "systemctl", "poweroff").CombinedOutput()
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
		_ = os.WriteFile("artifacts/systemd-transcript.txt", []byte(c.log.String()), 0o644)
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
		out, _ := c.command(ctx, "systemctl", "is-system-running", "--wait").CombinedOutput()
		cancel()
		if state = strings.TrimSpace(string(out)); state == "running" || state == "degraded" {
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

// command runs a command in every namespace of the container, with a clean environment.
func (c *container) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(c.leader), "-a", "--"}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "LANG=C.UTF-8"}
	return cmd
}

// run runs a command in the container and writes it and what it printed to the transcript.
func (c *container) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := c.command(ctx, args...).CombinedOutput()
	c.note(fmt.Sprintf("%s (%.2f s)", strings.Join(args, " "), time.Since(start).Seconds()), string(out), err)
	return string(out), err
}

// quiet runs a command in the container, for a check, and keeps it out of the transcript.
func (c *container) quiet(args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := c.command(ctx, args...).CombinedOutput()
	return string(out)
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
	fmt.Fprintf(&c.log, "# %s\n", what)
	if out = strings.TrimRight(out, "\n"); out != "" {
		fmt.Fprintln(&c.log, out)
	}
	if err != nil {
		fmt.Fprintf(&c.log, "(%v)\n", err)
	}
}

func (c *container) write(rel, content string) {
	c.t.Helper()
	p := filepath.Join(c.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.note("wrote /"+rel, "", nil)
}

func (c *container) edit(rel string, change func(string) string) {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.root, rel))
	if err != nil {
		c.t.Fatal(err)
	}
	c.write(rel, change(string(b)))
}

func (c *container) show(prop string) string {
	return strings.TrimSpace(c.quiet("systemctl", "show", "-p", prop, "--value", "toolhost"))
}

// mainPID is the host's pid in the container's pid namespace.
func (c *container) mainPID() int {
	pid, _ := strconv.Atoi(c.show("MainPID"))
	return pid
}

func (c *container) restarts() int {
	n, _ := strconv.Atoi(c.show("NRestarts"))
	return n
}

// hostPID is the pid, as this machine sees it, of the container's process pid.
func (c *container) hostPID(pid int) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			// NSpid: <pid here> <pid in the container>
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "NSpid:" && f[2] == strconv.Itoa(pid) {
				leaderNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", c.leader))
				if ns, _ := os.Readlink(filepath.Join(filepath.Dir(d), "ns/pid")); ns == leaderNS {
					n, _ := strconv.Atoi(f[1])
					return n
				}
			}
		}
	}
	c.t.Fatalf("process %d of the container is not found on this machine", pid)
	return 0
}

// waitNewMain waits until systemd runs the host again under a new pid and it serves.
func (c *container) waitNewMain(old int, timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		pid := c.mainPID()
		if pid != 0 && pid != old && c.show("ActiveState") == "active" {
			c.note(fmt.Sprintf("systemd started the host again: pid %d, after %d", pid, old), c.quiet("systemctl", "status", "--no-pager", "-n", "0", "toolhost"), nil)
			c.must("toolhost", "tools")
			return pid
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("systemd did not start the host again within %s: %s\n%s", timeout, c.quiet("systemctl", "status", "--no-pager", "-n", "0", "toolhost"),
				c.quiet("journalctl", "-u", "toolhost", "--no-pager", "-n", "40"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// runPython calls run_python in a session over HTTP from inside the container (there is no curl
// in it, but there is Python), returning the response.
func (c *container) runPython(session, code string) string {
	c.t.Helper()
	const call = `import json, sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:8080/api/v1/tools/run_python/call?session=" + sys.argv[1],
    data=json.dumps({"code": sys.argv[2]}).encode(), headers={"content-type": "application/json"}, method="POST")
try:
    print(urllib.request.urlopen(req, timeout=120).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())`
	out, _ := c.run("python3", "-c", call, session, code)
	return out
}

func httpTool(name string) string {
	return fmt.Sprintf(`name = %q
description = "Fetch a document from the container's own web server."
[[params]]
name = "name"
kind = "text"
required = true
[run]
type = "http"
method = "GET"
url = "http://127.0.0.1:9999/{{name}}.json"
`, name)
}

func pythonTool(name, body string, network bool) string {
	return fmt.Sprintf(`name = %q
description = "A python tool of the container test."
[[params]]
name = "text"
kind = "text"
required = false
[run]
type = "python"
seconds = 60
network = %t
code = '''
def run(text=""):
    %s
'''
`, name, network, body)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
