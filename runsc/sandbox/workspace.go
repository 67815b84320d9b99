package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolhost/toolhost/runsc"
)

// SweepGone removes what instances of the manager's prefix that are no longer open left behind
// (their runsc containers and processes, cgroups, network namespaces, firewall rules, folders),
// and never a sandbox of this manager's instance or of another process still running on the
// prefix. It is what a process that keeps workspaces across its own restarts (conversation
// sandboxes) calls at start, beside a pool whose sandboxes it must not touch: unlike Sweep with
// the manager's instance, it leaves this process's own sandboxes alone.
func (m *Manager) SweepGone(ctx context.Context) error {
	// A fresh instance of the prefix owns nothing yet: a sweep with it takes exactly what the
	// instances that are gone made.
	in, err := OpenInstance(m.opts.StateDir, m.opts.Prefix)
	if err != nil {
		return err
	}
	defer in.Close()
	return Sweep(ctx, SweepOptions{Runtime: m.opts.Runtime, Prefix: m.opts.Prefix, StateDir: m.opts.StateDir, Instance: in, Removed: m.opts.Swept})
}

// WithNetwork returns a manager like m — the same runtime, rootfs, state folder, prefix and
// instance — whose network sandboxes get net instead: packages-mode sandboxes (net.OnlyTo)
// beside m's own, for conversation sandboxes that may change their mode. Its Close destroys its
// own sandboxes and leaves the instance, m's, open.
func (m *Manager) WithNetwork(net NetworkOptions) *Manager {
	opts := m.opts
	opts.Network = net
	opts.Instance = m.inst
	return &Manager{opts: opts, inst: m.inst, cg: m.cg, live: map[string]*Sandbox{}}
}

// WithRootfs returns a manager like m — the same runtime, state folder, prefix, network and
// instance — whose sandboxes mount rootfs instead: the conversation sandboxes' own root
// filesystem beside the tool runs' ([python] session_rootfs). Its sandboxes are the instance's
// like m's, so a sweep, Leftovers and the places see them as they see m's; its Close destroys
// its own sandboxes and leaves the instance, m's, open. A rootfs without /usr/bin/python3 is an
// error that names it.
func (m *Manager) WithRootfs(rootfs string) (*Manager, error) {
	if err := checkRootfs(rootfs); err != nil {
		return nil, err
	}
	opts := m.opts
	opts.Rootfs = rootfs
	opts.Instance = m.inst
	return &Manager{opts: opts, inst: m.inst, cg: m.cg, live: map[string]*Sandbox{}}, nil
}

// Runtime returns the runtime that runs the manager's sandboxes.
func (m *Manager) Runtime() *runsc.Runtime { return m.opts.Runtime }

// Rootfs returns the root filesystem the manager's sandboxes mount.
func (m *Manager) Rootfs() string { return m.opts.Rootfs }

// checkRootfs says whether rootfs is a built root filesystem (it has /usr/bin/python3).
func checkRootfs(rootfs string) error {
	if fi, err := os.Stat(filepath.Join(rootfs, "usr/bin/python3")); err != nil || fi.IsDir() {
		return fmt.Errorf("the rootfs %s has no /usr/bin/python3: build it with toolhost rootfs (make rootfs in the source tree)", rootfs)
	}
	return nil
}

// NetworkOptions returns the network the manager's network sandboxes get.
func (m *Manager) NetworkOptions() NetworkOptions { return m.opts.Network }
