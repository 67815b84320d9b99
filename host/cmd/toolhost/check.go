package main

import (
	"context"
	"fmt"
	"io"

	"github.com/toolhost/toolhost/host"
)

// runCheck is `toolhost check`: it applies every rule serve applies to the
// config, its plugins and its tools, printing each problem at file:line,
// without taking anything a running host holds (safe beside one).
func runCheck(args []string, stdout, stderr io.Writer) int {
	cfg, ok := loadConfig("check", args, stderr)
	if !ok {
		return 1
	}
	enterDelegatedScope("check", args, stderr)
	log := newLogger(cfg, io.Discard)
	h := host.NewForCheck(cfg, log)
	problems := h.Start(context.Background())
	defer h.Stop()
	for _, e := range problems.Config {
		fmt.Fprintln(stderr, e.Error())
	}
	for _, p := range problems.Plugins {
		fmt.Fprintln(stderr, p.Err)
	}
	for _, e := range problems.Tools {
		fmt.Fprintln(stderr, e.Error())
	}
	if !problems.Empty() {
		fmt.Fprintf(stderr, "toolhost check: %d problem(s)\n", problems.Count())
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", cfg.File)
	return 0
}
