package runsc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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
	// SkipPlatform leaves out starting a real sandbox (the slowest check).
	SkipPlatform bool
}

// Doctor checks, line by line, that this machine can run sandboxes: root, runsc and its version,
// the rootfs, the cgroup controllers, network namespaces and iptables, and a platform that
// starts. Every failing line says how to fix it.
func Doctor(ctx context.Context, o DoctorOptions) []Check {
	if o.Platform == "" {
		o.Platform = PlatformSystrap
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
			Fix: "run make runsc, or set [python] runsc to the runsc binary"})
	} else if v, err := BinaryVersion(o.Runsc); err != nil {
		out = append(out, Check{Name: "runsc", Detail: err.Error(),
			Fix: "run make runsc, which installs runsc " + PinnedVersion()})
	} else if v != PinnedVersion() {
		out = append(out, Check{Name: "runsc", Detail: fmt.Sprintf("%s is version %s, not the pinned %s", o.Runsc, v, PinnedVersion()),
			Fix: "run make runsc, which installs the pinned version"})
	} else {
		runscOK = true
		out = append(out, Check{Name: "runsc", OK: true, Detail: fmt.Sprintf("%s, version %s", o.Runsc, v)})
	}

	rootfsOK := false
	if fi, err := os.Stat(filepath.Join(o.Rootfs, "usr/bin/python3")); err != nil || fi.IsDir() {
		out = append(out, Check{Name: "rootfs", Detail: fmt.Sprintf("no rootfs with /usr/bin/python3 at %s", o.Rootfs),
			Fix: "run make rootfs, or set [python] rootfs to a built root filesystem"})
	} else {
		rootfsOK = true
		out = append(out, Check{Name: "rootfs", OK: true, Detail: o.Rootfs})
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

// cgroupCheck wants cgroup v1 memory, pids, cpu and cpuacct hierarchies mounted under CgroupRoot
// (as on Debian 12 VMs here): toolhost reads limit hits from their files.
func cgroupCheck() Check {
	mounted := map[string]bool{}
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || f[2] != "cgroup" || !strings.HasPrefix(f[1], CgroupRoot+"/") {
				continue
			}
			for _, opt := range strings.Split(f[3], ",") {
				mounted[opt] = true
			}
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
			Fix: "mount the cgroup v1 controllers (memory, pids, cpu, cpuacct) under /sys/fs/cgroup/<controller>; toolhost reads limits and their hits from there"}
	}
	return Check{Name: "cgroups", OK: true, Detail: "cgroup v1 memory, pids, cpu and cpuacct"}
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
			err = run(ctx, "ip", "netns", "add", id)
			if err == nil {
				err = run(ctx, "ip", "netns", "del", id)
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
		err := run(ctx, "iptables", "-w", "-S")
		if err == nil {
			err = run(ctx, "iptables", "-w", "-t", "nat", "-S")
		}
		if err != nil {
			out = append(out, Check{Name: "iptables", Detail: err.Error(),
				Fix: "install iptables (make netdeps) and load the filter and nat tables (nf_tables or legacy)"})
		} else {
			v, _ := output(ctx, "iptables", "--version")
			out = append(out, Check{Name: "iptables", OK: true, Detail: strings.TrimSpace(string(v))})
		}
	}
	return out
}

// platformCheck starts a real sandbox on the configured platform; if that fails it tries the
// others and names the one that works.
func platformCheck(ctx context.Context, o DoctorOptions) Check {
	err := tryPlatform(ctx, o, o.Platform)
	if err == nil {
		return Check{Name: "platform", OK: true, Detail: o.Platform + " starts a sandbox"}
	}
	for _, p := range []string{PlatformSystrap, PlatformPtrace} {
		if p == o.Platform {
			continue
		}
		if tryPlatform(ctx, o, p) == nil {
			return Check{Name: "platform", Detail: fmt.Sprintf("%s doesn't start a sandbox here (%v); %s does", o.Platform, err, p),
				Fix: fmt.Sprintf("set [python] platform = %q", p)}
		}
	}
	return Check{Name: "platform", Detail: fmt.Sprintf("no platform starts a sandbox here: %v", err),
		Fix: "check that the machine allows ptrace and seccomp for root (systrap needs them)"}
}

func tryPlatform(ctx context.Context, o DoctorOptions, platform string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rt, err := NewRuntime(RuntimeOptions{Binary: o.Runsc, Root: filepath.Join(o.StateDir, "runsc"), Platform: platform})
	if err != nil {
		return err
	}
	m, err := NewManager(ManagerOptions{Runtime: rt, Rootfs: o.Rootfs, StateDir: o.StateDir, Prefix: o.Prefix})
	if err != nil {
		return err
	}
	defer m.Close(context.WithoutCancel(ctx))
	return m.CheckPlatform(ctx)
}

// CheckPlatform starts a sandbox with the manager's runtime and has Python in it print a word.
// The sandbox is removed in the background (Close waits for it). A failure says why the platform
// doesn't work; PlatformCheck tells which one would.
func (m *Manager) CheckPlatform(ctx context.Context) error {
	sb, err := m.Prepare(ctx, SandboxOptions{Args: []string{"/usr/bin/python3", "-I", "-S", "-c", "print('ok')"},
		Limits: Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1, CPUSeconds: 10}})
	if err != nil {
		return err
	}
	defer m.Release(sb, nil)
	_ = sb.Stdout.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, _ := io.ReadAll(io.LimitReader(sb.Stdout, 1024))
	if strings.TrimSpace(string(b)) != "ok" {
		return errors.New("python in the sandbox didn't print what it was told to")
	}
	return nil
}

// PlatformCheck is Doctor's platform line alone: it starts a sandbox on o.Platform and, when that
// fails, names a platform that works.
func PlatformCheck(ctx context.Context, o DoctorOptions) Check {
	if o.Platform == "" {
		o.Platform = PlatformSystrap
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
