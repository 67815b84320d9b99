// Package stopcause decides why a sandboxed python run stopped, for both of the python kind's run
// paths: a tool's one-shot run and a run in a conversation session. The cause comes from what the
// host did (cancel, time, output), the sandbox's cgroup counters before and after the run, and
// what the run itself reported (its exit status, the runner's answer), never from printed text.
// Each path names the cause on its own wire ("processes" for tool runs, "pids" for session runs)
// and writes its own message.
package stopcause

import "github.com/toolhost/toolhost/runsc/sandbox"

// Cause is why a run stopped.
type Cause int

// The causes, in the order Of weighs them.
const (
	// None: nothing stopped the run; it ended as the code did.
	None Cause = iota
	// Cancelled: the caller cancelled the run.
	Cancelled
	// Stopped: the host stopped the sandbox for a reason of its own (its session ended).
	Stopped
	// Timeout: the run took longer than its time.
	Timeout
	// Output: the code printed more than its output limit.
	Output
	// Memory: the code used more memory than its limit.
	Memory
	// Processes: the code started more processes (or threads) than its limit.
	Processes
	// CPU: the code used more CPU time than its limit.
	CPU
	// Disk: the code ran out of disk space.
	Disk
	// Died: the sandbox (or the code's runner) ended before the code did, for none of the causes
	// above.
	Died
)

var names = [...]string{"none", "cancelled", "stopped", "timeout", "output", "memory", "processes", "cpu", "disk", "died"}

// String is the cause's name in logs and tests, not on any wire.
func (c Cause) String() string {
	if c < 0 || int(c) >= len(names) {
		return "unknown"
	}
	return names[c]
}

// Facts are what a run path knows when its run has ended.
type Facts struct {
	// Before and After are the sandbox's counters when the run started and when it ended (a
	// sandbox of its own starts at zero).
	Before, After sandbox.Stats
	// Cancelled: the caller cancelled the run.
	Cancelled bool
	// Stopped: the host stopped the sandbox while the code ran.
	Stopped bool
	// TimedOut: the host's timer ran out.
	TimedOut bool
	// OutputCut: the code printed more than its output limit and was stopped.
	OutputCut bool
	// Died: the sandbox, or the code's runner, ended before the code finished (no answer came).
	Died bool
	// Failed: the code did not finish well (an error, a status other than 0).
	Failed bool
	// MemoryError: the code reported running out of memory (Python's MemoryError).
	MemoryError bool
	// CPUOver: the code's CPU limit stopped it (the runner says so).
	CPUOver bool
	// TimeOver: the run's time ran out in the sandbox (the runner says so).
	TimeOver bool
	// DiskFull: the code failed on a full disk.
	DiskFull bool
}

// Of is why the run of f stopped. What the host did comes first, then the cgroup (a memory limit
// hit only counts when the run died of it: the kernel reclaims and the code goes on; a process
// limit hit only when the code failed: it may have coped), then what the run reported.
func Of(f Facts) Cause {
	switch {
	case f.Cancelled:
		return Cancelled
	case f.Stopped:
		return Stopped
	case f.TimedOut:
		return Timeout
	case f.OutputCut:
		return Output
	case f.After.OOMKills > f.Before.OOMKills || f.Died && f.After.MemoryLimitHits > f.Before.MemoryLimitHits || f.MemoryError:
		return Memory
	case f.After.PidsLimitHits > f.Before.PidsLimitHits && (f.Died || f.Failed):
		return Processes
	case f.CPUOver:
		return CPU
	case f.TimeOver:
		return Timeout
	case f.DiskFull:
		return Disk
	case f.Died:
		return Died
	}
	return None
}
