package integration

import (
	"context"
	"fmt"
	"time"
)

// machine is a booted Debian with systemd that a test drives as its operator would, as root: the
// systemd-nspawn container (this machine's kernel and its hybrid cgroup v1 tree) and the QEMU VMs
// (stock Debian 12 and 13 kernels, cgroup v2 only). operatorFlow runs the same steps on each.
type machine interface {
	// name says which machine it is in messages ("the container", "the trixie VM").
	name() string
	// command starts args in the machine, as root, with a clean environment (PATH, LANG=C.UTF-8,
	// no pager, no colours), and returns at once; wait returns what it printed (stdout and stderr
	// together) and how it ended (an *exitError for a non-zero status). Cancelling ctx kills it.
	command(ctx context.Context, args ...string) (wait func() (string, error))
	// run runs args, bounded by cmdTimeout, and writes the command, its time and what it printed
	// to the transcript.
	run(args ...string) (string, error)
	// quiet runs args for a check, bounded, and keeps it out of the transcript.
	quiet(args ...string) string
	// must is run that fails the test when the command fails.
	must(args ...string) string
	// write writes content to the absolute path p in the machine (folders made, mode 0644).
	write(p, content string)
	// read reads the absolute path p in the machine.
	read(p string) (string, error)
	// note writes to the transcript.
	note(what, out string, err error)
	// slowdown is how much slower than this machine a command runs there: 1 for the container,
	// about 10 for a VM under TCG. Waits of the flow are multiplied by it.
	slowdown() float64
	// cgroupV2 says whether the machine's cgroups are v2 only.
	cgroupV2() bool
}

// scaled is d on machine m: d times its slowdown.
func scaled(m machine, d time.Duration) time.Duration {
	return time.Duration(float64(d) * m.slowdown())
}

// cmdTimeout bounds a command of run and must on a machine whose slowdown is 1.
const cmdTimeout = 3 * time.Minute

// exitError is how a command in a machine ended when it did not end with status 0.
type exitError struct {
	// status is the command's exit status; -1 when it ended by a signal or was killed.
	status int
}

func (e *exitError) Error() string {
	if e.status < 0 {
		return "killed"
	}
	return fmt.Sprintf("exit status %d", e.status)
}
