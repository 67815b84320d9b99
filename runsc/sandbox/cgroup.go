package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/internal/cgroupfs"
	"golang.org/x/sys/unix"
)

// CgroupRoot is where the machine's cgroups are mounted.
const CgroupRoot = cgroupfs.Root

// Stats are what a sandbox's cgroup recorded: the facts the cause of a stop is read from. On
// cgroup v2, whose counters can't be reset, a sandbox's figures count from its hand-out (see
// Sandbox.Stats).
type Stats struct {
	// MemoryLimitHits is how often usage reached the limit: memory.failcnt (v1), the "max" count of
	// memory.events (v2).
	MemoryLimitHits uint64
	// OOMKills is the oom_kill count of memory.oom_control (v1) or memory.events (v2): processes
	// the kernel killed for the limit.
	OOMKills uint64
	// UnderOOM is memory.oom_control's under_oom (v1 only).
	UnderOOM bool
	// MemoryMaxBytes is the peak: memory.max_usage_in_bytes (v1), memory.peak (v2; kernels
	// before 6.12 can't reset it, so it includes the sandbox's wait in a pool). MemoryBytes is the
	// use now: memory.usage_in_bytes (v1), memory.current (v2).
	MemoryMaxBytes, MemoryBytes uint64
	// PidsLimitHits is the "max" count of pids.events: forks refused by the pids limit.
	PidsLimitHits uint64
	// Pids is pids.current.
	Pids uint64
	// CPU is cpuacct.usage (v1) or cpu.stat's usage_usec (v2).
	CPU time.Duration
}

// since is s counted from base: the counters that only grow, less what base had.
func (s Stats) since(base Stats) Stats {
	sub := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	s.MemoryLimitHits = sub(s.MemoryLimitHits, base.MemoryLimitHits)
	s.OOMKills = sub(s.OOMKills, base.OOMKills)
	s.PidsLimitHits = sub(s.PidsLimitHits, base.PidsLimitHits)
	s.CPU = max(s.CPU-base.CPU, 0)
	return s
}

// Cgroups is where this machine keeps sandboxes' cgroups, and the one owner of how they are
// limited, read, frozen, killed, listed and removed, on cgroup v1 (and hybrid trees, whose limits
// are v1's) and on cgroup v2.
//
// On v1 a sandbox's cgroup is /<id> in every hierarchy. On v2 it is <base>/<id>, where base is
// the cgroup systemd delegated (the unit's, with Delegate=; a `systemd-run --scope -p
// Delegate=yes` of a shell's toolhost) or a container's own root: Prepare moves every process of
// base into base/host (v2 lets only leaves hold processes) and hands base's children the memory,
// pids and cpu controllers. Nothing outside base is written.
//
// runsc makes each sandbox's cgroup and sets its limits from the OCI spec (linux.cgroupsPath, an
// absolute path); this type reads about ten files and writes about four, on the request path of
// a pooled call, where an exec of `runsc update` would cost more than the call. So it is written
// by hand on golang.org/x/sys, not on containerd/cgroups, whose v3 brings cilium/ebpf and a D-Bus
// client for what this needs none of.
type Cgroups struct {
	tree cgroupfs.Tree
	// base is the cgroup (a path in the v2 tree) the sandboxes go below; "/" on v1.
	base string
}

// OpenCgroups finds this machine's cgroup tree and, on v2, the delegated cgroup this process may
// put sandboxes below. It changes nothing (Prepare does).
func OpenCgroups() (*Cgroups, error) {
	tree, err := cgroupfs.Detect()
	if err != nil {
		return nil, err
	}
	c := &Cgroups{tree: tree, base: "/"}
	switch tree.Version {
	case cgroupfs.None:
		return nil, fmt.Errorf("no cgroup file system is mounted under %s", CgroupRoot)
	case cgroupfs.V2:
		own, err := cgroupfs.OwnPath(0)
		if err != nil {
			return nil, err
		}
		if c.base, err = cgroupfs.Delegated(tree.Unified, own); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Version is the machine's kind of cgroup tree.
func (c *Cgroups) Version() cgroupfs.Version { return c.tree.Version }

// V2 says whether the sandboxes' cgroups are cgroup v2 ones.
func (c *Cgroups) V2() bool { return c.tree.Version == cgroupfs.V2 }

// Base is the cgroup the sandboxes go below: "/" on v1, the delegated cgroup on v2.
func (c *Cgroups) Base() string { return c.base }

// v2Controllers are what sandboxes' cgroups need handed down on v2.
var v2Controllers = []string{"memory", "pids", "cpu"}

// hostLeaf is the child of base that Prepare moves base's own processes into.
const hostLeaf = "host"

// Prepare readies base for sandboxes on v2: every process in base moves into base/host, and
// base hands its children the memory, pids and cpu controllers. It is idempotent, and does
// nothing on v1.
func (c *Cgroups) Prepare() error {
	if !c.V2() {
		return nil
	}
	dir := c.dir("")
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("reading the controllers of the cgroup %s: %w", c.base, err)
	}
	var missing []string
	for _, ctl := range v2Controllers {
		if !slices.Contains(strings.Fields(string(avail)), ctl) {
			missing = append(missing, ctl)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the cgroup %s was not given the %s controllers (it has %q): the unit needs Delegate=memory pids cpu (or Delegate=yes)",
			c.base, strings.Join(missing, ", "), strings.TrimSpace(string(avail)))
	}
	leaf := filepath.Join(dir, hostLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("making the cgroup %s for toolhost's own processes: %w", path.Join(c.base, hostLeaf), err)
	}
	// Processes may start while they are moved; a few rounds take them all.
	for range 20 {
		pids := readProcs(dir)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("moving process %d into the cgroup %s (v2 lets only leaves hold processes): %w", pid, path.Join(c.base, hostLeaf), err)
			}
		}
	}
	enabled, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	for _, ctl := range v2Controllers {
		if slices.Contains(strings.Fields(string(enabled)), ctl) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+ctl), 0o644); err != nil {
			return fmt.Errorf("handing the %s controller to the children of the cgroup %s: %w", ctl, c.base, err)
		}
	}
	return nil
}

// Path is the sandbox id's cgroup as the OCI spec names it (linux.cgroupsPath).
func (c *Cgroups) Path(id string) string { return path.Join(c.base, id) }

// dir is the folder of the sandbox id's cgroup on v2 (of base when id is "").
func (c *Cgroups) dir(id string) string { return filepath.Join(c.tree.Unified, c.base, id) }

// hierarchies are the v1 hierarchies' folders under CgroupRoot, named ones included.
func (c *Cgroups) hierarchies() []string {
	out := make([]string, 0, len(c.tree.V1))
	for name := range c.tree.V1 {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// dirs are the folders of the sandbox id's cgroup: one per v1 hierarchy, or the one on v2.
func (c *Cgroups) dirs(id string) []string {
	if c.V2() {
		return []string{c.dir(id)}
	}
	var out []string
	for _, h := range c.hierarchies() {
		out = append(out, filepath.Join(c.tree.V1[h], id))
	}
	return out
}

// procsDir is the folder whose cgroup.procs holds every process of the sandbox id: the pids
// hierarchy's on v1.
func (c *Cgroups) procsDir(id string) string {
	if c.V2() {
		return c.dir(id)
	}
	return filepath.Join(CgroupRoot, "pids", id)
}

// v1 is the folder of the sandbox id's cgroup in the v1 controller's hierarchy.
func (c *Cgroups) v1(controller, id string) string {
	if m, ok := c.tree.V1[controller]; ok {
		return filepath.Join(m, id)
	}
	for name, m := range c.tree.V1 { // a joint mount: cpu,cpuacct
		if slices.Contains(strings.Split(name, ","), controller) {
			return filepath.Join(m, id)
		}
	}
	return filepath.Join(CgroupRoot, controller, id)
}

// Stats reads the sandbox id's cgroup. Files that are missing are left at zero; the error
// reports only a cgroup that isn't there.
func (c *Cgroups) Stats(id string) (Stats, error) {
	var s Stats
	if c.V2() {
		dir := c.dir(id)
		if _, err := os.Stat(dir); err != nil {
			return s, fmt.Errorf("the sandbox's cgroup is gone: %w", err)
		}
		ev := readKeyValues(filepath.Join(dir, "memory.events"))
		s.MemoryLimitHits, s.OOMKills = ev["max"], ev["oom_kill"]
		s.MemoryMaxBytes = readUint(filepath.Join(dir, "memory.peak"))
		s.MemoryBytes = readUint(filepath.Join(dir, "memory.current"))
		s.PidsLimitHits = readKeyValues(filepath.Join(dir, "pids.events"))["max"]
		s.Pids = readUint(filepath.Join(dir, "pids.current"))
		s.CPU = time.Duration(readKeyValues(filepath.Join(dir, "cpu.stat"))["usage_usec"]) * time.Microsecond
		return s, nil
	}
	mem := c.v1("memory", id)
	if _, err := os.Stat(mem); err != nil {
		return s, fmt.Errorf("the sandbox's memory cgroup is gone: %w", err)
	}
	s.MemoryLimitHits = readUint(filepath.Join(mem, "memory.failcnt"))
	s.MemoryMaxBytes = readUint(filepath.Join(mem, "memory.max_usage_in_bytes"))
	s.MemoryBytes = readUint(filepath.Join(mem, "memory.usage_in_bytes"))
	kv := readKeyValues(filepath.Join(mem, "memory.oom_control"))
	s.OOMKills, s.UnderOOM = kv["oom_kill"], kv["under_oom"] == 1
	pids := c.v1("pids", id)
	s.PidsLimitHits = readKeyValues(filepath.Join(pids, "pids.events"))["max"]
	s.Pids = readUint(filepath.Join(pids, "pids.current"))
	s.CPU = time.Duration(readUint(filepath.Join(c.v1("cpuacct", id), "cpuacct.usage")))
	return s, nil
}

// ResetCounters starts the sandbox id's counters anew for a run and returns the baseline its
// Stats are to be counted from: v1 zeroes memory.failcnt and memory.max_usage_in_bytes (the
// baseline is then zero); v2 can't reset memory.events, pids.events or cpu.stat, so the baseline
// is what they hold now.
func (c *Cgroups) ResetCounters(id string) (Stats, error) {
	if c.V2() {
		return c.Stats(id)
	}
	mem := c.v1("memory", id)
	for _, f := range []string{"memory.failcnt", "memory.max_usage_in_bytes"} {
		if err := os.WriteFile(filepath.Join(mem, f), []byte("0"), 0o644); err != nil {
			return Stats{}, fmt.Errorf("resetting the sandbox's %s: %w", f, err)
		}
	}
	return Stats{}, nil
}

// errAboveNewLimit: the sandbox uses more memory than the limit it was to be lowered to.
var errAboveNewLimit = errors.New("the sandbox already uses more memory than the run's limit")

// SetMemoryLimit changes the sandbox id's memory limit from old to new bytes. v1 changes
// memory.limit_in_bytes and memory.memsw.limit_in_bytes in the order the kernel accepts (memsw
// may never be below the memory limit), and refuses (EBUSY) a limit below the use. v2 writes
// memory.max (memory.swap.max stays 0), but only after checking memory.current is below new: v2
// would reclaim or kill to get there.
func (c *Cgroups) SetMemoryLimit(id string, old, new int64) error {
	val := []byte(strconv.FormatInt(new, 10))
	if c.V2() {
		dir := c.dir(id)
		if cur := readUint(filepath.Join(dir, "memory.current")); new < old && cur >= uint64(new) {
			return fmt.Errorf("lowering the memory limit to %d bytes: %w (memory.current %d)", new, errAboveNewLimit, cur)
		}
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), val, 0o644); err != nil {
			return fmt.Errorf("setting the sandbox's memory.max to %d: %w", new, err)
		}
		return nil
	}
	dir := c.v1("memory", id)
	write := func(name string) error {
		err := os.WriteFile(filepath.Join(dir, name), val, 0o644)
		if errors.Is(err, fs.ErrNotExist) && name == "memory.memsw.limit_in_bytes" {
			return nil // no swap accounting on this machine
		}
		if err != nil {
			return fmt.Errorf("setting the sandbox's %s to %d: %w", name, new, err)
		}
		return nil
	}
	files := []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
	if new > old {
		slices.Reverse(files)
	}
	for _, f := range files {
		if err := write(f); err != nil {
			return err
		}
	}
	return nil
}

// SetCPUShares gives the sandbox id shares of CPU time under contention: v1's cpu.shares, or on
// v2 the cpu.weight runsc (like runc) converts them to: 1 + (shares-2)*9999/262142, so 1024
// shares are weight 39.
func (c *Cgroups) SetCPUShares(id string, shares uint64) error {
	name, val := filepath.Join(c.v1("cpu", id), "cpu.shares"), strconv.FormatUint(shares, 10)
	if c.V2() {
		name, val = filepath.Join(c.dir(id), "cpu.weight"), strconv.FormatUint(cpuWeight(shares), 10)
	}
	if err := os.WriteFile(name, []byte(val), 0o644); err != nil {
		return fmt.Errorf("giving the sandbox its CPU shares (%s): %w", filepath.Base(name), err)
	}
	return nil
}

// cpuWeight is cgroup v2's cpu.weight for cgroup v1's cpu.shares, as runsc and runc convert it.
func cpuWeight(shares uint64) uint64 {
	if shares < 2 {
		shares = 2
	}
	if shares > 262144 {
		shares = 262144
	}
	return 1 + (shares-2)*9999/262142
}

// Procs are the processes in the sandbox id's cgroup.
func (c *Cgroups) Procs(id string) []int { return readProcs(c.procsDir(id)) }

// Kill kills every process of the sandbox id's cgroup (see killCgroupProcs).
func (c *Cgroups) Kill(id string) { killCgroupProcs(c.procsDir(id)) }

// Empty says whether no task of the sandbox id is left: v2's cgroup.events says populated 0; v1's
// tasks file is empty. Not cgroup.procs: it empties while a process's other threads still hold
// its files. ok is false when the cgroup can't be read.
func (c *Cgroups) Empty(id string) (empty, ok bool) {
	if c.V2() {
		ev, err := os.ReadFile(filepath.Join(c.dir(id), "cgroup.events"))
		if err != nil {
			return false, false
		}
		return strings.Contains(string(ev), "populated 0"), true
	}
	b, err := os.ReadFile(filepath.Join(c.procsDir(id), "tasks"))
	if err != nil {
		return false, false
	}
	return strings.TrimSpace(string(b)) == "", true
}

// Remove kills what is left in the sandbox id's cgroup and removes its folders (and any below
// them). A cgroup that isn't there is not an error.
func (c *Cgroups) Remove(id string) error {
	var errs []error
	for _, dir := range c.dirs(id) {
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if err := removeCgroupDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leftovers are the folders of the cgroups below base that ours says are a sandbox's, each with
// the name Leftovers shows ("memory/toolhost-…" on v1, the v2 path on v2).
func (c *Cgroups) leftovers(ours func(name string) bool) (dirs, names []string) {
	add := func(parent, shown string) {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() && ours(e.Name()) {
				dirs, names = append(dirs, filepath.Join(parent, e.Name())), append(names, path.Join(shown, e.Name()))
			}
		}
	}
	if c.V2() {
		add(c.dir(""), c.base)
		return dirs, names
	}
	for _, h := range c.hierarchies() {
		add(c.tree.V1[h], h)
	}
	return dirs, names
}

func readUint(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v
}

func readKeyValues(path string) map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			out[f[0]] = v
		}
	}
	return out
}

func removeCgroupDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupDir(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	var last error
	for range 50 {
		killCgroupProcs(dir)
		last = syscall.Rmdir(dir)
		if last == nil || errors.Is(last, fs.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", dir, last)
}

// killCgroupProcs kills every process of the cgroup at dir, a cgroup's folder in one hierarchy
// (e.g. /sys/fs/cgroup/pids/toolhost-0123456789), and never a process outside it:
//
//   - where the kernel has cgroup.kill (cgroup v2), it kills them all at once;
//   - otherwise the cgroup is frozen first (v1: the same path in the freezer hierarchy; v2:
//     cgroup.freeze), so nothing in it forks or exits while its pids are read and signalled; each
//     pid is signalled through a pidfd, after checking that the process it names is still a
//     member; then the cgroup is thawed so the killed processes can die.
//
// Killed processes die shortly after it returns: callers wait for cgroup.procs to empty. It
// returns the pids it signalled (none when cgroup.kill did the work).
func killCgroupProcs(dir string) []int {
	if f, err := os.OpenFile(filepath.Join(dir, "cgroup.kill"), os.O_WRONLY, 0); err == nil {
		_, werr := f.Write([]byte("1"))
		f.Close()
		if werr == nil {
			// A cgroup left frozen (a kill cut short) is thawed, so its killed processes die.
			thawCgroup(dir)
			return nil
		}
	}
	// Nothing to freeze in an empty cgroup, nor in one whose processes are all dying already
	// (killed: none of them can fork any more). Callers poll until it is empty. A kill cut short
	// between its freeze and its thaw (a crash) leaves killed processes frozen: thawed, they die.
	if pids := readProcs(dir); len(pids) == 0 || allDying(pids) {
		if len(pids) > 0 {
			thawCgroup(dir)
		}
		return nil
	}
	_, thaw := freezeCgroup(dir)
	defer thaw()
	var killed []int
	for _, pid := range readProcs(dir) {
		if signalMember(pid, dir) {
			killed = append(killed, pid)
		}
	}
	return killed
}

// readProcs reads the pids in the cgroup folder dir's cgroup.procs.
func readProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// allDying reports whether every one of pids has ended or has a SIGKILL pending: a process in
// that state cannot fork (the kernel fails a fork with a signal pending).
func allDying(pids []int) bool {
	const sigkill = uint64(1) << (syscall.SIGKILL - 1)
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			continue // ended
		}
		dying := false
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "State":
				dying = dying || strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X")
			case "SigPnd", "ShdPnd":
				mask, _ := strconv.ParseUint(v, 16, 64)
				dying = dying || mask&sigkill != 0
			}
		}
		if !dying {
			return false
		}
	}
	return true
}

// freezeWait bounds the wait for a cgroup to freeze: a process in uninterruptible sleep can hold
// it up. Past it the kill goes on unfrozen (still never signalling a non-member).
const freezeWait = 2 * time.Second

// freezer is the freeze switch of one cgroup: cgroup.freeze (v2) or the freezer hierarchy's
// freezer.state at the same path (v1).
type freezer struct {
	ctl, state     string // the file written, the file read
	on, off        string // what ctl takes to freeze and to thaw
	frozen, thawed func(state string) bool
}

// freezerOf finds the freeze switch of the cgroup at dir; ok is false where there is none.
func freezerOf(dir string) (f freezer, ok bool) {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err == nil { // cgroup v2
		return freezer{ctl: filepath.Join(dir, "cgroup.freeze"), state: filepath.Join(dir, "cgroup.events"), on: "1", off: "0",
			frozen: func(s string) bool { return strings.Contains(s, "frozen 1") },
			thawed: func(s string) bool { return strings.Contains(s, "frozen 0") }}, true
	}
	hier, rel, ok := cgroupHierarchy(dir)
	if !ok || hier == "" {
		return f, false
	}
	ctl := filepath.Join(CgroupRoot, "freezer", rel, "freezer.state")
	if _, err := os.Stat(ctl); err != nil {
		return f, false
	}
	return freezer{ctl: ctl, state: ctl, on: "FROZEN", off: "THAWED",
		frozen: func(s string) bool { return strings.TrimSpace(s) == "FROZEN" },
		thawed: func(s string) bool { return strings.TrimSpace(s) == "THAWED" }}, true
}

func (f freezer) read() string {
	b, _ := os.ReadFile(f.state)
	return string(b)
}

func (f freezer) write(v string) error {
	w, err := os.OpenFile(f.ctl, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = w.Write([]byte(v))
	return errors.Join(err, w.Close())
}

// freezeCgroup freezes the cgroup at dir and waits (bounded) until it is frozen. It reports
// whether it is, and returns the func that thaws it again (a no-op where there is no freezer).
func freezeCgroup(dir string) (frozen bool, thaw func()) {
	f, ok := freezerOf(dir)
	if !ok || f.write(f.on) != nil {
		return false, func() {}
	}
	thaw = func() { _ = f.write(f.off) }
	deadline := time.Now().Add(freezeWait)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 2*time.Millisecond) {
		if f.frozen(f.read()) {
			return true, thaw
		}
		if time.Now().After(deadline) {
			return false, thaw
		}
		time.Sleep(wait)
	}
}

// thawCgroup thaws the cgroup at dir if it is frozen, or freezing.
func thawCgroup(dir string) {
	if f, ok := freezerOf(dir); ok && !f.thawed(f.read()) {
		_ = f.write(f.off)
	}
}

// cgroupHierarchy splits a cgroup folder under CgroupRoot into its hierarchy's folder name (e.g.
// "pids", "cpu,cpuacct"; "" for a cgroup v2 mount) and the cgroup's path in it ("/toolhost-…").
func cgroupHierarchy(dir string) (hier, rel string, ok bool) {
	r, err := filepath.Rel(CgroupRoot, dir)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", "", false
	}
	if _, err := os.Stat(filepath.Join(CgroupRoot, "cgroup.controllers")); err == nil {
		return "", "/" + r, true // CgroupRoot is itself a cgroup v2 mount
	}
	hier, rest, _ := strings.Cut(r, "/")
	if hier == "unified" {
		hier = ""
	}
	return hier, "/" + rest, true
}

// signalMember sends SIGKILL to pid if, and only if, the process it names is in the cgroup at
// dir. A pidfd pins the process before its membership is read, so a pid that ends and is reused
// in between is never hit: the check then reads the new process (not a member: skipped) or the
// signal goes to the ended one (nothing happens). Without pidfds (kernels before 5.3) it signals
// by pid after the check: safe in a frozen cgroup, whose members cannot end in between.
func signalMember(pid int, dir string) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if !errors.Is(err, unix.ENOSYS) || !inCgroup(pid, dir) {
			return false
		}
		return syscall.Kill(pid, syscall.SIGKILL) == nil
	}
	defer unix.Close(fd)
	if !inCgroup(pid, dir) {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// inCgroup reports whether process pid is in the cgroup at dir or one below it.
func inCgroup(pid int, dir string) bool {
	hier, rel, ok := cgroupHierarchy(dir)
	if !ok {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return false
	}
	want := strings.Split(hier, ",")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		match := false
		if hier == "" {
			match = parts[0] == "0" && parts[1] == ""
		} else {
			for _, c := range strings.Split(parts[1], ",") {
				match = match || slices.Contains(want, strings.TrimPrefix(c, "name="))
			}
		}
		if match {
			return parts[2] == rel || strings.HasPrefix(parts[2], strings.TrimSuffix(rel, "/")+"/")
		}
	}
	return false
}
