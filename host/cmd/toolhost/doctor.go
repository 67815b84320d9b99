package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
)

// runDoctor is `toolhost doctor [--config FILE]`: it starts the kinds' plugins of FILE (default
// /etc/toolhost/toolhost.toml; the defaults when there is none) and asks each, over the plugin protocol, to check line by line that this
// machine can run its tools with its settings of FILE; each failing line says how to fix it. It
// exits 1 when any line fails or a plugin could not be asked. The host knows no kind's checks.
func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfig, "the toolhost.toml whose plugins and kinds' settings are checked (without one: the defaults)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolhost doctor: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg := config.Default()
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "config" })
	if _, err := os.Stat(*path); err != nil && !given {
		*path = "" // no installed config: check with the defaults
	}
	if *path != "" {
		c, err := config.Load(*path)
		if err != nil {
			fmt.Fprintf(stderr, "toolhost doctor: %v\n", err)
			return 1
		}
		cfg = c
	}
	enterDelegatedScope("doctor", args, stderr) // on cgroup v2 the python kind's checks need the delegated cgroup serve would have
	ctx, cancel := signalContext(2 * time.Minute)
	defer cancel()
	reports, problems := host.Doctor(ctx, cfg, hclog.NewNullLogger())
	bad := len(problems) > 0
	for _, p := range problems {
		fmt.Fprintf(stderr, "toolhost doctor: %v\n", p.Err)
	}
	for _, r := range reports {
		fmt.Fprintf(stdout, "[%s] plugin version %s, plugin protocol %d\n", r.Kind, r.Version, r.Protocol)
		if len(r.Checks) == 0 {
			fmt.Fprintln(stdout, "nothing of this machine to check")
			continue
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		failed := 0
		for _, c := range r.Checks {
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
		switch {
		case failed > 0:
			bad = true
			fmt.Fprintf(stdout, "%d of %d checks failed: %s tools can't run on this machine until they pass\n", failed, len(r.Checks), r.Kind)
		case r.Summary != "":
			fmt.Fprintln(stdout, r.Summary)
		default:
			fmt.Fprintf(stdout, "this machine can run %s tools\n", r.Kind)
		}
	}
	if bad {
		return 1
	}
	return 0
}
