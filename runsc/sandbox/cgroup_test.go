package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// testCgroup makes a cgroup of the test's own (pids.max bounds what runs in it) and removes it
// when the test ends, killing whatever is left by hand, without the code under test. On v1 it is
// a cgroup in the freezer and in the pids hierarchy; on v2 one cgroup below the delegated one,
// which is both.
func testCgroup(t *testing.T) (id string, pids, freezer string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	cg, err := OpenCgroups()
	if err != nil {
		t.Fatal(err)
	}
	prefix := testEnv.Prefix
	if prefix == "" {
		prefix = "thtcg-"
	}
	if id, err = NewID(prefix); err != nil {
		t.Fatal(err)
	}
	if cg.V2() {
		if err := cg.Prepare(); err != nil {
			t.Fatal(err)
		}
		pids = cg.dir(id)
		freezer = pids
	} else {
		freezerRoot := filepath.Join(CgroupRoot, "freezer")
		if _, err := os.Stat(filepath.Join(freezerRoot, "freezer.state")); err != nil && !sandboxtest.Exists(filepath.Join(freezerRoot, "cgroup.procs")) {
			t.Skip("no cgroup v1 freezer at " + freezerRoot)
		}
		pids, freezer = filepath.Join(CgroupRoot, "pids", id), filepath.Join(freezerRoot, id)
	}
	for _, d := range []string{pids, freezer} {
		if err := os.Mkdir(d, 0o755); err != nil && !(errors.Is(err, fs.ErrExist) && d == pids) {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pids, "pids.max"), []byte("2000"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cg.V2() {
			_ = os.WriteFile(filepath.Join(pids, "cgroup.kill"), []byte("1"), 0o644)
			_ = os.WriteFile(filepath.Join(pids, "cgroup.freeze"), []byte("0"), 0o644)
		} else {
			_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("FROZEN"), 0o644)
			for range 200 {
				if b, _ := os.ReadFile(filepath.Join(freezer, "freezer.state")); strings.TrimSpace(string(b)) == "FROZEN" {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			b, _ := os.ReadFile(filepath.Join(freezer, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("THAWED"), 0o644)
		}
		for _, d := range []string{pids, freezer} {
			var err error
			for range 250 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, fs.ErrNotExist) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("removing the test's cgroup %s: %v", d, err)
			}
		}
	})
	return id, pids, freezer
}

// thawed says whether the cgroup whose freeze switch is at freezer is thawed: freezer.state
// THAWED (v1), frozen 0 in cgroup.events (v2).
func thawed(freezer string) bool {
	f, ok := freezerOf(freezer)
	return ok && f.thawed(f.read())
}

// startIn starts sh -c script as a process that moves itself into the cgroups (by their
// cgroup.procs files) before it runs anything else.
func startIn(t *testing.T, script string, cgroupDirs ...string) *exec.Cmd {
	t.Helper()
	move := ""
	for _, d := range cgroupDirs {
		move += "echo $$ > " + filepath.Join(d, "cgroup.procs") + " && "
	}
	cmd := exec.Command("/bin/sh", "-c", move+script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd
}

func procsOf(dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return strings.Fields(string(b))
}

// alive reports whether pid is a process that has not ended (a zombie has ended).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestKillCgroupEmptiesAForkingCgroupInOneCall: processes that fork and exit as fast as they can
// (so every pid read is stale at once: the way a fork bomb slips past a kill by pid) are all
// gone after one killCgroupProcs, and a process outside the cgroup lives on.
func TestKillCgroupEmptiesAForkingCgroupInOneCall(t *testing.T) {
	_, pids, freezer := testCgroup(t)
	outside := exec.Command("/bin/sleep", "300")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outside.Process.Kill(); _ = outside.Wait() }()

	// 200 sleepers, then 32 chains of hoppers, each process starting the next and ending at
	// once. The hoppers' pids come after the sleepers', so a kill by pid in pid order reaches
	// them last, long after it read them.
	startIn(t, `i=0; while [ $i -lt 200 ]; do sleep 300 & i=$((i+1)); done
hop() { hop & }; i=0; while [ $i -lt 32 ]; do hop & i=$((i+1)); done; exec sleep 300`, freezer, pids)
	deadline := time.Now().Add(60 * time.Second)
	for len(procsOf(pids)) < 220 {
		if time.Now().After(deadline) {
			t.Fatalf("the hoppers didn't start: %v", procsOf(pids))
		}
		time.Sleep(5 * time.Millisecond)
	}

	killed := killCgroupProcs(pids)
	deadline = time.Now().Add(10 * time.Second)
	for len(procsOf(pids)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := procsOf(pids); len(left) > 0 {
		t.Errorf("one kill left %d processes in the cgroup (it signalled %d)", len(left), len(killed))
	}
	if !thawed(freezer) {
		t.Errorf("the cgroup was left frozen")
	}
	if !alive(outside.Process.Pid) {
		t.Error("a process outside the cgroup was killed")
	}
}

// TestKillCgroupSignalsOnlyMembers: a pid list gone stale (its process ended and the pid now
// names someone else's process) never gets a process outside the cgroup killed.
func TestKillCgroupSignalsOnlyMembers(t *testing.T) {
	_, pids, freezer := testCgroup(t)
	outside := exec.Command("/bin/sleep", "300")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outside.Process.Kill(); _ = outside.Wait() }()
	member := startIn(t, "exec sleep 300", freezer, pids)
	deadline := time.Now().Add(10 * time.Second)
	for !inCgroup(member.Process.Pid, pids) {
		if time.Now().After(deadline) {
			t.Fatal("the member didn't join the cgroup")
		}
		time.Sleep(5 * time.Millisecond)
	}

	if signalMember(outside.Process.Pid, pids) {
		t.Error("signalMember signalled a process outside the cgroup")
	}
	if !signalMember(member.Process.Pid, pids) {
		t.Error("signalMember didn't signal a member")
	}
	deadline = time.Now().Add(10 * time.Second)
	for alive(member.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if alive(member.Process.Pid) {
		t.Error("the member lives on")
	}
	if !alive(outside.Process.Pid) {
		t.Error("a process outside the cgroup was killed")
	}
}

// TestKillCgroupThawsKilledFrozenProcesses: a kill cut short between its freeze and its thaw (a
// crash) leaves killed processes frozen, where they never die; the next kill thaws them.
func TestKillCgroupThawsKilledFrozenProcesses(t *testing.T) {
	_, pids, freezer := testCgroup(t)
	member := startIn(t, "exec sleep 300", freezer, pids)
	deadline := time.Now().Add(10 * time.Second)
	for !inCgroup(member.Process.Pid, pids) {
		if time.Now().After(deadline) {
			t.Fatal("the member didn't join the cgroup")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if frozen, _ := freezeCgroup(pids); !frozen {
		t.Fatal("the cgroup didn't freeze")
	}
	_ = syscall.Kill(member.Process.Pid, syscall.SIGKILL)
	// On v1 the frozen process keeps its SIGKILL pending; the v2 freezer lets a fatal signal
	// through, and the process passes from pending to dead (a zombie: the test reaps it later)
	// in a moment where neither shows.
	deadline = time.Now().Add(2 * time.Second)
	for !allDying([]int{member.Process.Pid}) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !allDying([]int{member.Process.Pid}) {
		t.Error("a killed process isn't seen as dying")
	}

	killCgroupProcs(pids)
	deadline = time.Now().Add(10 * time.Second)
	for len(procsOf(pids)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := procsOf(pids); len(left) > 0 {
		t.Errorf("killed processes left frozen in the cgroup: %v", left)
	}
	if !thawed(freezer) {
		t.Errorf("the cgroup was left frozen")
	}
}

// TestCPUWeightIsRunscs: cgroup v2's cpu.weight for cpu.shares is the conversion runsc (like
// runc) applies to the spec's shares; TestPoolHandOutSetsTheRunsLimits reads what runsc wrote.
func TestCPUWeightIsRunscs(t *testing.T) {
	for shares, want := range map[uint64]uint64{2: 1, 128: 5, 256: 10, 1024: 39, 262144: 10000, 0: 1, 1 << 30: 10000} {
		if got := cpuWeight(shares); got != want {
			t.Errorf("cpuWeight(%d) = %d; want %d", shares, got, want)
		}
	}
}

// TestStatsCountFromTheBaseline: on v2 a sandbox's counters run on from its wait in the pool;
// what its run did is the difference, and the peak and current use are kept as read.
func TestStatsCountFromTheBaseline(t *testing.T) {
	base := Stats{MemoryLimitHits: 3, OOMKills: 1, PidsLimitHits: 2, CPU: time.Second, MemoryBytes: 10}
	now := Stats{MemoryLimitHits: 5, OOMKills: 1, PidsLimitHits: 2, CPU: 3 * time.Second, MemoryBytes: 20, MemoryMaxBytes: 30}
	got := now.since(base)
	want := Stats{MemoryLimitHits: 2, CPU: 2 * time.Second, MemoryBytes: 20, MemoryMaxBytes: 30}
	if got != want {
		t.Errorf("since = %+v; want %+v", got, want)
	}
	if (Stats{}).since(base) != (Stats{}) {
		t.Error("counters below the baseline (a reset cgroup) must read zero")
	}
}
