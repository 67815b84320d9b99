package sandbox

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/toolhost/toolhost/runsc"
)

// tagLen is how many hex digits of an id's random part name the Instance that made it.
const tagLen = 4

// instancesDir holds the lock file of every open Instance of a state folder.
func instancesDir(stateDir string) string { return filepath.Join(stateDir, "instances") }

func instanceLockPath(stateDir, prefix, tag string) string {
	return filepath.Join(instancesDir(stateDir), prefix+tag+".lock")
}

// Instance is one process's share of a sandbox prefix in a state folder. Several processes may
// use one prefix at once — a host and a toolhost check beside it, a plugin and the one started
// in its place — and none may remove what another still uses. So the ids an Instance makes carry
// a tag of its own (the first hex digits after the prefix), and the Instance holds an exclusive
// flock on <state_dir>/instances/<prefix><tag>.lock for as long as it is open. The kernel drops
// the lock when its process ends, however it ends: a tag whose lock nobody holds belongs to a
// process that is gone, and Sweep removes its leftovers; a tag whose lock is held is left alone.
type Instance struct {
	prefix, stateDir, tag string
	next                  atomic.Uint32

	mu   sync.Mutex
	lock *os.File // nil once closed
}

// OpenInstance takes a tag no open Instance of prefix in stateDir holds.
func OpenInstance(stateDir, prefix string) (*Instance, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(instancesDir(stateDir), 0o700); err != nil {
		return nil, fmt.Errorf("making the folder of sandbox instance locks: %w", err)
	}
	for range 100 {
		id, err := NewID("")
		if err != nil {
			return nil, err
		}
		tag := id[:tagLen]
		f, err := lockTag(stateDir, prefix, tag, true)
		if err != nil {
			return nil, err
		}
		if f == nil {
			continue // another process has this tag
		}
		in := &Instance{prefix: prefix, stateDir: stateDir, tag: tag, lock: f}
		// Ids count up from a random start, so a leftover of an earlier instance with the same
		// tag that a sweep could not remove is not met again soon.
		start, _ := strconv.ParseUint(id[tagLen:tagLen+6], 16, 32)
		in.next.Store(uint32(start))
		return in, nil
	}
	return nil, fmt.Errorf("every sandbox instance tag of the prefix %q is taken: too many toolhost processes use it at once", prefix)
}

// lockTag takes the lock of tag without waiting: the open, locked file, or nil when another open
// file description holds it (or, unless create is set, when there is no lock file).
func lockTag(stateDir, prefix, tag string, create bool) (*os.File, error) {
	path := instanceLockPath(stateDir, prefix, tag)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	for range 10 {
		f, err := os.OpenFile(path, flags, 0o600)
		if !create && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("opening the sandbox instance lock %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil
			}
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		// A sweep removes the lock files of instances that are gone, holding their lock: the
		// file locked may have left the folder meanwhile. Only the one still there counts.
		var held, there syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &there) == nil &&
			held.Dev == there.Dev && held.Ino == there.Ino {
			return f, nil
		}
		f.Close()
	}
	return nil, nil
}

// Prefix is the prefix of the instance's ids.
func (in *Instance) Prefix() string { return in.prefix }

// StateDir is the state folder the instance's lock is in.
func (in *Instance) StateDir() string { return in.stateDir }

// NewID returns an id of the instance: its prefix, its tag, and a number of its own.
func (in *Instance) NewID() string {
	n := in.next.Add(1) & 0xffffff
	return fmt.Sprintf("%s%s%06x", in.prefix, in.tag, n)
}

// Owns reports whether id was made by this instance.
func (in *Instance) Owns(id string) bool {
	return ownedBy(id, in.prefix) && id[len(in.prefix):len(in.prefix)+tagLen] == in.tag
}

// Close gives the tag up: its lock file goes and the lock is released. What the instance made
// must be removed first (a sweep by another process may remove it from then on).
func (in *Instance) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.lock == nil {
		return nil
	}
	err := os.Remove(instanceLockPath(in.stateDir, in.prefix, in.tag))
	in.lock.Close()
	in.lock = nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the sandbox instance lock: %w", err)
	}
	return nil
}

// drop releases the lock as the kernel does when the process dies: nothing is removed (tests
// use it to play a crash).
func (in *Instance) drop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.lock != nil {
		in.lock.Close()
		in.lock = nil
	}
}

// sweepScope decides which names of a prefix a sweep may remove, and holds the locks of the dead
// instances whose leftovers it removes, so that no new instance takes their tags meanwhile.
type sweepScope struct {
	prefix, stateDir string
	self             *Instance // nil: everything of the prefix
	mu               sync.Mutex
	tags             map[string]*os.File // tag → its lock, held for the sweep; nil: a live instance's
}

func newSweepScope(opts SweepOptions) *sweepScope {
	return &sweepScope{prefix: opts.Prefix, stateDir: opts.StateDir, self: opts.Instance, tags: map[string]*os.File{}}
}

// ours reports whether name is the prefix's and may be removed: everything without an Instance;
// with one, what it made and what instances no longer open made.
func (s *sweepScope) ours(name string) bool {
	if !ownedBy(name, s.prefix) {
		return false
	}
	if s.self == nil {
		return true
	}
	tag := name[len(s.prefix) : len(s.prefix)+tagLen]
	if tag == s.self.tag {
		return true
	}
	return s.dead(tag, true)
}

// dead reports whether no open Instance holds tag, and keeps its lock until release. With create,
// a tag without a lock file gets one for the sweep, so that no instance takes the tag meanwhile.
func (s *sweepScope) dead(tag string, create bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, seen := s.tags[tag]; seen {
		return f != nil
	}
	if s.stateDir == "" {
		return false // no lock files to ask: only what the Instance made is certainly ours
	}
	f, err := lockTag(s.stateDir, s.prefix, tag, create)
	if err != nil {
		f = nil
	}
	if f != nil || create {
		s.tags[tag] = f
	}
	return f != nil
}

// lockFiles lists the tags of the prefix's lock files.
func (s *sweepScope) lockFiles() []string {
	if s.stateDir == "" {
		return nil
	}
	entries, _ := os.ReadDir(instancesDir(s.stateDir))
	var tags []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".lock")
		if ok && strings.HasPrefix(name, s.prefix) && len(name) == len(s.prefix)+tagLen {
			if _, err := hex.DecodeString(name[len(s.prefix):]); err == nil {
				tags = append(tags, name[len(s.prefix):])
			}
		}
	}
	return tags
}

// release removes the lock files of the dead instances swept, and lets their tags go.
func (s *sweepScope) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tag, f := range s.tags {
		if f != nil {
			_ = os.Remove(instanceLockPath(s.stateDir, s.prefix, tag))
			f.Close()
		}
	}
	clear(s.tags)
}

// SweepOptions say what Sweep looks for.
type SweepOptions struct {
	// Runtime's state folder is searched for containers; nil skips runsc's own state.
	Runtime *runsc.Runtime
	// Prefix marks what is ours: ids made by NewID with it.
	Prefix string
	// StateDir holds the sandbox folders (its "sandboxes" folder is swept) and the instances'
	// lock files.
	StateDir string
	// Instance, when set, limits the sweep to what it made and what instances no longer open
	// made: sandboxes of another process still running (a host beside a toolhost check, say)
	// are left alone. Without it, everything of the prefix goes.
	Instance *Instance
	// Removed, when set, hears of each leftover sandbox container, cgroup, link and network
	// namespace the sweep removed ("runsc container toolhost-…", "cgroup
	// /system.slice/toolhost.service/toolhost-…", "network namespace toolhost-…"): the python
	// kind logs them.
	Removed func(what string)
}

func (o SweepOptions) removed(what string) {
	if o.Removed != nil {
		o.Removed(what)
	}
}

// Sweep removes every leftover sandbox of the prefix (with an Instance, of that instance and of
// instances no longer open): runsc containers (killed and deleted), runsc processes whose state
// is gone, cgroups, network namespaces, veth pairs, iptables rules and chains, mounts, sandbox
// folders and the lock files of instances that are gone; then, when no network sandbox is left on
// the machine, the host's IPv4 forwarding settings as they were (RestoreForwarding). Run it at
// start-up and at shutdown:
// after a crash it is what keeps sandboxes from outliving the host. It carries on past failures
// and reports them all.
func Sweep(ctx context.Context, opts SweepOptions) error {
	if err := CheckPrefix(opts.Prefix); err != nil {
		return err
	}
	if in := opts.Instance; in != nil && (in.prefix != opts.Prefix || in.stateDir != opts.StateDir) {
		return fmt.Errorf("sweeping %q in %s with an instance of %q in %s", opts.Prefix, opts.StateDir, in.prefix, in.stateDir)
	}
	scope := newSweepScope(opts)
	defer scope.release()
	ours := scope.ours
	var errs []error
	if opts.Runtime != nil {
		errs = append(errs, sweepContainers(ctx, opts, ours)...)
	}
	killProcesses(ours)
	errs = append(errs, sweepCgroups(opts, ours)...)
	errs = append(errs, sweepNetworks(ctx, opts, ours)...)
	// With the swept sandboxes' rules gone, forwarding goes back to how it was if no network
	// sandbox is left on the machine: a crash must not leave it on.
	if err := RestoreForwarding(ctx); err != nil {
		errs = append(errs, err)
	}
	if opts.StateDir != "" {
		errs = append(errs, sweepFolders(opts, scope)...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("sweeping leftover sandboxes of %q: %w", opts.Prefix, errors.Join(errs...))
	}
	return nil
}

// sweepContainers kills and deletes the runsc containers that are ours in opts.Runtime's state
// folder, and returns what failed.
func sweepContainers(ctx context.Context, opts SweepOptions, ours func(string) bool) []error {
	var errs []error
	states, err := opts.Runtime.List(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, st := range states {
		if !ours(st.ID) {
			continue
		}
		_ = opts.Runtime.Kill(ctx, st.ID, syscall.SIGKILL, &runsc.KillOpts{All: true})
		if err := opts.Runtime.Delete(ctx, st.ID, &runsc.DeleteOpts{Force: true}); err != nil && !runsc.IsNotExist(err) {
			errs = append(errs, err)
		} else {
			opts.removed("runsc container " + st.ID)
		}
	}
	return errs
}

// sweepCgroups removes the cgroups that are ours, and returns what failed.
func sweepCgroups(opts SweepOptions, ours func(string) bool) []error {
	cg, err := OpenCgroups()
	if err != nil {
		return []error{err}
	}
	var errs []error
	dirs, names := cg.leftovers(ours)
	for i, dir := range dirs {
		if err := removeCgroupDir(dir); err != nil {
			errs = append(errs, err)
		} else {
			opts.removed("cgroup " + names[i])
		}
	}
	return errs
}

// sweepNetworks removes the iptables rules and chains, veth pairs and network namespaces that are
// ours, and returns what failed.
func sweepNetworks(ctx context.Context, opts SweepOptions, ours func(string) bool) []error {
	var errs []error
	if err := removeRulesTagged(ctx, ours); err != nil {
		errs = append(errs, err)
	}
	if err := removeChains(ctx, ours); err != nil {
		errs = append(errs, err)
	}
	if links, err := hostLinks(ctx); err == nil {
		for name, alias := range links {
			if ours(alias) {
				if err := runCommand(ctx, "ip", "link", "del", name); err != nil {
					errs = append(errs, err)
				} else {
					opts.removed("link " + name + " of " + alias)
				}
			}
		}
	} else {
		errs = append(errs, err)
	}
	if names, err := netnsNames(); err == nil {
		for _, n := range names {
			if ours(n) {
				if err := runCommand(ctx, "ip", "netns", "del", n); err != nil {
					errs = append(errs, err)
				} else {
					opts.removed("network namespace " + n)
				}
			}
		}
	} else {
		errs = append(errs, err)
	}
	return errs
}

// sweepFolders unmounts and removes the sandbox folders in opts.StateDir that are in scope, and
// marks the lock files of instances that are gone (but opts.Instance's) for scope.release to
// remove. It returns what failed.
func sweepFolders(opts SweepOptions, scope *sweepScope) []error {
	var errs []error
	dir := sandboxesDir(opts.StateDir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !scope.ours(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := unmountAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("removing a leftover sandbox folder: %w", err))
		}
	}
	// The lock files of instances that are gone and left nothing else behind.
	for _, tag := range scope.lockFiles() {
		if opts.Instance == nil || tag != opts.Instance.tag {
			scope.dead(tag, false)
		}
	}
	return errs
}

// Leftovers lists what of the prefix is still on the host: containers, runsc processes, cgroups,
// network namespaces, links, iptables chains and rules, sandbox folders, and lock files of
// instances that are gone (opts.Instance is not used). Tests assert it is empty.
func Leftovers(ctx context.Context, opts SweepOptions) ([]string, error) {
	ours := func(name string) bool { return ownedBy(name, opts.Prefix) }
	var out []string
	if opts.Runtime != nil {
		states, err := opts.Runtime.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			if ours(st.ID) {
				out = append(out, "runsc container "+st.ID)
			}
		}
	}
	for _, pid := range runscProcesses(ours) {
		out = append(out, "runsc process "+strconv.Itoa(pid))
	}
	cg, cgErr := OpenCgroups()
	if cgErr != nil {
		return nil, cgErr
	}
	_, cgroups := cg.leftovers(ours)
	for _, n := range cgroups {
		out = append(out, "cgroup "+n)
	}
	network, err := leftoverNetworks(ctx, ours)
	if err != nil {
		return nil, err
	}
	out = append(out, network...)
	if opts.StateDir != "" {
		out = append(out, leftoverFiles(opts, ours)...)
	}
	return out, nil
}

// leftoverNetworks lists the iptables rules (of the filter and nat tables), veth pairs and
// network namespaces that are ours.
func leftoverNetworks(ctx context.Context, ours func(string) bool) ([]string, error) {
	var out []string
	for _, table := range []string{"filter", "nat"} {
		rules, err := commandOutput(ctx, "iptables", "-w", "-t", table, "-S")
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(rules), "\n") {
			for _, w := range splitRule(line) {
				if ours(w) {
					out = append(out, "iptables "+table+": "+line)
					break
				}
			}
		}
	}
	links, err := hostLinks(ctx)
	if err != nil {
		return nil, err
	}
	for name, alias := range links {
		if ours(alias) {
			out = append(out, "link "+name)
		}
	}
	names, err := netnsNames()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if ours(n) {
			out = append(out, "netns "+n)
		}
	}
	return out, nil
}

// leftoverFiles lists what is ours in opts.StateDir: sandbox folders, mounts under them, and the
// lock files of instances that are gone.
func leftoverFiles(opts SweepOptions, ours func(string) bool) []string {
	var out []string
	entries, _ := os.ReadDir(sandboxesDir(opts.StateDir))
	for _, e := range entries {
		if ours(e.Name()) {
			out = append(out, "folder "+filepath.Join(sandboxesDir(opts.StateDir), e.Name()))
		}
	}
	if m, err := mountsUnder(sandboxesDir(opts.StateDir)); err == nil {
		base := sandboxesDir(opts.StateDir) + "/"
		for _, p := range m {
			if rest := strings.TrimPrefix(p, base); ours(strings.SplitN(rest, "/", 2)[0]) {
				out = append(out, "mount "+p)
			}
		}
	}
	scope := newSweepScope(SweepOptions{Prefix: opts.Prefix, StateDir: opts.StateDir})
	for _, tag := range scope.lockFiles() {
		if f, err := lockTag(opts.StateDir, opts.Prefix, tag, false); err == nil && f != nil {
			f.Close() // nobody holds it: its process is gone
			out = append(out, "instance lock "+instanceLockPath(opts.StateDir, opts.Prefix, tag))
		}
	}
	return out
}

// runscProcesses finds runsc processes (sandbox, gofer, or a runsc command) naming one of our ids.
func runscProcesses(ours func(string) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if !strings.Contains(filepath.Base(args[0]), "runsc") {
			continue
		}
		for _, a := range args[1:] {
			if ours(a) || ours(filepath.Base(a)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func killProcesses(ours func(string) bool) {
	for _, pid := range runscProcesses(ours) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
