package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Limits are a sandbox's resource limits. Zero means "no limit of that kind"; Spec refuses a
// spec without memory and pids limits.
type Limits struct {
	// MemoryBytes caps the sandbox's cgroup (memory.limit_in_bytes), gVisor's own memory included.
	MemoryBytes int64
	// Pids caps the host tasks (threads) of the sandbox's cgroup. gVisor's own threads count, and
	// each guest process costs about two more.
	Pids int64
	// CPUs is the CPU quota in cores (cpu.cfs_quota_us / cpu.cfs_period_us).
	CPUs float64
	// CPUShares is the cgroup's cpu.shares (1024 when 0). A pool starts its sandboxes with few
	// shares, so that under contention starting them yields to running calls, and gives them
	// the full 1024 when it hands one out.
	CPUShares uint64
	// CPUSeconds is RLIMIT_CPU of the first process (soft and hard).
	CPUSeconds uint64
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles uint64
	// FileBytes is RLIMIT_FSIZE: the largest file a process may write.
	FileBytes uint64
}

// BundleOptions describe the container of one sandbox.
type BundleOptions struct {
	// Rootfs is the host folder mounted read-only as /.
	Rootfs string
	// Args is the first process and its arguments.
	Args []string
	// Env is the whole environment; DefaultEnv() when nil. Nothing of the host's is added.
	Env []string
	// Cwd is the working folder inside; "/work" when empty.
	Cwd string
	// UID and GID the process runs as inside the sandbox.
	UID, GID uint32
	// WorkDir is a host folder mounted read-write as /work. The caller caps its size (a bind
	// mount alone is not capped: Sandbox mounts a tmpfs with size= there).
	WorkDir string
	// TmpBytes is the size of the tmpfs mounted on /tmp; 64 MiB when 0.
	TmpBytes int64
	// Limits are the resource limits.
	Limits Limits
	// CgroupsPath is the sandbox's own cgroup, e.g. "/toolhost-0123456789".
	CgroupsPath string
	// NetNSPath is a network namespace to join (runsc --network=sandbox); empty for a new empty
	// one (use with --network=none).
	NetNSPath string
	// Hostname inside the sandbox; "sandbox" when empty.
	Hostname string
}

// DefaultEnv is the whole environment of a sandboxed process unless told otherwise.
func DefaultEnv() []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/work"}
}

// Spec builds the OCI runtime spec of a sandbox: read-only root, writable /work, size-capped /tmp,
// no capabilities, no new privileges, an environment of its own, rlimits and cgroup limits.
func Spec(o BundleOptions) (*specs.Spec, error) {
	if err := checkBundleOptions(o); err != nil {
		return nil, err
	}
	env := o.Env
	if env == nil {
		env = DefaultEnv()
	}
	cwd := o.Cwd
	if cwd == "" {
		cwd = "/work"
	}
	host := o.Hostname
	if host == "" {
		host = "sandbox"
	}
	// The sandbox's processes are the OOM killer's first choice (runsc gives the sentry and the
	// gofer the spec's score). Without it they inherit the starter's: a host or agent at -1000
	// (OOMScoreAdjust=) left a sandbox over its memory limit unkillable on cgroup v2 — the
	// kernel found no victim in the cgroup, and the run hung until its timeout.
	oomScoreAdj := 1000

	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Terminal:        false,
			OOMScoreAdj:     &oomScoreAdj,
			User:            specs.User{UID: o.UID, GID: o.GID},
			Args:            o.Args,
			Env:             env,
			Cwd:             cwd,
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         specRlimits(o.Limits),
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: o.Rootfs, Readonly: true},
		Hostname: host,
		Mounts:   specMounts(o),
		Linux: &specs.Linux{
			Namespaces:  specNamespaces(o.NetNSPath),
			Resources:   specResources(o.Limits),
			CgroupsPath: o.CgroupsPath,
		},
	}, nil
}

// checkBundleOptions refuses options a sandbox can't be started from: no rootfs or command, no
// memory or pids limit, no cgroup path of its own.
func checkBundleOptions(o BundleOptions) error {
	if o.Rootfs == "" || len(o.Args) == 0 {
		return errors.New("a sandbox needs a rootfs and a command")
	}
	if o.Limits.MemoryBytes <= 0 || o.Limits.Pids <= 0 {
		return errors.New("a sandbox needs a memory and a pids limit")
	}
	if o.CgroupsPath == "" {
		return errors.New("a sandbox needs a cgroup path of its own")
	}
	return nil
}

// specRlimits returns the process rlimits of l (CPU seconds, open files, file size), leaving out
// the ones that are zero.
func specRlimits(l Limits) []specs.POSIXRlimit {
	var rlimits []specs.POSIXRlimit
	add := func(kind string, v uint64) {
		if v > 0 {
			rlimits = append(rlimits, specs.POSIXRlimit{Type: kind, Hard: v, Soft: v})
		}
	}
	add("RLIMIT_CPU", l.CPUSeconds)
	add("RLIMIT_NOFILE", l.OpenFiles)
	add("RLIMIT_FSIZE", l.FileBytes)
	return rlimits
}

// specMounts returns the sandbox's mounts: /proc, /dev, /dev/pts, /dev/shm, /sys, a /tmp of
// o.TmpBytes (64 MiB if unset), and o.WorkDir bound at /work if set, as a slave: a mount made on
// o.WorkDir later, if it is a shared mount point, reaches the sandbox (Manager.Prepare's). A
// restore needs the checkpoint's mounts with the same options, so every /work has them.
func specMounts(o BundleOptions) []specs.Mount {
	tmp := o.TmpBytes
	if tmp <= 0 {
		tmp = 64 << 20
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=16m"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", tmp)}},
	}
	if o.WorkDir != "" {
		mounts = append(mounts, specs.Mount{Destination: "/work", Type: "bind", Source: o.WorkDir,
			Options: []string{"rbind", "rslave", "rw", "nosuid", "nodev"}})
	}
	return mounts
}

// specNamespaces returns the sandbox's namespaces: new PID, IPC, UTS and mount namespaces, and
// the network namespace at netNSPath (a new one if empty).
func specNamespaces(netNSPath string) []specs.LinuxNamespace {
	netns := specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: netNSPath}
	return []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
		{Type: specs.MountNamespace}, netns,
	}
}

// specResources returns the cgroup limits of l: memory (with memory+swap at the same cap, so no
// swap on top), pids, and the CPU quota and shares if set.
func specResources(l Limits) *specs.LinuxResources {
	var cpu *specs.LinuxCPU
	if l.CPUs > 0 {
		period := uint64(100000)
		quota := int64(l.CPUs * float64(period))
		cpu = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	if l.CPUShares > 0 {
		if cpu == nil {
			cpu = &specs.LinuxCPU{}
		}
		shares := l.CPUShares
		cpu.Shares = &shares
	}
	mem, swap := l.MemoryBytes, l.MemoryBytes
	pids := l.Pids
	return &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &swap},
		Pids:   &specs.LinuxPids{Limit: &pids},
		CPU:    cpu,
	}
}

// WriteBundle writes spec as dir/config.json, making dir if needed.
func WriteBundle(dir string, spec *specs.Spec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the bundle folder: %w", err)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the OCI spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("writing the OCI spec: %w", err)
	}
	return nil
}
