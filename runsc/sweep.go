package runsc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// SweepOptions say what Sweep looks for.
type SweepOptions struct {
	// Runtime's state folder is searched for containers; nil skips runsc's own state.
	Runtime *Runtime
	// Prefix marks what is ours: ids made by NewID with it.
	Prefix string
	// StateDir holds the sandbox folders (its "sandboxes" folder is swept).
	StateDir string
}

// Sweep removes every leftover sandbox of the prefix: runsc containers (killed and deleted), runsc
// processes whose state is gone, cgroups, network namespaces, veth pairs, iptables rules and
// chains, mounts and sandbox folders. Run it at start-up and at shutdown: after a crash it is what
// keeps sandboxes from outliving the host. It carries on past failures and reports them all.
func Sweep(ctx context.Context, opts SweepOptions) error {
	if err := CheckPrefix(opts.Prefix); err != nil {
		return err
	}
	ours := func(name string) bool { return ownedBy(name, opts.Prefix) }
	var errs []error
	if opts.Runtime != nil {
		states, err := opts.Runtime.List(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, st := range states {
			if !ours(st.ID) {
				continue
			}
			_ = opts.Runtime.Kill(ctx, st.ID, syscall.SIGKILL, true)
			if err := opts.Runtime.Delete(ctx, st.ID, &DeleteOpts{Force: true}); err != nil && !IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	killProcesses(ours)
	for _, c := range cgroupControllers() {
		entries, _ := os.ReadDir(filepath.Join(CgroupRoot, c))
		for _, e := range entries {
			if e.IsDir() && ours(e.Name()) {
				if err := removeCgroupDir(filepath.Join(CgroupRoot, c, e.Name())); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := removeRulesTagged(ctx, ours); err != nil {
		errs = append(errs, err)
	}
	if err := removeChains(ctx, ours); err != nil {
		errs = append(errs, err)
	}
	if links, err := hostLinks(ctx); err == nil {
		for name, alias := range links {
			if ours(alias) {
				if err := run(ctx, "ip", "link", "del", name); err != nil {
					errs = append(errs, err)
				}
			}
		}
	} else {
		errs = append(errs, err)
	}
	if names, err := netnsNames(); err == nil {
		for _, n := range names {
			if ours(n) {
				if err := run(ctx, "ip", "netns", "del", n); err != nil {
					errs = append(errs, err)
				}
			}
		}
	} else {
		errs = append(errs, err)
	}
	if opts.StateDir != "" {
		dir := sandboxesDir(opts.StateDir)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if !ours(e.Name()) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if err := unmountAll(p); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, fmt.Errorf("removing a leftover sandbox folder: %w", err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sweeping leftover sandboxes of %q: %w", opts.Prefix, errors.Join(errs...))
	}
	return nil
}

// Leftovers lists what of the prefix is still on the host: containers, runsc processes, cgroups,
// network namespaces, links, iptables chains and rules, sandbox folders. Tests assert it is empty.
func Leftovers(ctx context.Context, opts SweepOptions) ([]string, error) {
	ours := func(name string) bool { return ownedBy(name, opts.Prefix) }
	var out []string
	if opts.Runtime != nil {
		states, err := opts.Runtime.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			if ours(st.ID) {
				out = append(out, "runsc container "+st.ID)
			}
		}
	}
	for _, pid := range runscProcesses(ours) {
		out = append(out, "runsc process "+strconv.Itoa(pid))
	}
	for _, c := range cgroupControllers() {
		entries, _ := os.ReadDir(filepath.Join(CgroupRoot, c))
		for _, e := range entries {
			if e.IsDir() && ours(e.Name()) {
				out = append(out, "cgroup "+c+"/"+e.Name())
			}
		}
	}
	for _, table := range []string{"filter", "nat"} {
		rules, err := output(ctx, "iptables", "-w", "-t", table, "-S")
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(rules), "\n") {
			for _, w := range splitRule(line) {
				if ours(w) {
					out = append(out, "iptables "+table+": "+line)
					break
				}
			}
		}
	}
	links, err := hostLinks(ctx)
	if err != nil {
		return nil, err
	}
	for name, alias := range links {
		if ours(alias) {
			out = append(out, "link "+name)
		}
	}
	names, err := netnsNames()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if ours(n) {
			out = append(out, "netns "+n)
		}
	}
	if opts.StateDir != "" {
		entries, _ := os.ReadDir(sandboxesDir(opts.StateDir))
		for _, e := range entries {
			if ours(e.Name()) {
				out = append(out, "folder "+filepath.Join(sandboxesDir(opts.StateDir), e.Name()))
			}
		}
		if m, err := mountsUnder(sandboxesDir(opts.StateDir)); err == nil {
			base := sandboxesDir(opts.StateDir) + "/"
			for _, p := range m {
				if rest := strings.TrimPrefix(p, base); ours(strings.SplitN(rest, "/", 2)[0]) {
					out = append(out, "mount "+p)
				}
			}
		}
	}
	return out, nil
}

// runscProcesses finds runsc processes (sandbox, gofer, or a runsc command) naming one of our ids.
func runscProcesses(ours func(string) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if !strings.Contains(filepath.Base(args[0]), "runsc") {
			continue
		}
		for _, a := range args[1:] {
			if ours(a) || ours(filepath.Base(a)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func killProcesses(ours func(string) bool) {
	for _, pid := range runscProcesses(ours) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
