package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupRoot is where cgroup v1 controllers are mounted on this kind of machine.
const CgroupRoot = "/sys/fs/cgroup"

// Stats are what a sandbox's cgroup recorded: the facts the cause of a stop is read from.
type Stats struct {
	// MemoryLimitHits is memory.failcnt: how often usage reached the limit.
	MemoryLimitHits uint64
	// OOMKills is the oom_kill count of memory.oom_control: processes the kernel killed for it.
	OOMKills uint64
	// UnderOOM is memory.oom_control's under_oom.
	UnderOOM bool
	// MemoryMaxBytes is memory.max_usage_in_bytes, MemoryBytes memory.usage_in_bytes.
	MemoryMaxBytes, MemoryBytes uint64
	// PidsLimitHits is the "max" count of pids.events: forks refused by the pids limit.
	PidsLimitHits uint64
	// Pids is pids.current.
	Pids uint64
	// CPU is cpuacct.usage.
	CPU time.Duration
}

// ReadStats reads the cgroup v1 files of the cgroup at path (e.g. "/toolhost-0123456789").
// Files that are missing are left at zero; the error reports only a cgroup that isn't there.
func ReadStats(path string) (Stats, error) {
	var s Stats
	mem := filepath.Join(CgroupRoot, "memory", path)
	if _, err := os.Stat(mem); err != nil {
		return s, fmt.Errorf("the sandbox's memory cgroup is gone: %w", err)
	}
	s.MemoryLimitHits = readUint(filepath.Join(mem, "memory.failcnt"))
	s.MemoryMaxBytes = readUint(filepath.Join(mem, "memory.max_usage_in_bytes"))
	s.MemoryBytes = readUint(filepath.Join(mem, "memory.usage_in_bytes"))
	kv := readKeyValues(filepath.Join(mem, "memory.oom_control"))
	s.OOMKills, s.UnderOOM = kv["oom_kill"], kv["under_oom"] == 1
	pids := filepath.Join(CgroupRoot, "pids", path)
	s.PidsLimitHits = readKeyValues(filepath.Join(pids, "pids.events"))["max"]
	s.Pids = readUint(filepath.Join(pids, "pids.current"))
	s.CPU = time.Duration(readUint(filepath.Join(CgroupRoot, "cpuacct", path, "cpuacct.usage")))
	return s, nil
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

// cgroupControllers lists the mounted cgroup v1 hierarchies (memory, pids, cpu, …).
func cgroupControllers() []string {
	entries, err := os.ReadDir(CgroupRoot)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "unified" {
			out = append(out, e.Name())
		}
	}
	return out
}

// removeCgroup kills what is left in the cgroup at path and removes its folder (and any below it)
// in every hierarchy. A cgroup that isn't there is not an error.
func removeCgroup(path string) error {
	var errs []error
	for _, c := range cgroupControllers() {
		dir := filepath.Join(CgroupRoot, c, path)
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if err := removeCgroupDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
