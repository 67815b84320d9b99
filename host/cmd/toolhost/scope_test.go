package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/internal/cgroupfs"
)

// reRunnable are the facts of a root shell's toolhost on a systemd cgroup v2 machine, in the
// shell's session scope: every condition of re-running holds. Each test changes one.
func reRunnable(command string, env map[string]string) scopeFacts {
	return scopeFacts{
		command:      command,
		pid:          4242,
		cgroups:      cgroupfs.V2,
		cgroup:       "/user.slice/user-0.slice/session-3.scope",
		notDelegated: errors.New("the cgroup /user.slice/user-0.slice/session-3.scope is not delegated to toolhost"),
		uid:          0,
		systemd:      true,
		systemdRun:   "/usr/bin/systemd-run",
		lookupEnv: func(key string) (string, bool) {
			v, ok := env[key]
			return v, ok
		},
	}
}

// TestScopeReRunsEachCommandOfANotDelegatedShell: serve, check and doctor of a root shell on a
// systemd cgroup v2 machine re-run in a scope named by the command and the pid.
func TestScopeReRunsEachCommandOfANotDelegatedShell(t *testing.T) {
	for _, command := range []string{"serve", "check", "doctor"} {
		d := decideScope(reRunnable(command, nil))
		if want := "toolhost-" + command + "-4242"; d.unit != want {
			t.Errorf("%s: re-runs in the unit %q, want %q", command, d.unit, want)
		}
		if d.warning != "" {
			t.Errorf("%s: re-runs and warns %q", command, d.warning)
		}
	}
}

// TestScopeIsNotEnteredOffCgroupV2: on a v1 or hybrid tree (this machine's), and with no
// cgroups, the sandboxes' cgroups are v1's, wherever the process is: nothing is done or said.
func TestScopeIsNotEnteredOffCgroupV2(t *testing.T) {
	for _, v := range []cgroupfs.Version{cgroupfs.None, cgroupfs.V1, cgroupfs.Hybrid} {
		for _, command := range []string{"serve", "check", "doctor"} {
			f := reRunnable(command, nil)
			f.cgroups = v
			if d := decideScope(f); d != (scopeDecision{}) {
				t.Errorf("%s on %v: %+v, want nothing done", command, v, d)
			}
		}
	}
}

// TestScopeIsNotEnteredFromADelegatedCgroup: a toolhost already in a delegated cgroup (the
// unit's, or a container's own) goes on as it is, without a word.
func TestScopeIsNotEnteredFromADelegatedCgroup(t *testing.T) {
	for _, command := range []string{"serve", "check", "doctor"} {
		f := reRunnable(command, nil)
		f.notDelegated = nil
		if d := decideScope(f); d != (scopeDecision{}) {
			t.Errorf("%s in a delegated cgroup: %+v, want nothing done", command, d)
		}
	}
}

// TestScopeIsNotEnteredWhenItCant: when a condition of re-running fails, the command goes on in
// its cgroup; serve warns, saying why, and check and doctor say nothing (doctor's cgroup check
// says how to fix it).
func TestScopeIsNotEnteredWhenItCant(t *testing.T) {
	cases := []struct {
		name   string
		env    map[string]string
		change func(*scopeFacts)
		// says is what serve's warning names, as the reason.
		says string
	}{
		{"already re-ran", map[string]string{scopeEnv: "1"}, nil, "TOOLHOST_SCOPE is set"},
		{"TOOLHOST_SCOPE set empty", map[string]string{scopeEnv: ""}, nil, "TOOLHOST_SCOPE is set"},
		{"not root", nil, func(f *scopeFacts) { f.uid = 1000 }, "uid 1000, not root"},
		{"no systemd", nil, func(f *scopeFacts) { f.systemd = false }, "systemd does not run this machine"},
		{"no systemd-run", nil, func(f *scopeFacts) { f.systemdRun = "" }, "systemd-run is not on PATH"},
	}
	for _, c := range cases {
		for _, command := range []string{"serve", "check", "doctor"} {
			f := reRunnable(command, c.env)
			if c.change != nil {
				c.change(&f)
			}
			d := decideScope(f)
			if d.unit != "" {
				t.Errorf("%s, %s: re-runs in %q, want it to go on", c.name, command, d.unit)
			}
			if command != "serve" {
				if d.warning != "" {
					t.Errorf("%s, %s: warns %q, want nothing said", c.name, command, d.warning)
				}
				continue
			}
			if !strings.Contains(d.warning, c.says) || !strings.Contains(d.warning, f.notDelegated.Error()) {
				t.Errorf("%s, serve: warns %q, want why the cgroup is not delegated and %q", c.name, d.warning, c.says)
			}
		}
	}
}

// TestScopeIsNotEnteredByServeOfAUnit: serve started by systemd (NOTIFY_SOCKET) never re-runs:
// it warns that the unit must delegate. check and doctor with NOTIFY_SOCKET set still re-run:
// the rule is serve's.
func TestScopeIsNotEnteredByServeOfAUnit(t *testing.T) {
	env := map[string]string{"NOTIFY_SOCKET": "/run/systemd/notify"}
	d := decideScope(reRunnable("serve", env))
	if d.unit != "" {
		t.Errorf("serve under a unit re-runs in %q, want it to go on", d.unit)
	}
	if !strings.Contains(d.warning, "Delegate=yes") || !strings.Contains(d.warning, "NOTIFY_SOCKET") {
		t.Errorf("serve under a unit warns %q, want it to say the unit needs Delegate=yes", d.warning)
	}
	for _, command := range []string{"check", "doctor"} {
		if d := decideScope(reRunnable(command, env)); d.unit != "toolhost-"+command+"-4242" {
			t.Errorf("%s with NOTIFY_SOCKET set: %+v, want it to re-run", command, d)
		}
	}
}

// TestScopeCommandReRunsTheSameCommand: systemd-run makes a delegated, collected scope of the
// unit's name and runs the same executable with the same command and args after "--", whose
// environment is the command's with TOOLHOST_SCOPE=1 added.
func TestScopeCommandReRunsTheSameCommand(t *testing.T) {
	environ := []string{"PATH=/usr/sbin:/usr/bin", "HOME=/root"}
	argv, env := scopeCommand("/usr/bin/systemd-run", "toolhost-doctor-4242", "/usr/bin/toolhost",
		"doctor", []string{"--config", "/etc/toolhost/other.toml"}, environ)
	wantArgv := []string{"/usr/bin/systemd-run", "--scope", "-p", "Delegate=yes", "--quiet", "--collect",
		"--unit=toolhost-doctor-4242", "--", "/usr/bin/toolhost", "doctor", "--config", "/etc/toolhost/other.toml"}
	if !slices.Equal(argv, wantArgv) {
		t.Errorf("argv:\n %q\nwant\n %q", argv, wantArgv)
	}
	wantEnv := []string{"PATH=/usr/sbin:/usr/bin", "HOME=/root", "TOOLHOST_SCOPE=1"}
	if !slices.Equal(env, wantEnv) {
		t.Errorf("env: %q, want %q", env, wantEnv)
	}
}
