package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/runsc"
)

// Check is one line of Doctor: what was checked, whether it holds, what was found, and how to
// fix it when it doesn't.
type Check struct {
	Name   string
	OK     bool
	Detail string
	Fix    string
}

// DoctorOptions say what Doctor checks.
type DoctorOptions struct {
	// Runsc, Rootfs, StateDir, Platform and Prefix are the python kind's settings.
	Runsc, Rootfs, StateDir, Platform, Prefix string
	// SessionRootfs, when set, is [python] session_rootfs, the conversation sandboxes' root
	// filesystem: a line of its own ("session rootfs"). The platform is tried on Rootfs.
	SessionRootfs string
	// SkipPlatform leaves out starting a real sandbox (the slowest check).
	SkipPlatform bool
}

// Doctor checks, line by line, that this machine can run sandboxes: root, runsc and its version,
// the rootfs (and the session rootfs when given), the cgroup controllers, network namespaces and
// iptables, and a platform that starts. Every failing line says how to fix it.
func Doctor(ctx context.Context, o DoctorOptions) []Check {
	if o.Platform == "" {
		o.Platform = runsc.PlatformSystrap
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	var out []Check
	root := os.Geteuid() == 0
	out = append(out, lineIf(root, "root", "running as root",
		fmt.Sprintf("running as uid %d", os.Geteuid()),
		"run toolhost as root: gVisor needs it for cgroup limits and network namespaces"))

	runscOK := false
	if fi, err := os.Stat(o.Runsc); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		out = append(out, Check{Name: "runsc", Detail: fmt.Sprintf("no runsc binary at %s", o.Runsc),
			Fix: "set [python] runsc to the runsc binary (the package installs it beside the plugins, in /usr/lib/toolhost/runsc; make runsc builds it in the source tree)"})
	} else if v, err := runsc.BinaryVersion(o.Runsc); err != nil {
		out = append(out, Check{Name: "runsc", Detail: err.Error(),
			Fix: "reinstall toolhost, or run make runsc in the source tree: both bring runsc " + runsc.PinnedVersion()})
	} else if v != runsc.PinnedVersion() {
		out = append(out, Check{Name: "runsc", Detail: fmt.Sprintf("%s is version %s, not the pinned %s", o.Runsc, v, runsc.PinnedVersion()),
			Fix: "point [python] runsc at the runsc toolhost installs (/usr/lib/toolhost/runsc), or run make runsc in the source tree: both are the pinned version"})
	} else {
		runscOK = true
		out = append(out, Check{Name: "runsc", OK: true, Detail: fmt.Sprintf("%s, version %s", o.Runsc, v)})
	}

	rootfsOK := false
	if fi, err := os.Stat(filepath.Join(o.Rootfs, "usr/bin/python3")); err != nil || fi.IsDir() {
		out = append(out, Check{Name: "rootfs", Detail: fmt.Sprintf("no rootfs with /usr/bin/python3 at %s", o.Rootfs),
			Fix: "run toolhost rootfs (make rootfs in the source tree), or set [python] rootfs to a built root filesystem"})
	} else {
		rootfsOK = true
		out = append(out, Check{Name: "rootfs", OK: true, Detail: o.Rootfs})
	}
	if o.SessionRootfs != "" {
		if checkRootfs(o.SessionRootfs) != nil {
			out = append(out, Check{Name: "session rootfs", Detail: fmt.Sprintf("no rootfs with /usr/bin/python3 at %s (the conversation sandboxes' root filesystem)", o.SessionRootfs),
				Fix: "run toolhost rootfs (make rootfs in the source tree), which builds it beside the rootfs, or set [python] session_rootfs to a built root filesystem"})
		} else {
			out = append(out, Check{Name: "session rootfs", OK: true, Detail: o.SessionRootfs})
		}
	}

	cg := cgroupCheck()
	out = append(out, cg)
	net := networkCheck(ctx, root, o.Prefix)
	out = append(out, net...)

	if o.SkipPlatform {
		return out
	}
	if !root || !runscOK || !rootfsOK || !cg.OK {
		out = append(out, Check{Name: "platform", Detail: "not tried: fix the lines above first",
			Fix: "fix the lines above, then run toolhost doctor again"})
		return out
	}
	out = append(out, platformCheck(ctx, o))
	return out
}

func lineIf(ok bool, name, good, bad, fix string) Check {
	if ok {
		return Check{Name: name, OK: true, Detail: good}
	}
	return Check{Name: name, Detail: bad, Fix: fix}
}

// cgroupCheck names the machine's cgroup tree and checks sandboxes can have limits there. On v1
// (and hybrid trees) the memory, pids, cpu and cpuacct hierarchies must be mounted under
// CgroupRoot. On v2 this process must be in a delegated cgroup (the unit's Delegate=, a
// delegated systemd scope, or a container's own root) with the memory, pids and cpu controllers:
// it readies that cgroup as a manager would and makes a probe cgroup below it whose memory.max,
// pids.max and cpu.max must take a limit.
func cgroupCheck() Check {
	const name = "cgroups"
	cg, err := OpenCgroups()
	if err != nil {
		return Check{Name: name, Detail: err.Error(), Fix: cgroupFix()}
	}
	if !cg.V2() {
		return cgroupV1Check(cg)
	}
	if err := cg.Prepare(); err != nil {
		return Check{Name: name, Detail: err.Error(),
			Fix: "give the unit Delegate=memory pids cpu (the shipped toolhost.service has it; systemctl edit toolhost); if /sys/fs/cgroup/cgroup.controllers lacks memory, boot the kernel with cgroup_enable=memory"}
	}
	probe := filepath.Join(cg.dir(""), fmt.Sprintf("doctor-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return Check{Name: name, Detail: fmt.Sprintf("making a probe cgroup below %s: %v", cg.Base(), err), Fix: cgroupFix()}
	}
	defer func() { _ = syscall.Rmdir(probe) }()
	for file, limit := range map[string]string{"memory.max": "67108864", "pids.max": "64", "cpu.max": "100000 100000"} {
		if err := os.WriteFile(filepath.Join(probe, file), []byte(limit), 0o644); err != nil {
			return Check{Name: name, Detail: fmt.Sprintf("a cgroup below %s takes no %s: %v", cg.Base(), file, err),
				Fix: "give the unit Delegate=memory pids cpu (the shipped toolhost.service has it; systemctl edit toolhost)"}
		}
	}
	return Check{Name: name, OK: true, Detail: fmt.Sprintf("cgroup v2: sandboxes go below %s, which hands down memory, pids and cpu; memory.max, pids.max and cpu.max take limits, memory.events, pids.events and cpu.stat say why a sandbox stopped", cg.Base())}
}

// cgroupFix says how to put toolhost in a cgroup of its own on v2.
func cgroupFix() string {
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		return "under systemd run toolhost as its unit (Delegate=memory pids cpu), or from a shell in a delegated scope: systemd-run --scope -p Delegate=yes toolhost …"
	}
	return "without systemd, give toolhost a cgroup of its own: mkdir /sys/fs/cgroup/toolhost && setfattr -n trusted.delegate -v 1 /sys/fs/cgroup/toolhost && echo $$ > /sys/fs/cgroup/toolhost/cgroup.procs, then start toolhost from that shell"
}

// cgroupV1Check wants cgroup v1 memory, pids, cpu and cpuacct hierarchies mounted: toolhost
// reads limit hits from their files.
func cgroupV1Check(cg *Cgroups) Check {
	mounted := map[string]bool{}
	for h := range cg.tree.V1 {
		for _, c := range strings.Split(h, ",") {
			mounted[c] = true
		}
	}
	var missing []string
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
		if !mounted[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return Check{Name: "cgroups", Detail: "no cgroup v1 " + strings.Join(missing, ", ") + " hierarchy mounted under " + CgroupRoot,
			Fix: "mount the cgroup v1 controllers (memory, pids, cpu, cpuacct) under /sys/fs/cgroup/<controller>, or boot with cgroup v2 only (systemd.unified_cgroup_hierarchy=1, the default of current distributions)"}
	}
	return Check{Name: "cgroups", OK: true, Detail: cg.Version().String() + ": memory, pids, cpu and cpuacct; memory.failcnt, memory.oom_control and pids.events say why a sandbox stopped"}
}

// networkCheck makes and removes a network namespace, and lists the filter and nat tables.
func networkCheck(ctx context.Context, root bool, prefix string) []Check {
	var out []Check
	if _, err := exec.LookPath("ip"); err != nil {
		out = append(out, Check{Name: "network namespaces", Detail: "no ip command (iproute2)",
			Fix: "apt-get install iproute2 (make netdeps)"})
	} else if !root {
		out = append(out, Check{Name: "network namespaces", Detail: "not tried without root", Fix: "run as root"})
	} else {
		id, err := NewID(prefix)
		if err == nil {
			err = runCommand(ctx, "ip", "netns", "add", id)
			if err == nil {
				err = runCommand(ctx, "ip", "netns", "del", id)
			}
		}
		if err != nil {
			out = append(out, Check{Name: "network namespaces", Detail: err.Error(),
				Fix: "make sure the kernel has network namespaces and /var/run/netns is writable"})
		} else {
			out = append(out, Check{Name: "network namespaces", OK: true, Detail: "ip netns add and del work"})
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		out = append(out, Check{Name: "iptables", Detail: "no iptables command",
			Fix: "apt-get install iptables (make netdeps)"})
	} else if !root {
		out = append(out, Check{Name: "iptables", Detail: "not tried without root", Fix: "run as root"})
	} else {
		err := runCommand(ctx, "iptables", "-w", "-S")
		if err == nil {
			err = runCommand(ctx, "iptables", "-w", "-t", "nat", "-S")
		}
		if err != nil {
			out = append(out, Check{Name: "iptables", Detail: err.Error(),
				Fix: "install iptables (make netdeps) and load the filter and nat tables (nf_tables or legacy)"})
		} else {
			v, _ := commandOutput(ctx, "iptables", "--version")
			out = append(out, Check{Name: "iptables", OK: true, Detail: strings.TrimSpace(string(v))})
		}
	}
	return out
}

// PlatformProbeTimeout bounds the start of one platform's probe sandbox. A platform may hang
// instead of failing (kvm on some machines: runsc prints nothing for minutes); the probe then
// gives up, removes what it started, and the next platform is tried.
const PlatformProbeTimeout = 15 * time.Second

// PlatformError says why a platform didn't start a probe sandbox.
type PlatformError struct {
	// Platform is the platform tried.
	Platform string
	// Hung is set when the probe gave up after Timeout with the platform neither working nor
	// failing.
	Hung    bool
	Timeout time.Duration
	// Err is what failed.
	Err error
}

func (e *PlatformError) Error() string {
	if e.Hung {
		return fmt.Sprintf("the %s platform did not start a sandbox within %d s (it hangs on this machine)", e.Platform, int(e.Timeout/time.Second))
	}
	return fmt.Sprintf("the %s platform doesn't start a sandbox here: %v", e.Platform, e.Err)
}

func (e *PlatformError) Unwrap() error { return e.Err }

// platformCheck starts a real sandbox on the configured platform; if that fails it tries the
// others and names the one that works.
func platformCheck(ctx context.Context, o DoctorOptions) Check {
	err := tryPlatform(ctx, o, o.Platform)
	if err == nil {
		return Check{Name: "platform", OK: true, Detail: o.Platform + " starts a sandbox"}
	}
	return PlatformAdvice(ctx, o, err)
}

// PlatformAdvice is the platform line of a platform that failed with err (from CheckPlatform):
// it tries the other platforms, each within PlatformProbeTimeout, and names the first that
// starts a sandbox.
func PlatformAdvice(ctx context.Context, o DoctorOptions, err error) Check {
	if o.Platform == "" {
		o.Platform = runsc.PlatformSystrap
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	var pe *PlatformError
	if !errors.As(err, &pe) {
		err = &PlatformError{Platform: o.Platform, Err: err}
	}
	for _, p := range []string{runsc.PlatformSystrap, runsc.PlatformPtrace} {
		if p == o.Platform {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if tryPlatform(ctx, o, p) == nil {
			return Check{Name: "platform", Detail: fmt.Sprintf("%v; the %s platform does", err, p),
				Fix: fmt.Sprintf("set [python] platform = %q", p)}
		}
	}
	return Check{Name: "platform", Detail: fmt.Sprintf("no platform starts a sandbox here: %v", err),
		Fix: "check that the machine allows ptrace and seccomp for root (systrap needs them)"}
}

func tryPlatform(ctx context.Context, o DoctorOptions, platform string) error {
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: o.Runsc, Root: filepath.Join(o.StateDir, "runsc"), Platform: platform})
	if err != nil {
		return err
	}
	m, err := NewManager(ManagerOptions{Runtime: rt, Rootfs: o.Rootfs, StateDir: o.StateDir, Prefix: o.Prefix})
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = m.Close(ctx)
	}()
	return m.CheckPlatform(ctx)
}

// CheckPlatform starts a sandbox with the manager's runtime and has Python in it print a word,
// within PlatformProbeTimeout. The sandbox is destroyed in the background (Close waits for it). A
// failure is a *PlatformError saying why the platform doesn't work (or that it hangs);
// PlatformAdvice tells which one would.
func (m *Manager) CheckPlatform(ctx context.Context) error {
	return m.checkPlatform(ctx, PlatformProbeTimeout)
}

func (m *Manager) checkPlatform(ctx context.Context, within time.Duration) error {
	platform := m.opts.Runtime.Options().Platform
	pctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	fail := func(err error) error {
		if ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
			return &PlatformError{Platform: platform, Hung: true, Timeout: within, Err: err}
		}
		return &PlatformError{Platform: platform, Err: err}
	}
	sb, err := m.Start(pctx, Options{Args: []string{"/usr/bin/python3", "-I", "-S", "-c", "print('ok')"},
		Limits: Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1, CPUSeconds: 10}})
	if err != nil {
		return fail(err)
	}
	defer m.DestroyInBackground(sb, nil)
	deadline, _ := pctx.Deadline()
	_ = sb.Stdout.SetReadDeadline(deadline)
	stop := context.AfterFunc(pctx, func() { _ = sb.Stdout.SetReadDeadline(time.Now()) })
	defer stop()
	b, _ := io.ReadAll(io.LimitReader(sb.Stdout, 1024))
	if strings.TrimSpace(string(b)) != "ok" {
		if pctx.Err() != nil {
			return fail(pctx.Err())
		}
		return fail(errors.New("python in the sandbox didn't print what it was told to"))
	}
	return nil
}

// PlatformCheck is Doctor's platform line alone: it starts a sandbox on o.Platform and, when that
// fails, names a platform that works.
func PlatformCheck(ctx context.Context, o DoctorOptions) Check {
	if o.Platform == "" {
		o.Platform = runsc.PlatformSystrap
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	return platformCheck(ctx, o)
}

// Ready turns Doctor's failing lines into one error (nil when every line holds), worded for
// refusing to start.
func Ready(checks []Check) error {
	var lines []string
	for _, c := range checks {
		if !c.OK {
			lines = append(lines, fmt.Sprintf("%s: %s (%s)", c.Name, c.Detail, c.Fix))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("this machine can't run Python sandboxes yet: %s", strings.Join(lines, "; "))
}
