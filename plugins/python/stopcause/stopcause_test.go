package stopcause

import (
	"testing"

	"github.com/toolhost/toolhost/runsc/sandbox"
)

// TestOf: the host's doing beats the cgroup, the cgroup beats the run's own report, and counters
// count only what changed during the run.
func TestOf(t *testing.T) {
	oom := sandbox.Stats{OOMKills: 1}
	memHits := sandbox.Stats{MemoryLimitHits: 3}
	pidHits := sandbox.Stats{PidsLimitHits: 1}
	cases := []struct {
		name string
		f    Facts
		want Cause
	}{
		{"nothing", Facts{}, None},
		{"a clean exit with limit hits", Facts{After: sandbox.Stats{MemoryLimitHits: 3, PidsLimitHits: 1}}, None},
		{"a failed exit", Facts{Failed: true}, None},
		{"cancelled beats everything", Facts{Cancelled: true, Stopped: true, TimedOut: true, After: oom}, Cancelled},
		{"stopped beats time", Facts{Stopped: true, TimedOut: true}, Stopped},
		{"time beats the cgroup", Facts{TimedOut: true, After: oom}, Timeout},
		{"time beats output", Facts{TimedOut: true, OutputCut: true}, Timeout},
		{"output beats the cgroup", Facts{OutputCut: true, After: oom}, Output},
		{"an oom kill", Facts{After: oom, Failed: true}, Memory},
		{"an oom kill before the run doesn't count", Facts{Before: oom, After: oom, Failed: true}, None},
		{"memory hits when it died", Facts{Died: true, After: memHits}, Memory},
		{"memory hits when it lived", Facts{Failed: true, After: memHits}, None},
		{"memory hits before the run don't count", Facts{Died: true, Before: memHits, After: memHits}, Died},
		{"MemoryError", Facts{MemoryError: true, Failed: true}, Memory},
		{"memory beats processes", Facts{Died: true, After: sandbox.Stats{OOMKills: 1, PidsLimitHits: 1}}, Memory},
		{"process hits when it failed", Facts{Failed: true, After: pidHits}, Processes},
		{"process hits when it died", Facts{Died: true, After: pidHits}, Processes},
		{"process hits when it finished", Facts{After: pidHits}, None},
		{"process hits before the run don't count", Facts{Failed: true, Before: pidHits, After: pidHits}, None},
		{"processes beat disk", Facts{Failed: true, DiskFull: true, After: pidHits}, Processes},
		{"cpu", Facts{CPUOver: true, Failed: true}, CPU},
		{"the runner's timeout", Facts{TimeOver: true, Failed: true}, Timeout},
		{"the cgroup beats the runner's timeout", Facts{TimeOver: true, Failed: true, After: oom}, Memory},
		{"disk", Facts{DiskFull: true, Failed: true}, Disk},
		{"disk beats a death", Facts{DiskFull: true, Died: true}, Disk},
		{"died", Facts{Died: true, Failed: true}, Died},
	}
	for _, tc := range cases {
		if got := Of(tc.f); got != tc.want {
			t.Errorf("%s: Of(%+v) = %v; want %v", tc.name, tc.f, got, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	for c, want := range map[Cause]string{None: "none", Processes: "processes", Died: "died", Cause(99): "unknown"} {
		if got := c.String(); got != want {
			t.Errorf("Cause(%d).String() = %q; want %q", int(c), got, want)
		}
	}
}
