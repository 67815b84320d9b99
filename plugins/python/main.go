// Command toolhost-plugin-python is the python tool kind: every run of a tool's code, and every
// check of it, happens in a fresh gVisor sandbox (package runsc) with its own read-only root
// filesystem, capped /work and /tmp, cgroup limits, rlimits and no network unless the tool says
// network = true. What the code prints streams back as it is printed; the cause of every stop is
// read from the sandbox's cgroup and the runner's exit status.
package main

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

func main() {
	k := newKind(kindOptions{Logger: sdk.Logger("python")})
	sdk.Serve(k)
	// The host stopped the plugin: no sandbox may outlive it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = k.Close(ctx)
}
