// Command toolhost is the one binary admins run: it serves tools
// (serve), checks a config (check), reloads a running host (reload), builds
// the sandboxes' root filesystem (rootfs), lists and calls tools on a running
// host (tools, call), checks the machine (doctor), and says its version.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/toolhost/toolhost/host"
)

const usage = `toolhost runs an AI assistant's tools, each kind in a plugin process of its own, Python in gVisor.

Usage:
  toolhost serve  [--config FILE]      serve the tools of FILE; exit 78 when it has problems
  toolhost check  [--config FILE]      check FILE and every tool; exit 1 if anything is wrong
  toolhost reload [--config FILE] [--pid PID]
                                       ask the host (PID, or systemd's $MAINPID) to reload FILE and
                                       wait until it serves it; exit 1 when the host refused it
  toolhost rootfs [--config FILE] [PACKAGE ...]
                                       build the sandboxes' root filesystems: [python] rootfs, with
                                       [python] packages and the Debian PACKAGEs given, and
                                       session_rootfs, with session_packages too (1-3 minutes each)
  toolhost tools  [--addr HOST:PORT]   list the tools of a running host
  toolhost call   [--addr HOST:PORT] [--token T] [--json] TOOL [name=value ...]
                                       call a tool, streaming what it prints; exits 0 on a
                                       result, 1 when the run failed, 2 on a usage or
                                       connection error (token: --token or $TOOLHOST_TOKEN)
  toolhost doctor [--config FILE]      check this machine can run each kind's tools
  toolhost plugins pin NAME [--config FILE]
                                       start the plugin of kind NAME once, show its SHA-256,
                                       version and protocol, and write its pin into FILE's
                                       [plugins.sha256] (kept by upgrades), or into the pins
                                       file ([plugins] sha256_file) when that pins NAME
  toolhost plugins list [--config FILE]
                                       every plugin and pinned kind: pin state, version and
                                       protocol (starts only plugins that match their pin)
                                       plugins exits 0 when all is well, 1 when something is
                                       wrong, 2 on a usage error
  toolhost version                     print the version

FILE is /etc/toolhost/toolhost.toml unless --config names another.
`

type command func(args []string, stdout, stderr io.Writer) int

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	commands := map[string]command{
		"serve":   runServe,
		"check":   runCheck,
		"reload":  runReload,
		"rootfs":  runRootfs,
		"tools":   runTools,
		"doctor":  runDoctor,
		"call":    runCall,
		"plugins": runPlugins,
		"version": runVersion,
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "toolhost: %q is not a command\n\n%s", args[0], usage)
		return 2
	}
	return cmd(args[1:], stdout, stderr)
}

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintf(stdout, "toolhost %s\n", host.Version)
	return 0
}
