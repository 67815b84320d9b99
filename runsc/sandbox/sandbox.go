package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/toolhost/toolhost/runsc"
)

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Runtime runs runsc.
	Runtime *runsc.Runtime
	// Rootfs is the root filesystem every sandbox mounts read-only.
	Rootfs string
	// StateDir holds one folder per sandbox (bundle, capped /work, runsc's log).
	StateDir string
	// Prefix starts every id, cgroup, namespace, chain, rule and folder of this manager's
	// sandboxes; DefaultPrefix when empty. Hosts on one machine that must not sweep each other's
	// sandboxes use prefixes where neither starts the other.
	Prefix string
	// Network configures sandboxes with network.
	Network NetworkOptions
	// Instance makes the ids of the sandboxes and marks them as this process's (see Instance).
	// Managers that follow one another in a process (a reload) share one; without it the
	// manager opens an instance of its own and closes it in Close.
	Instance *Instance
	// Swept, when set, hears of each leftover container and cgroup a sweep of the manager
	// removed (SweepOptions.Removed).
	Swept func(what string)
}

// Manager makes sandboxes and removes them again. Its methods are safe for concurrent use.
type Manager struct {
	opts    ManagerOptions
	inst    *Instance
	ownInst bool

	cg *Cgroups

	mu      sync.Mutex
	live    map[string]*Sandbox
	closing sync.WaitGroup
}

// NewManager checks the options and makes the state folder.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if opts.Runtime == nil {
		return nil, errors.New("the sandbox manager needs a runtime")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if err := CheckPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	if err := checkRootfs(opts.Rootfs); err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		return nil, errors.New("the sandbox manager needs a state folder")
	}
	if err := os.MkdirAll(sandboxesDir(opts.StateDir), 0o700); err != nil {
		return nil, fmt.Errorf("making the sandboxes' state folder: %w", err)
	}
	cg, err := OpenCgroups()
	if err != nil {
		return nil, fmt.Errorf("this machine's cgroups can't hold sandboxes: %w", err)
	}
	if err := cg.Prepare(); err != nil {
		return nil, fmt.Errorf("this machine's cgroups can't hold sandboxes: %w", err)
	}
	m := &Manager{opts: opts, inst: opts.Instance, cg: cg, live: map[string]*Sandbox{}}
	if m.inst == nil {
		inst, err := OpenInstance(opts.StateDir, opts.Prefix)
		if err != nil {
			return nil, err
		}
		m.inst, m.ownInst = inst, true
	} else if m.inst.prefix != opts.Prefix || m.inst.stateDir != opts.StateDir {
		return nil, fmt.Errorf("the sandbox manager of %q in %s was given an instance of %q in %s", opts.Prefix, opts.StateDir, m.inst.prefix, m.inst.stateDir)
	}
	return m, nil
}

// Instance is the instance the manager's sandboxes belong to.
func (m *Manager) Instance() *Instance { return m.inst }

// Cgroups is where the manager's sandboxes' cgroups are.
func (m *Manager) Cgroups() *Cgroups { return m.cg }

// Prefix is the prefix of this manager's sandboxes.
func (m *Manager) Prefix() string { return m.opts.Prefix }

func sandboxesDir(stateDir string) string { return filepath.Join(stateDir, "sandboxes") }

// Lifetime says how long a sandbox lives and what runs in it.
type Lifetime int

const (
	// OneRun sandboxes run their first process alone (one run of untrusted code, the python
	// kind's way) and are destroyed after it: Exec refuses them, and a Pool hands each out once.
	OneRun Lifetime = iota
	// LongLived sandboxes run many processes, one Exec after another or at once, until they are
	// destroyed (a conversation's sandbox); their first process only keeps them up. A Pool
	// doesn't keep them.
	LongLived
)

// Options describe one sandbox.
type Options struct {
	// Args is the first process: typically a runner that reads one request from fd 3.
	Args []string
	// Owner names whom the sandbox runs for (the principal of a run): a Pool takes its place in
	// Places for that owner, so that scarce places are shared fairly among owners. Not part of
	// the sandbox's shape.
	Owner string `json:"-"`
	// Lifetime is OneRun (the default) or LongLived.
	Lifetime Lifetime
	// Env is the environment; DefaultEnv() when nil.
	Env []string
	// UID and GID inside the sandbox; 65534 (nobody) when both are zero and Root is false.
	UID, GID uint32
	Root     bool
	// Limits are the sandbox's resource limits.
	Limits Limits
	// WorkBytes caps /work (a host tmpfs); WorkFiles caps its number of files.
	WorkBytes int64
	WorkFiles int
	// Workspace, when set, is a host folder mounted as /work instead of a fresh tmpfs, which
	// Destroy leaves in place: a workspace that outlives the sandbox. The caller owns it, caps its
	// size and gives it to UID:GID; WorkBytes and WorkFiles don't apply.
	Workspace string
	// TmpBytes caps /tmp.
	TmpBytes int64
	// Network gives the sandbox a network namespace with public addresses on ports 80 and 443;
	// without it the sandbox has loopback only.
	Network bool
	// Ready, when not empty, is the line (without its newline) the first process writes on fd 3
	// once it waits for its request: Start returns only after reading it, so a started
	// sandbox is really ready, not merely started.
	Ready string
	// GuardInit keeps every process of the sandbox from signalling, tracing or reading the
	// memory of the first process (PID 1), whose exit ends the sandbox: a runner that watches
	// the clock and the control socket there can't be stopped by the code it runs (gVisor, unlike
	// Linux, lets a process of the same user stop or kill init). It is a seccomp filter inside
	// the sandbox (runsc --oci-seccomp); what the code runs in must leave PID 1's session (setsid)
	// so that signals to its own process group don't reach PID 1 either.
	GuardInit bool
	// ControlStdin makes Control the first process's stdin (fd 0) instead of fd 3: a restore
	// (Manager.Restore) hands a sandbox new standard files and no others, so the control socket
	// of a sandbox that is to be checkpointed and restored must be one of them. A LongLived
	// sandbox's only.
	ControlStdin bool
}

// guardInitFilter is the seccomp filter of Options.GuardInit: calls that name PID 1 (as a
// 32-bit pid: the kernel reads only those bits) fail with EPERM, and so do calls that act on a
// pidfd (which /proc/1 would give). Besides signals, tracing and memory, that is whatever would
// cripple PID 1 without stopping it: its resource limits (prlimit64), its priority (setpriority
// and ioprio_set of the process or its group, and of every process of the user, PID 1's too, as
// the code runs as the same user), its CPUs and scheduling.
func guardInitFilter() *specs.LinuxSeccomp {
	is := func(index uint, value uint64) []specs.LinuxSeccompArg {
		return []specs.LinuxSeccompArg{{Index: index, Value: 0xffffffff, ValueTwo: value, Op: specs.OpMaskedEqual}}
	}
	pid1 := func(index uint) []specs.LinuxSeccompArg { return is(index, 1) }
	const prioUser, ioprioWhoUser = 2, 3 // PRIO_USER, IOPRIO_WHO_USER
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchAARCH64},
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
				"process_vm_readv", "process_vm_writev"}, Action: specs.ActErrno, Args: pid1(0)},
			{Names: []string{"ptrace"}, Action: specs.ActErrno, Args: pid1(1)},
			{Names: []string{"pidfd_open"}, Action: specs.ActErrno, Args: pid1(0)},
			{Names: []string{"pidfd_send_signal", "pidfd_getfd"}, Action: specs.ActErrno},
			{Names: []string{"prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
				"sched_setattr"}, Action: specs.ActErrno, Args: pid1(0)},
			// setpriority(which, who, prio), ioprio_set(which, who, ioprio): a process or group
			// numbered 1, or a user's every process.
			{Names: []string{"setpriority", "ioprio_set"}, Action: specs.ActErrno, Args: pid1(1)},
			{Names: []string{"setpriority"}, Action: specs.ActErrno, Args: is(0, prioUser)},
			{Names: []string{"ioprio_set"}, Action: specs.ActErrno, Args: is(0, ioprioWhoUser)},
		},
	}
}

// Sandbox is a started sandbox whose first process runs. Its first process has the sandbox's end
// of Control as fd 3 and Stdout and Stderr as its standard output and error; stdin is /dev/null.
// A OneRun sandbox takes one run over Control; a LongLived one runs more processes (Exec). Either
// lives until Destroy, or until its first process ends.
type Sandbox struct {
	// ID names the sandbox, its cgroup, namespace and firewall chain.
	ID string
	// Control is the host's end of a Unix socket pair whose other end is fd 3 inside (fd 0 with
	// Options.ControlStdin).
	Control *os.File
	// Stdout and Stderr are the read ends of the pipes the sandbox writes its output to. They
	// reach EOF when the sandbox has ended.
	Stdout, Stderr *os.File

	m    *Manager
	opts Options
	// owner is the Owner of the Get that handed it out: whose place in Places it holds;
	// unweigh ends its count among the owner's running sandboxes (Places.Weigh).
	owner   string
	unweigh func()
	dir     string
	net     *sandboxNet
	// baseline is what the cgroup's counters held at hand-out (cgroup v2 can't reset them).
	baseline Stats
	// prepared: made by Prepare, nothing runs in it until Resume.
	prepared bool
	started  time.Time
	once     sync.Once
	done     chan struct{}
	err      error
}

// Start makes a sandbox and starts its first process, which then waits for what Control says (with
// Options.Ready, Start returns once it said it is ready). The sandbox lives until Destroy (or
// DestroyInBackground), or until its first process ends.
func (m *Manager) Start(ctx context.Context, opts Options) (*Sandbox, error) {
	return m.start(ctx, opts, launch{})
}

// launch is how start runs a sandbox's processes: its first process started afresh (the zero
// launch), restored from the checkpoint in image (Restore), or none yet (prepare: Prepare).
type launch struct {
	image   string
	prepare bool
}

// start makes a sandbox with opts and runs it as how says. What it made is destroyed if it fails.
func (m *Manager) start(ctx context.Context, opts Options, how launch) (_ *Sandbox, err error) {
	sb := m.register(withStartDefaults(opts))
	sb.prepared = how.prepare
	defer func() {
		if err != nil {
			// Bounded: a runtime that hangs (a platform that never starts) must not hold the
			// caller here as well.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = sb.Destroy(ctx)
		}
	}()

	bundle, netMode, flags, err := sb.prepareBundle(ctx)
	if err != nil {
		return nil, err
	}
	inner, outW, errW, err := sb.openStreams()
	if err != nil {
		return nil, err
	}
	defer inner.Close()
	defer outW.Close()
	defer errW.Close()
	if err := sb.runRunsc(ctx, bundle, netMode, flags, inner, outW, errW, how); err != nil {
		return nil, err
	}
	// A restored first process said it was ready once, before its checkpoint; a prepared
	// sandbox runs nothing yet.
	if sb.opts.Ready != "" && how == (launch{}) {
		if err := sb.awaitReady(ctx, sb.opts.Ready); err != nil {
			return nil, err
		}
	}
	sb.started = time.Now()
	return sb, nil
}

// withStartDefaults fills in what opts leaves unset: nobody's UID and GID (unless Root), a
// 64 MiB /work of 4096 files.
func withStartDefaults(opts Options) Options {
	if !opts.Root && opts.UID == 0 && opts.GID == 0 {
		opts.UID, opts.GID = 65534, 65534
	}
	if opts.WorkBytes <= 0 {
		opts.WorkBytes = 64 << 20
	}
	if opts.WorkFiles <= 0 {
		opts.WorkFiles = 4096
	}
	return opts
}

// register gives a new sandbox with opts an ID no live sandbox has, and counts it among the
// live ones.
func (m *Manager) register(opts Options) *Sandbox {
	m.mu.Lock()
	id := m.inst.NewID()
	for m.live[id] != nil {
		id = m.inst.NewID()
	}
	sb := &Sandbox{ID: id, m: m, opts: opts, dir: filepath.Join(sandboxesDir(m.opts.StateDir), id),
		done: make(chan struct{})}
	m.live[id] = sb
	m.mu.Unlock()
	return sb
}

// prepareBundle makes the sandbox's folder, its /work (unless it has a workspace) and its network
// (if asked for), and writes its OCI bundle. It returns the bundle's folder, the network mode and
// the extra flags runsc runs it with. What it made is left for Destroy to undo on failure.
func (s *Sandbox) prepareBundle(ctx context.Context) (bundle string, netMode string, flags []string, err error) {
	m, opts := s.m, s.opts
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return "", "", nil, fmt.Errorf("making the sandbox folder: %w", err)
	}
	work := s.workDir()
	if s.prepared {
		if err := mountLaterWork(work); err != nil {
			return "", "", nil, err
		}
	} else if opts.Workspace == "" {
		if err := mountWork(work, opts.WorkBytes, opts.WorkFiles, opts.UID, opts.GID); err != nil {
			return "", "", nil, err
		}
	} else if fi, err := os.Stat(work); err != nil || !fi.IsDir() {
		return "", "", nil, fmt.Errorf("the sandbox's workspace %s is not a folder", work)
	}
	netMode, nsPath := runsc.NetworkNone, ""
	if opts.Network {
		if s.net, err = setupNetwork(ctx, s.ID, m.opts.Network); err != nil {
			return "", "", nil, fmt.Errorf("making the sandbox's network: %w", err)
		}
		netMode, nsPath = runsc.NetworkSandbox, s.net.NSPath()
	}
	spec, err := Spec(BundleOptions{
		Rootfs: m.opts.Rootfs, Args: opts.Args, Env: opts.Env, UID: opts.UID, GID: opts.GID,
		WorkDir: work, TmpBytes: opts.TmpBytes, Limits: opts.Limits, CgroupsPath: m.cg.Path(s.ID),
		NetNSPath: nsPath,
	})
	if err != nil {
		return "", "", nil, err
	}
	if opts.GuardInit {
		spec.Linux.Seccomp = guardInitFilter()
		flags = append(flags, "--oci-seccomp")
	}
	bundle = filepath.Join(s.dir, "bundle")
	if err := WriteBundle(bundle, spec); err != nil {
		return "", "", nil, err
	}
	return bundle, netMode, flags, nil
}

// openStreams makes the sandbox's control socket and its stdout and stderr pipes. It keeps our
// ends (Control, Stdout, Stderr) and returns the sandbox's: the control socket's other end and
// the pipes' write ends, for the caller to close once runsc has them. On failure the sandbox's
// ends it made are closed; ours are left for Destroy.
func (s *Sandbox) openStreams() (inner, outW, errW *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("making the control socket: %w", err)
	}
	// Our end is non-blocking, so reads on it wait in Go's poller and Close interrupts them.
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, nil, nil, fmt.Errorf("making the control socket: %w", err)
	}
	s.Control = os.NewFile(uintptr(fds[0]), "control")
	inner = os.NewFile(uintptr(fds[1]), "control-sandbox")
	if s.Stdout, outW, err = os.Pipe(); err != nil {
		inner.Close()
		return nil, nil, nil, fmt.Errorf("making the stdout pipe: %w", err)
	}
	if s.Stderr, errW, err = os.Pipe(); err != nil {
		outW.Close()
		inner.Close()
		return nil, nil, nil, fmt.Errorf("making the stderr pipe: %w", err)
	}
	return inner, outW, errW, nil
}

// runRunsc starts the sandbox's first process under runsc, detached, with the bundle, network
// mode and flags prepareBundle gave, and the sandbox's ends of the streams openStreams made; with
// how.image, it restores the processes of the checkpoint there instead; with how.prepare, it only
// creates the sandbox (runsc create), for Resume.
func (s *Sandbox) runRunsc(ctx context.Context, bundle string, netMode string, flags []string, inner, outW, errW *os.File, how launch) error {
	create := runsc.CreateOpts{Network: netMode, Stdout: outW, Stderr: errW, ExtraFiles: []*os.File{inner},
		LogFile: filepath.Join(s.dir, "runsc.log"), ExtraFlags: flags}
	if s.opts.ControlStdin {
		create.Stdin, create.ExtraFiles = inner, nil
	}
	rt := s.m.opts.Runtime
	switch {
	case how.prepare:
		if err := rt.Create(ctx, s.ID, bundle, &create); err != nil {
			return fmt.Errorf("creating the sandbox: %w", err)
		}
	case how.image != "":
		if err := rt.Restore(ctx, s.ID, bundle, &runsc.RestoreOpts{ImagePath: how.image, Detach: true, CreateOpts: create}); err != nil {
			return fmt.Errorf("restoring the sandbox: %w", err)
		}
	default:
		if err := rt.Run(ctx, s.ID, bundle, &runsc.RunOpts{Detach: true, CreateOpts: create}); err != nil {
			return fmt.Errorf("starting the sandbox: %w", err)
		}
	}
	return nil
}

// Started is when the sandbox became ready (a pool retires sandboxes that waited too long).
func (s *Sandbox) Started() time.Time { return s.started }

// Options returns the options the sandbox was made with (defaults filled in).
func (s *Sandbox) Options() Options { return s.opts }

// Stats reads the sandbox's cgroup, its counters counted from the sandbox's hand-out. Read it
// before Destroy, which removes the cgroup.
func (s *Sandbox) Stats() (Stats, error) {
	st, err := s.m.cg.Stats(s.ID)
	return st.since(s.baseline), err
}

// WorkFree returns the bytes still free in the sandbox's /work.
func (s *Sandbox) WorkFree() (uint64, error) { return workFree(s.workDir()) }

// workDir is the host folder that is /work inside: the workspace, or a tmpfs in its folder.
func (s *Sandbox) workDir() string {
	if s.opts.Workspace != "" {
		return s.opts.Workspace
	}
	return filepath.Join(s.dir, "work")
}

// ExecOpts are the options of Sandbox.Exec.
type ExecOpts struct {
	// Env is the process's whole environment; the sandbox's (Options.Env) when nil.
	Env []string
	// Cwd is its working folder inside; /work when empty.
	Cwd string
	// Stdin, Stdout and Stderr become its standard files (files, pipe ends or sockets the caller
	// reads itself, as in runsc.CreateOpts); nil is /dev/null.
	Stdin, Stdout, Stderr *os.File
}

// Exec runs the process args in a LongLived sandbox, as the sandbox's user, and waits for it to
// end. It returns the process's exit status; a non-zero status is not an error. Cancelling ctx
// stops the wait.
func (s *Sandbox) Exec(ctx context.Context, args []string, opts *ExecOpts) (int, error) {
	if s.opts.Lifetime != LongLived {
		return -1, errors.New("a one-run sandbox runs its first process alone: start it LongLived to run more")
	}
	if opts == nil {
		opts = &ExecOpts{}
	}
	env := opts.Env
	if env == nil {
		env = s.opts.Env
	}
	if env == nil {
		env = DefaultEnv()
	}
	cwd := opts.Cwd
	if cwd == "" {
		cwd = "/work"
	}
	code, err := s.m.opts.Runtime.Exec(ctx, s.ID, args, &runsc.ExecOpts{Env: env, Cwd: cwd,
		User: fmt.Sprintf("%d:%d", s.opts.UID, s.opts.GID), Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr})
	if err != nil {
		return code, fmt.Errorf("running a process in sandbox %s: %w", s.ID, err)
	}
	return code, nil
}

// Kill stops every process in the sandbox at once; the sandbox then ends and Stdout and Stderr
// reach EOF.
func (s *Sandbox) Kill(ctx context.Context) error {
	err := s.m.opts.Runtime.Kill(ctx, s.ID, syscall.SIGKILL, &runsc.KillOpts{All: true})
	if err != nil && runsc.IsNotExist(err) {
		return nil
	}
	if err != nil {
		// The sandbox may already be gone; its cgroup's processes are killed either way.
		s.m.cg.Kill(s.ID)
	}
	return err
}

// Destroy kills the sandbox and removes it with everything it had on the host: runsc's state, its
// cgroup, network namespace, veth pair, firewall chain and rules, its /work and its folder (a
// Workspace stays). It is idempotent; later calls return the first call's result.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.once.Do(func() {
		defer close(s.done)
		var errs []error
		rt := s.m.opts.Runtime
		// The fast way first: every process of the sandbox (sandbox, gofer, stubs) is in its
		// cgroup; once they are killed and gone, runsc's state files are all that is left of it.
		// runsc delete takes over a second here (it polls until the VM's init reaps the sandbox)
		// and a runsc process's CPU; it stays the way when the fast one doesn't finish.
		if !destroyFast(ctx, rt, s.m.cg, s.ID) {
			if err := rt.Delete(ctx, s.ID, &runsc.DeleteOpts{Force: true}); err != nil && !runsc.IsNotExist(err) {
				_ = rt.Kill(ctx, s.ID, syscall.SIGKILL, &runsc.KillOpts{All: true})
				errs = append(errs, err)
			}
			// runsc processes of the id outside its cgroup (a runsc command killed half-way).
			killProcesses(func(name string) bool { return name == s.ID })
		}
		if err := s.m.cg.Remove(s.ID); err != nil {
			errs = append(errs, err)
		}
		if s.net != nil {
			if err := s.net.teardown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if err := unmountAll(s.dir); err != nil {
			errs = append(errs, err)
		} else if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing the sandbox folder: %w", err))
		}
		for _, f := range []*os.File{s.Control, s.Stdout, s.Stderr} {
			if f != nil {
				_ = f.Close()
			}
		}
		s.m.mu.Lock()
		delete(s.m.live, s.ID)
		s.m.mu.Unlock()
		if len(errs) > 0 {
			s.err = fmt.Errorf("removing sandbox %s: %w", s.ID, errors.Join(errs...))
		}
	})
	<-s.done
	return s.err
}

// DestroyInBackground destroys the sandbox without waiting for it (removing a sandbox takes a
// while); Manager.Close waits for it. onErr, if not nil, hears of a failure.
func (m *Manager) DestroyInBackground(s *Sandbox, onErr func(error)) {
	m.closing.Add(1)
	go func() {
		defer m.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Destroy(ctx); err != nil && onErr != nil {
			onErr(err)
		}
	}()
}

// Close destroys every live sandbox, waits for the ones being destroyed in the background, and
// closes the manager's instance if it opened it itself.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	live := make([]*Sandbox, 0, len(m.live))
	for _, s := range m.live {
		live = append(live, s)
	}
	m.mu.Unlock()
	errs := destroyAll(ctx, live)
	waited := make(chan struct{})
	go func() { m.closing.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for sandboxes to be removed: %w", ctx.Err()))
	}
	if m.ownInst {
		if err := m.inst.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// destroyAll destroys sandboxes at once and returns what failed.
func destroyAll(ctx context.Context, sandboxes []*Sandbox) []error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, s := range sandboxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Destroy(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// Sweep removes the leftovers of this manager's instance and of instances of its prefix that
// are no longer open (see the package's Sweep); sandboxes of other processes still running are
// left alone.
func (m *Manager) Sweep(ctx context.Context) error {
	return Sweep(ctx, SweepOptions{Runtime: m.opts.Runtime, Prefix: m.opts.Prefix, StateDir: m.opts.StateDir, Instance: m.inst, Removed: m.opts.Swept})
}

// ParseCIDRs parses CIDR strings such as "10.0.0.0/8" (a bare address is a /32 or /128).
func ParseCIDRs(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR range", s)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
