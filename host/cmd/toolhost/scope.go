package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/toolhost/toolhost/internal/cgroupfs"
)

// scopeEnv is set (to 1) in the environment of a toolhost that re-ran itself in a delegated
// systemd scope, so that it does not do so again when its cgroup is still not delegated.
const scopeEnv = "TOOLHOST_SCOPE"

// systemdRunning is the folder that is there when systemd is the machine's init (sd_booted).
const systemdRunning = "/run/systemd/system"

// scopeFacts is what decides whether a command re-runs itself in a delegated systemd scope.
type scopeFacts struct {
	// command is the toolhost command: "serve", "check" or "doctor".
	command string
	// pid is this process's id, which names the scope.
	pid int
	// cgroups is the machine's kind of cgroup tree.
	cgroups cgroupfs.Version
	// cgroup is this process's cgroup v2 path (on V2 only).
	cgroup string
	// notDelegated says why cgroup is not delegated (cgroupfs.Delegated's error); nil when it is,
	// or when the tree is not V2.
	notDelegated error
	// uid is the process's effective user id: only root may make a scope of the system manager
	// without asking, and the python kind runs as root only.
	uid int
	// systemd says whether systemd is the machine's init (/run/systemd/system is a folder).
	systemd bool
	// systemdRun is the path of systemd-run on PATH; "" when there is none.
	systemdRun string
	// lookupEnv reads the environment, as os.LookupEnv.
	lookupEnv func(key string) (string, bool)
}

// scopeDecision is what a command does about its cgroup before it starts any plugin.
type scopeDecision struct {
	// unit is the scope to re-run the command in (toolhost-<command>-<pid>, without ".scope");
	// "" when the command goes on as it is.
	unit string
	// warning is, for serve only, why it goes on in a cgroup the python kind can't make sandboxes
	// below; "" when there is nothing to warn of.
	warning string
}

// decideScope says whether the command re-runs itself in a delegated systemd scope: on a cgroup
// v2 machine the python kind makes each sandbox's cgroup below the cgroup systemd delegated to
// toolhost, and a command run from an operator's shell is in the shell's session scope, which is
// not delegated. It re-runs when systemd runs the machine, systemd-run is on PATH, it is root, it
// has not re-run already (TOOLHOST_SCOPE), and, for serve, it was not started by systemd
// (NOTIFY_SOCKET: then the unit must delegate). Otherwise it goes on; serve warns.
func decideScope(f scopeFacts) scopeDecision {
	if f.cgroups != cgroupfs.V2 || f.notDelegated == nil {
		return scopeDecision{}
	}
	var why string
	_, reRan := f.lookupEnv(scopeEnv)
	_, underSystemd := f.lookupEnv("NOTIFY_SOCKET")
	switch {
	case reRan:
		why = fmt.Sprintf("toolhost already runs in the scope it made (%s is set), and its cgroup is still not delegated", scopeEnv)
	case f.command == "serve" && underSystemd:
		why = "toolhost was started by systemd (NOTIFY_SOCKET is set), so its unit must delegate its cgroup: add Delegate=yes to the unit's [Service]"
	case f.uid != 0:
		why = fmt.Sprintf("toolhost runs as uid %d, not root, so it can't make a delegated systemd scope of its own: run it as root", f.uid)
	case !f.systemd:
		why = fmt.Sprintf("systemd does not run this machine (no %s), so toolhost can't make a delegated scope of its own: run it in a cgroup delegated to it, or in a container with a cgroup namespace of its own", systemdRunning)
	case f.systemdRun == "":
		why = "systemd-run is not on PATH, so toolhost can't make a delegated scope of its own: add systemd-run's folder to PATH, or run toolhost as a unit with Delegate=yes"
	default:
		return scopeDecision{unit: fmt.Sprintf("toolhost-%s-%d", f.command, f.pid)}
	}
	if f.command != "serve" {
		return scopeDecision{} // doctor's cgroup check says how to fix it; check's plugins say what fails
	}
	return scopeDecision{warning: fmt.Sprintf("the python kind can't make sandboxes here: %v; %s", f.notDelegated, why)}
}

// scopeCommand is the program, argv and environment that re-run the command (command and its
// args) of the executable in the delegated scope unit: systemd-run makes the scope, moves itself
// into it and execs the executable, in the same process.
func scopeCommand(systemdRun, unit, executable, command string, args, environ []string) (argv, env []string) {
	argv = []string{systemdRun, "--scope", "-p", "Delegate=yes", "--quiet", "--collect", "--unit=" + unit, "--", executable, command}
	argv = append(argv, args...)
	env = append(env, environ...)
	env = append(env, scopeEnv+"=1")
	return argv, env
}

// enterDelegatedScope re-runs the command (command and its args, as given to it) in a delegated
// systemd scope when decideScope says so: it replaces this process (syscall.Exec), so signals, the
// terminal, stdin, stdout, stderr and the exit status stay the command's own, and it returns only
// when it did not re-run. It returns serve's warning when the command goes on in a cgroup the
// python kind can't make sandboxes below. On a cgroup v1 or hybrid machine it reads the mount
// table and does nothing more.
func enterDelegatedScope(command string, args []string, stderr io.Writer) (warning string) {
	f, err := readScopeFacts(command)
	if err != nil {
		return "" // the sandbox code finds the same cgroups and says what is wrong with them
	}
	d := decideScope(f)
	if d.unit == "" {
		return d.warning
	}
	executable, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: can't run in a delegated systemd scope: %v; going on in the cgroup %s\n",
			fmt.Errorf("finding toolhost's own executable: %w", err), f.cgroup)
		return ""
	}
	argv, env := scopeCommand(f.systemdRun, d.unit, executable, command, args, os.Environ())
	fmt.Fprintf(stderr, "toolhost: running in a delegated systemd scope (%s.scope): this shell's cgroup %s is not delegated, and the python kind's sandboxes need one\n", d.unit, f.cgroup)
	err = syscall.Exec(f.systemdRun, argv, env)
	fmt.Fprintf(stderr, "toolhost: can't run in a delegated systemd scope: %v; going on in the cgroup %s\n",
		fmt.Errorf("running %s: %w", f.systemdRun, err), f.cgroup)
	return ""
}

// readScopeFacts reads this machine's and this process's facts for decideScope; past the cgroup
// tree only on cgroup v2.
func readScopeFacts(command string) (scopeFacts, error) {
	f := scopeFacts{command: command, pid: os.Getpid(), uid: os.Geteuid(), lookupEnv: os.LookupEnv}
	tree, err := cgroupfs.Detect()
	if err != nil {
		return f, err
	}
	f.cgroups = tree.Version
	if f.cgroups != cgroupfs.V2 {
		return f, nil
	}
	if f.cgroup, err = cgroupfs.OwnPath(0); err != nil {
		return f, err
	}
	if _, err := cgroupfs.Delegated(tree.Unified, f.cgroup); err != nil {
		f.notDelegated = err
	}
	fi, err := os.Stat(systemdRunning)
	f.systemd = err == nil && fi.IsDir()
	if p, err := exec.LookPath("systemd-run"); err == nil {
		f.systemdRun = p
	}
	return f, nil
}
