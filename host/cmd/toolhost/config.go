package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
)

// defaultConfig is the config of an installed toolhost, which every command
// reads when --config does not name another.
const defaultConfig = "/etc/toolhost/toolhost.toml"

// loadConfig reads the config that --config in args names (defaultConfig
// without it) for the command name, and writes its problems, each at
// file:line, to stderr: ok is false then, or when args are wrong.
func loadConfig(name string, args []string, stderr io.Writer) (*config.Config, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfig, "the config file")
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolhost %s: unexpected argument %q (the config is given with --config FILE)\n", name, fs.Arg(0))
		return nil, false
	}
	cfg, err := config.Load(*path)
	if err != nil {
		if n := printConfigErrors(stderr, "toolhost", err); n > 0 {
			fmt.Fprintf(stderr, "toolhost: %s has %d problem(s); nothing was started\n", *path, n)
		}
		return nil, false
	}
	return cfg, true
}

// printConfigErrors writes what config.Load said is wrong to w: each problem of the file on a
// line of its own (file:line: field: what), and returns how many; any other error (the file
// can't be read) on one line after who, returning 0.
func printConfigErrors(w io.Writer, who string, err error) int {
	var ce config.Errors
	if !errors.As(err, &ce) {
		fmt.Fprintf(w, "%s: %v\n", who, err)
		return 0
	}
	for _, e := range ce {
		fmt.Fprintln(w, e.Error())
	}
	return len(ce)
}

// newLogger is the host's logger as cfg's [log] sets it, writing to w.
func newLogger(cfg *config.Config, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "toolhost",
		Level:      hclog.LevelFromString(cfg.Log.Level),
		JSONFormat: cfg.Log.Format == "json",
		Output:     w,
	})
}
