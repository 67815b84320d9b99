package runsc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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

func killCgroupProcs(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
