package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/runsc"
)

// runDoctor is `toolhost doctor [--config FILE]`: it checks, line by line, that this machine can
// run the python kind's sandboxes with the settings of FILE (the defaults without one), and
// says how to fix each failing line. It exits 1 when any line fails.
func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the toolhost.toml whose [python] settings are checked")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolhost doctor: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg := config.Default()
	if *path != "" {
		c, err := config.Load(*path)
		if err != nil {
			fmt.Fprintf(stderr, "toolhost doctor: %v\n", err)
			return 1
		}
		cfg = c
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	py := cfg.Python
	checks := runsc.Doctor(ctx, runsc.DoctorOptions{
		Runsc: py.Runsc, Rootfs: py.Rootfs, StateDir: py.StateDir, Platform: py.Platform, Prefix: py.SandboxPrefix,
	})
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	failed := 0
	for _, c := range checks {
		mark := "ok"
		if !c.OK {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", mark, c.Name, c.Detail)
		if !c.OK && c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	_ = tw.Flush()
	if failed > 0 {
		fmt.Fprintf(stdout, "%d of %d checks failed: python tools can't run on this machine until they pass\n", failed, len(checks))
		return 1
	}
	fmt.Fprintln(stdout, "this machine can run python tools in gVisor sandboxes")
	return 0
}
