package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/integration/vm/agentwire"
)

// The VM tests: stock Debian 12 (bookworm) and 13 (trixie), each with its own kernel, systemd
// and cgroup v2 only, booted in QEMU (build/vm/<suite>: `make vm-images`, integration/vm/build.sh).
// The test drives each as its operator would, as root, through an agent in the VM
// (integration/vm/agent, started by the image's test-agent.service) that runs commands sent over
// a virtio serial port. The agent, the .deb of `make deb` and a test's own files come on a second,
// read-only disk the test makes at each boot (/mnt/share in the VM); the image itself is never
// written (-snapshot).
//
// QEMU runs with TCG: -accel kvm hangs on this machine (see /work/shared/notes). Everything in the
// VM is about ten times slower than here.

const (
	// vmBootWait bounds the boot, from QEMU's start to the agent's hello.
	vmBootWait = 4 * time.Minute
	// vmSystemWait bounds the wait for systemd to finish booting after the agent is up.
	vmSystemWait = 5 * time.Minute
	// vmCmdTimeout bounds a command of run and must in a VM: TCG is about ten times slower than
	// this machine.
	vmCmdTimeout = 10 * time.Minute
	// vmQuietTimeout bounds a command of quiet, read and write.
	vmQuietTimeout = 5 * time.Minute
	// vmPoweroffWait bounds the wait for QEMU to end after systemctl poweroff.
	vmPoweroffWait = 60 * time.Second
)

// vmSuites is what each VM's distribution ships.
var vmSuites = map[string]struct {
	kernel  string // the prefix of uname -r
	systemd string // systemctl --version's
}{
	"bookworm": {kernel: "6.1.", systemd: "252"},
	"trixie":   {kernel: "6.12.", systemd: "257"},
}

// vmSteps run in each VM, in order, in the one boot: subtests of TestVMs/<suite>.
var vmSteps = []struct {
	name string
	run  func(t *testing.T, v *vm)
}{
	{"basics", vmBasics},
	{"packages", vmPackagesStep},
	{"operator", func(t *testing.T, v *vm) { operatorFlow(t, v, v.deb, "thop-") }},
}

// TestVMs boots the bookworm and the trixie VM side by side (one host core each) and runs
// vmSteps in each. The commands and what they printed are written to
// artifacts/vm-<suite>-transcript.txt, the consoles to artifacts/vm-<suite>-console.log.
func TestVMs(t *testing.T) {
	for _, suite := range []string{"bookworm", "trixie"} {
		t.Run(suite, func(t *testing.T) {
			t.Parallel()
			v := bootVM(t, suite, vmOptions{files: vmPackageFiles(t, suite)})
			for _, step := range vmSteps {
				t.Run(step.name, func(st *testing.T) {
					// The vm's own must and write fail the step that calls them.
					v.t = st
					defer func() { v.t = t }()
					step.run(st, v)
				})
			}
		})
	}
}

// vmBasics: the VM is the stock distribution it says it is, with cgroup v2 only, and the
// package's runsc runs a sandbox in it.
func vmBasics(t *testing.T, v *vm) {
	want := vmSuites[v.suite]
	if !v.cgroupV2() {
		t.Errorf("in %s, /sys/fs/cgroup is %q, want cgroup2fs", v.name(), strings.TrimSpace(v.quiet("stat", "-fc", "%T", "/sys/fs/cgroup")))
	}
	if controllers, err := v.read("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		t.Error(err)
	} else {
		have := strings.Fields(controllers)
		for _, c := range []string{"memory", "pids", "cpu"} {
			if !slices.Contains(have, c) {
				t.Errorf("in %s, the root cgroup's controllers are %q: %s is missing", v.name(), strings.TrimSpace(controllers), c)
			}
		}
	}
	// The harness itself: a file written is read back, an exit status arrives as an *exitError,
	// and a cancelled command ends, killed, at once.
	v.write("/tmp/harness/check.txt", "line one\nline two\n")
	if got, err := v.read("/tmp/harness/check.txt"); err != nil || got != "line one\nline two\n" {
		t.Errorf("in %s, a file written reads back as %q (%v)", v.name(), got, err)
	}
	var ee *exitError
	if out, err := v.run("sh", "-c", "echo out; echo err >&2; exit 3"); !errors.As(err, &ee) || ee.status != 3 || out != "out\nerr\n" {
		t.Errorf("in %s, sh -c 'exit 3' ended with %v, printing %q: want exit status 3 and both lines", v.name(), err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	start := time.Now()
	_, err := v.command(ctx, "sh", "-c", "sleep 600 & sleep 600; wait")()
	cancel()
	if took := time.Since(start); !errors.As(err, &ee) || ee.status != -1 || took > time.Minute {
		t.Errorf("in %s, a command cancelled after 3 s ended after %s with %v: want it killed", v.name(), took.Round(time.Second), err)
	}
	if out := v.quiet("pgrep", "-x", "sleep"); strings.TrimSpace(out) != "" {
		t.Errorf("in %s, the cancelled command's process group is left: sleep %s", v.name(), out)
	}

	if kernel := strings.TrimSpace(v.must("uname", "-r")); !strings.HasPrefix(kernel, want.kernel) {
		t.Errorf("in %s, uname -r is %q, want the distribution's kernel %s*", v.name(), kernel, want.kernel)
	}
	if f := strings.Fields(v.must("systemctl", "--version")); len(f) < 2 || f[0] != "systemd" || f[1] != want.systemd {
		t.Errorf("in %s, systemctl --version says %q, want systemd %s", v.name(), strings.Join(f, " "), want.systemd)
	}

	v.must("dpkg", "-i", v.deb)
	if out := v.must("/usr/lib/toolhost/runsc", "--version"); !strings.Contains(out, "runsc version") {
		t.Errorf("in %s, the package's runsc --version says: %s", v.name(), out)
	}
	// A gVisor smoke test: the package's runsc runs a sandbox on this kernel.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"/usr/lib/toolhost/runsc", "--platform=systrap", "--network=none", "do", "/bin/true"}
	start = time.Now()
	out, err := v.command(ctx, args...)()
	took := time.Since(start)
	v.note(fmt.Sprintf("%s (%.2f s)", strings.Join(args, " "), took.Seconds()), out, err)
	if err != nil {
		t.Errorf("in %s, runsc do /bin/true: %v\n%s", v.name(), err, out)
	} else {
		t.Logf("in %s, runsc --platform=systrap do /bin/true took %.1f s", v.name(), took.Seconds())
	}
	// The next steps start from a machine without the package (its config stays, as after
	// apt remove; purge would remove the rootfs in /var/lib/toolhost too).
	v.must("dpkg", "-r", "toolhost")
}

// vmOptions are what a test adds to a VM.
type vmOptions struct {
	// files are put on the share disk besides the agent and the .deb: the name in /mnt/share
	// (folders allowed) → the file on this machine.
	files map[string]string
}

var _ machine = (*vm)(nil)

// vm is a booted QEMU VM, driven through its agent. It is a machine.
type vm struct {
	t     *testing.T
	suite string
	// deb is the .deb of `make deb` in the VM: /mnt/share/toolhost_<version>_amd64.deb.
	deb string

	conn net.Conn
	wmu  sync.Mutex // one request at a time on conn

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan agentwire.Answer
	gone    chan struct{} // closed when the agent's connection ends
	goneErr error

	ready chan struct{} // closed at the agent's hello

	logMu sync.Mutex
	log   strings.Builder

	v2Once sync.Once
	v2     bool
}

// bootVM boots the VM build/vm/<suite> with a share disk holding the agent, the .deb of
// `make deb` and opts.files, waits for its agent and its systemd, and powers it off at cleanup.
func bootVM(t *testing.T, suite string, opts vmOptions) *vm {
	t.Helper()
	if _, ok := vmSuites[suite]; !ok {
		t.Fatalf("there is no VM %q: the VMs are bookworm and trixie", suite)
	}
	images, _ := filepath.Abs(filepath.Join("..", "build", "vm", suite))
	for _, f := range []string{"disk.img", "vmlinuz", "initrd.img", "stamp"} {
		if _, err := os.Stat(filepath.Join(images, f)); err != nil {
			t.Fatalf("the %s VM's %s is missing (%v): run make vm-images (make test does)", suite, f, err)
		}
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("qemu-system-x86_64 is missing: run make vm-images (make test does)")
	}
	debs, _ := filepath.Glob("../build/toolhost_*_amd64.deb")
	if len(debs) != 1 {
		t.Fatalf("want exactly one build/toolhost_*_amd64.deb, found %v: run `make deb` (make test does)", debs)
	}
	v := &vm{t: t, suite: suite, deb: "/mnt/share/" + filepath.Base(debs[0]),
		pending: map[int64]chan agentwire.Answer{}, gone: make(chan struct{}), ready: make(chan struct{})}

	// The share disk: the agent, the .deb and the test's files, in a read-only ext4 image.
	work := t.TempDir()
	share := filepath.Join(work, "share")
	if err := os.Mkdir(share, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(share, "agent"), "./vm/agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the VM agent (integration/vm/agent): %v\n%s", err, out)
	}
	files := map[string]string{filepath.Base(debs[0]): debs[0]}
	for name, src := range opts.files {
		if !filepath.IsLocal(name) || name == "agent" || files[name] != "" {
			t.Fatalf("bootVM: %q can't be a file of the share disk (a relative path, not agent or the .deb)", name)
		}
		files[name] = src
	}
	for name, src := range files {
		if err := linkOrCopy(src, filepath.Join(share, name)); err != nil {
			t.Fatalf("putting %s on the share disk: %v", src, err)
		}
	}
	shareImg := filepath.Join(work, "share.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-d", share, shareImg, fmt.Sprintf("%dM", shareSizeMB(share))).CombinedOutput(); err != nil {
		t.Fatalf("making the share disk: mkfs.ext4: %v\n%s", err, out)
	}
	v.note(fmt.Sprintf("made the share disk with the agent and %d files (%.1f s)", len(files), time.Since(start).Seconds()), "", nil)

	// QEMU. One vCPU: with two under multi-threaded TCG the guest kernel now and then panicked
	// with "Oops: int3" (a static-key patch met on the other vCPU), and round-robin TCG with two
	// vCPUs is as slow as one. The image is never written (-snapshot); the console goes to the
	// artifacts as it is printed.
	if err := os.MkdirAll("artifacts", 0o755); err != nil {
		t.Fatal(err)
	}
	console, _ := filepath.Abs(filepath.Join("artifacts", "vm-"+suite+"-console.log"))
	_ = os.Remove(console)
	// A short folder for the socket: a unix socket's path has at most 107 bytes.
	sockDir, err := os.MkdirTemp("", "vm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	qemu := exec.Command("qemu-system-x86_64",
		"-accel", "tcg", "-smp", "1", "-m", "3072",
		"-nodefaults", "-display", "none", "-no-reboot", "-snapshot", "-nic", "none",
		"-kernel", filepath.Join(images, "vmlinuz"), "-initrd", filepath.Join(images, "initrd.img"),
		"-append", "console=ttyS0 root=/dev/vda rw panic=-1 quiet",
		"-drive", "file="+filepath.Join(images, "disk.img")+",if=virtio,format=raw",
		"-drive", "file="+shareImg+",if=virtio,format=raw,readonly=on",
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=agent,path="+sock+",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name="+agentwire.PortName,
		"-serial", "file:"+console)
	var qemuOut lockedBuilder
	qemu.Stdout, qemu.Stderr = &qemuOut, &qemuOut
	qemu.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	v.note(strings.Join(qemu.Args, " "), "", nil)
	booted := time.Now()
	if err := qemu.Start(); err != nil {
		t.Fatalf("starting QEMU: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = qemu.Wait(); close(exited) }()
	consoleTail := func(n int) string {
		b, _ := os.ReadFile(console)
		return tail(string(b), n)
	}
	t.Cleanup(func() {
		v.poweroff(exited)
		select {
		case <-exited:
		case <-time.After(vmPoweroffWait):
			v.note(fmt.Sprintf("QEMU did not end within %s of systemctl poweroff: killed", vmPoweroffWait), "", nil)
			_ = syscall.Kill(-qemu.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if v.conn != nil {
			v.conn.Close()
		}
		v.note("QEMU ended: "+qemu.ProcessState.String(), qemuOut.String(), nil)
		if t.Failed() {
			t.Logf("the %s VM's console (all of it in %s):\n%s", suite, console, consoleTail(60))
		}
		v.logMu.Lock()
		defer v.logMu.Unlock()
		_ = os.WriteFile(filepath.Join("artifacts", "vm-"+suite+"-transcript.txt"), []byte(v.log.String()), 0o644)
	})

	// The agent's end of the port: QEMU makes the socket at once; the agent says hello once it
	// runs and this end is connected.
	deadline := booted.Add(vmBootWait)
	for v.conn == nil {
		c, err := net.Dial("unix", sock)
		if err == nil {
			v.conn = c
			break
		}
		select {
		case <-exited:
			t.Fatalf("QEMU ended at once (%s):\n%s", qemu.ProcessState, qemuOut.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU made no agent socket %s within %s: %v\n%s", sock, vmBootWait, err, qemuOut.String())
		}
	}
	go v.readAnswers()
	select {
	case <-v.ready:
	case <-exited:
		t.Fatalf("the %s VM ended before its agent started (%s); %s\nthe console's last 30 lines:\n%s", suite, qemu.ProcessState, qemuOut.String(), consoleTail(30))
	case <-v.gone:
		t.Fatalf("the %s VM's agent socket closed before the agent started: %v\nthe console's last 30 lines:\n%s", suite, v.goneErr, consoleTail(30))
	case <-time.After(time.Until(deadline)):
		t.Fatalf("the %s VM's agent did not start within %s of QEMU's start (test-agent.service); the console's last 30 lines:\n%s", suite, vmBootWait, consoleTail(30))
	}
	toReady := time.Since(booted)
	v.note(fmt.Sprintf("booted the %s VM: QEMU start to the agent's hello %.1f s", suite, toReady.Seconds()), "", nil)
	t.Logf("the %s VM: QEMU start to the agent's hello %.1f s", suite, toReady.Seconds())

	// systemd's boot: the agent runs once local file systems are up, before multi-user.target.
	ctx, cancel := context.WithTimeout(context.Background(), vmSystemWait)
	defer cancel()
	out, err := v.command(ctx, "systemctl", "is-system-running", "--wait")()
	state := strings.TrimSpace(out)
	if state != "running" && state != "degraded" {
		t.Fatalf("the %s VM's systemd did not finish booting within %s: %q (%v)\n%s\nthe console's last 30 lines:\n%s", suite, vmSystemWait, state, err,
			v.quiet("systemctl", "list-jobs", "--no-pager"), consoleTail(30))
	}
	var failed string
	if state == "degraded" {
		failed = v.quiet("systemctl", "--failed", "--no-pager")
	}
	v.note(fmt.Sprintf("the %s VM's systemd is %s, %.1f s after QEMU's start", suite, state, time.Since(booted).Seconds()), failed, nil)
	t.Logf("the %s VM: systemd %s %.1f s after QEMU's start", suite, state, time.Since(booted).Seconds())
	return v
}

// readAnswers hands each of the agent's answers to its command, until the connection ends.
func (v *vm) readAnswers() {
	r := bufio.NewReaderSize(v.conn, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var ans agentwire.Answer
			if jerr := json.Unmarshal(line, &ans); jerr != nil {
				v.note(fmt.Sprintf("the agent sent a line that is not an answer: %.300q", line), "", jerr)
			} else if ans.ID == 0 && ans.Output == agentwire.ReadyOutput {
				select {
				case <-v.ready:
				default:
					close(v.ready)
				}
			} else {
				v.mu.Lock()
				ch := v.pending[ans.ID]
				delete(v.pending, ans.ID)
				v.mu.Unlock()
				if ch != nil {
					ch <- ans
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the VM closed the agent's port")
			}
			v.mu.Lock()
			v.goneErr = err
			v.mu.Unlock()
			close(v.gone)
			return
		}
	}
}

// send writes req to the agent.
func (v *vm) send(req agentwire.Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	v.wmu.Lock()
	defer v.wmu.Unlock()
	_ = v.conn.SetWriteDeadline(time.Now().Add(time.Minute))
	_, err = v.conn.Write(append(b, '\n'))
	return err
}

// start sends req (its ID set here) and returns wait: what the command printed and how it ended.
func (v *vm) start(ctx context.Context, req agentwire.Request) func() (string, error) {
	ch := make(chan agentwire.Answer, 1)
	v.mu.Lock()
	v.nextID++
	req.ID = v.nextID
	v.pending[req.ID] = ch
	v.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		// The agent's own bound backs up this end's: it kills the command if the cancel is lost.
		// The bound is this side's ctx, on this machine's clock; the agent's own is a far
		// backstop only. Under TCG the guest's clock can leap: once a guest's 10-minute timer
		// fired 1.5 s into a command (systemctl reload, in a clean-clone run).
		req.TimeoutMS = 3*time.Until(d).Milliseconds() + 10*60*1000
	}
	what := strings.Join(req.Args, " ")
	if err := v.send(req); err != nil {
		v.mu.Lock()
		delete(v.pending, req.ID)
		v.mu.Unlock()
		return func() (string, error) {
			return "", fmt.Errorf("sending %q to the %s VM's agent: %w", what, v.suite, err)
		}
	}
	return sync.OnceValues(func() (string, error) {
		var ans agentwire.Answer
		select {
		case ans = <-ch:
		case <-v.gone:
			return "", fmt.Errorf("running %q in the %s VM: the agent's connection ended: %v", what, v.suite, v.goneErr)
		case <-ctx.Done():
			if err := v.send(agentwire.Request{ID: req.ID, Cancel: true}); err != nil {
				return "", fmt.Errorf("cancelling %q in the %s VM: %w", what, v.suite, err)
			}
			select {
			case ans = <-ch:
			case <-v.gone:
				return "", fmt.Errorf("running %q in the %s VM: the agent's connection ended: %v", what, v.suite, v.goneErr)
			case <-time.After(30 * time.Second):
				return "", fmt.Errorf("%q in the %s VM: cancelled (%w), and the agent did not answer within 30 s", what, v.suite, ctx.Err())
			}
		}
		switch {
		case ans.Error != "" && ans.Exit == -1 && strings.HasPrefix(ans.Error, "starting "):
			// As a shell says of a command it can't run.
			return ans.Output, fmt.Errorf("%w (%s)", &exitError{status: 127}, ans.Error)
		case ans.Error != "":
			return ans.Output, fmt.Errorf("%w (%s)", &exitError{status: -1}, ans.Error)
		case ans.Exit != 0:
			return ans.Output, &exitError{status: ans.Exit}
		}
		return ans.Output, nil
	})
}

func (v *vm) name() string { return "the " + v.suite + " VM" }

// command starts args in the VM as root, in a process group of its own, with the agent's clean
// environment; cancelling ctx kills the group.
func (v *vm) command(ctx context.Context, args ...string) func() (string, error) {
	return v.start(ctx, agentwire.Request{Args: args})
}

// run runs a command in the VM and writes it and what it printed to the transcript.
func (v *vm) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), vmCmdTimeout)
	defer cancel()
	start := time.Now()
	out, err := v.command(ctx, args...)()
	v.note(fmt.Sprintf("%s (%.2f s)", strings.Join(args, " "), time.Since(start).Seconds()), out, err)
	return out, err
}

// quiet runs a command in the VM, for a check, and keeps it out of the transcript.
func (v *vm) quiet(args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), vmQuietTimeout)
	defer cancel()
	out, _ := v.command(ctx, args...)()
	return out
}

func (v *vm) must(args ...string) string {
	v.t.Helper()
	out, err := v.run(args...)
	if err != nil {
		v.t.Fatalf("in %s, %s: %v\n%s", v.name(), strings.Join(args, " "), err, out)
	}
	return out
}

func (v *vm) note(what, out string, err error) {
	v.logMu.Lock()
	defer v.logMu.Unlock()
	fmt.Fprintf(&v.log, "# %s\n", what)
	if out = strings.TrimRight(out, "\n"); out != "" {
		fmt.Fprintln(&v.log, out)
	}
	if err != nil {
		fmt.Fprintf(&v.log, "(%v)\n", err)
	}
}

// write writes p in the VM (its folders made; a new file gets mode 0644, root's umask).
func (v *vm) write(p, content string) {
	v.t.Helper()
	if !filepath.IsAbs(p) {
		v.t.Fatalf("%q is not an absolute path in %s", p, v.name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), vmQuietTimeout)
	defer cancel()
	out, err := v.start(ctx, agentwire.Request{Args: []string{"sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1"`, "sh", p}, Stdin: content})()
	if err != nil {
		v.t.Fatalf("writing %s in %s: %v: %s", p, v.name(), err, strings.TrimSpace(out))
	}
	v.note("wrote "+p, "", nil)
}

// read reads p with cat in the VM.
func (v *vm) read(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute path in %s", p, v.name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), vmQuietTimeout)
	defer cancel()
	out, err := v.command(ctx, "cat", "--", p)()
	if err != nil {
		return "", fmt.Errorf("reading %s in %s: %v: %s", p, v.name(), err, strings.TrimSpace(out))
	}
	return out, nil
}

// slowdown: QEMU's TCG runs the VM about ten times slower than this machine.
func (v *vm) slowdown() float64 { return 10 }

// cgroupV2: a stock Debian 12 or 13 boots with the unified hierarchy only; asked once.
func (v *vm) cgroupV2() bool {
	v.v2Once.Do(func() {
		v.v2 = strings.TrimSpace(v.quiet("stat", "-fc", "%T", "/sys/fs/cgroup")) == "cgroup2fs"
	})
	return v.v2
}

// poweroff asks the VM's systemd to power it off, if its agent is there to ask; QEMU ends then
// (-no-reboot).
func (v *vm) poweroff(exited <-chan struct{}) {
	select {
	case <-exited:
		return
	case <-v.ready:
	default:
		return
	}
	select {
	case <-v.gone:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The agent is stopped on the way down, so the answer may not come.
	wait := v.command(ctx, "systemctl", "poweroff")
	done := make(chan struct{})
	go func() { out, err := wait(); v.note("systemctl poweroff", out, err); close(done) }()
	select {
	case <-done:
	case <-exited:
	case <-ctx.Done():
	}
}

// linkOrCopy puts the file src at dst, a hard link when it can.
func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// shareSizeMB is the size of an ext4 image that holds dir: its files and a margin for the
// file system's own.
func shareSizeMB(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total/(1<<20)*5/4 + 64
}

// lockedBuilder collects what QEMU prints on two pipes.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuilder) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuilder) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
