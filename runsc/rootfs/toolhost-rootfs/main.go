// Command toolhost-rootfs builds the python kind's sandbox root filesystems for a toolhost config:
// the rootfs of one-shot tool runs ([python] rootfs) and the session rootfs of conversation
// sandboxes ([python] session_rootfs, with session_packages besides). `toolhost rootfs` runs it
// (it is installed beside the plugins), and so does `make rootfs`.
//
//	toolhost-rootfs [--config FILE] [--out DIR] [--session-out DIR] [--sessions=false] [PACKAGE...]
//
// PACKAGEs are Debian packages built into both besides those of [python] packages;
// --sessions=false builds the rootfs alone (a tree of other packages, as make systemd-tree's).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/runsc/rootfs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolhost rootfs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "/etc/toolhost/toolhost.toml", "the toolhost config whose [python] rootfs, session_rootfs and their packages are built")
	out := fs.String("out", "", "build the rootfs here instead of the config's [python] rootfs")
	sessionOut := fs.String("session-out", "", "build the session rootfs here instead of the config's [python] session_rootfs")
	sessions := fs.Bool("sessions", true, "build the session rootfs too")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	plans, err := rootfs.PlanFor(*config)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost rootfs: %v\n", err)
		return 1
	}
	if *out != "" {
		plans.Rootfs.Dir = *out
	}
	if *sessionOut != "" {
		plans.Sessions.Dir = *sessionOut
	}
	if *sessions && plans.Rootfs.Dir == plans.Sessions.Dir {
		fmt.Fprintf(stderr, "toolhost rootfs: the rootfs and the session rootfs are both %s: give each a folder of its own\n", plans.Rootfs.Dir)
		return 2
	}
	plans.AddPackages(fs.Args())
	builds := []rootfs.Plan{plans.Rootfs, plans.Sessions}
	if !*sessions {
		builds = builds[:1]
		fmt.Fprintf(stdout, "toolhost rootfs: building %s: Debian bookworm with python3 and %s.\n", plans.Rootfs.Dir, strings.Join(plans.Rootfs.Packages, ", "))
	} else {
		fmt.Fprintf(stdout, "toolhost rootfs: the sandboxes' root filesystems are %s for tool runs (Debian bookworm with python3 and %s)\n"+
			"and %s for conversation sandboxes (with %s).\n"+
			"A first build downloads about 60 MB (the session rootfs several hundred more) with debootstrap and takes one to three minutes each;\n"+
			"later runs rebuild only when the packages change.\n",
			plans.Rootfs.Dir, strings.Join(plans.Rootfs.Packages, ", "), plans.Sessions.Dir, strings.Join(plans.Sessions.Packages, ", "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, plan := range builds {
		start := time.Now()
		if err := rootfs.Build(ctx, plan, stdout); err != nil {
			fmt.Fprintf(stderr, "toolhost rootfs: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "toolhost rootfs: %s done in %s\n", plan.Dir, time.Since(start).Round(100*time.Millisecond))
	}
	return 0
}
