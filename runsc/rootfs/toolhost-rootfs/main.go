// Command toolhost-rootfs builds the python kind's sandbox root filesystem for a toolhost config:
// `toolhost rootfs` runs it (it is installed beside the plugins), and so does `make rootfs`.
//
//	toolhost-rootfs [--config FILE] [--out DIR] [PACKAGE...]
//
// PACKAGEs are Debian packages built in besides those of [python] packages.
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
	config := fs.String("config", "/etc/toolhost/toolhost.toml", "the toolhost config whose [python] rootfs and packages are built")
	out := fs.String("out", "", "build here instead of the config's [python] rootfs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	plan, err := rootfs.PlanFor(*config)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost rootfs: %v\n", err)
		return 1
	}
	if *out != "" {
		plan.Dir = *out
	}
	plan.Packages = append(plan.Packages, fs.Args()...)
	fmt.Fprintf(stdout, "toolhost rootfs: the sandboxes' root filesystem is %s: Debian bookworm with python3 and %s.\n"+
		"A first build downloads about 60 MB with debootstrap and takes one to three minutes; later runs rebuild only when the packages change.\n",
		plan.Dir, strings.Join(plan.Packages, ", "))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := rootfs.Build(ctx, plan, stdout); err != nil {
		fmt.Fprintf(stderr, "toolhost rootfs: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "toolhost rootfs: done in %s\n", time.Since(start).Round(100*time.Millisecond))
	return 0
}
