// Command toolhost-plugin-python is the python tool kind: every run of a tool's code, and every
// check of it, happens in a fresh gVisor sandbox (package runsc) with its own read-only root
// filesystem, capped /work and /tmp, cgroup limits, rlimits and no network unless the tool says
// network = true. Sandboxes are kept ready in a pool ([python.pool]), each taking exactly one run.
// What the code prints streams back as it is printed; the cause of every stop is read from the
// sandbox's cgroup and the runner's exit status.
package main

import (
	"github.com/toolhost/toolhost/sdk"
)

// Serve closes the kind when the plugin stops.
var _ sdk.Closer = (*kind)(nil)

func main() {
	k := newKind(kindOptions{Logger: sdk.Logger("python"), CheckOnly: sdk.CheckOnly()})
	// Stopped by a signal (systemctl stop sends SIGTERM to every process of the unit) or by the
	// host, Serve closes the kind (kind.Close, an sdk.Closer): no sandbox may outlive the plugin.
	// After a SIGKILL of the plugin alone each sandbox ends by itself (its runner sees the
	// control socket close), and a later start sweeps what they leave on the host; on cgroup v2
	// they live inside the unit's cgroup, which systemd empties when the unit stops.
	sdk.Serve(k)
}
