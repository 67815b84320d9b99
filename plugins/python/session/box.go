package session

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// initProgram is the first process of a session's sandbox whose runs are runsc execs: it says it is ready, then only reaps
// the processes whose parents ended before them (runs' background children), so none stay
// zombies for the sandbox's life. It is PID 1 under GuardInit: the code can't signal, trace or
// read it.
const initProgram = `import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
os.write(3, b"ready\n")
while True:
    signal.sigwait({signal.SIGCHLD})
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
`

// box is a session's sandbox while it runs.
type box struct {
	sb    *sandbox.Sandbox
	net   Network
	agent *agent // nil: the runs are runsc execs
	// ended is closed once the sandbox ended by itself (its first process's output reached EOF)
	// or was stopped; final holds its cgroup's figures read then.
	ended chan struct{}
	final sandbox.Stats

	mu  sync.Mutex
	why string // why the manager stopped it, for the runs it killed
	// free gives back the box's place in Options.Places, once (when it ends or is stopped); nil
	// while it holds none (a ready sandbox, see hold).
	free func()
}

// giveBack gives back the box's place, if it holds one.
func (b *box) giveBack() {
	b.mu.Lock()
	free := b.free
	b.mu.Unlock()
	if free != nil {
		free()
	}
}

// stopped says why the manager stopped the box, "" if it didn't.
func (b *box) stopped() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.why
}

// isEnded reports whether the sandbox is gone.
func (b *box) isEnded() bool {
	select {
	case <-b.ended:
		return true
	default:
		return false
	}
}

// ready mounts s's workspace, making its image first if it has none and create is set. s.mu is
// held.
func (m *Manager) ready(ctx context.Context, s *session, create bool) error {
	if s.mounted {
		return nil
	}
	if !m.imageExists(s.id) {
		if !create {
			return errNoWorkspace
		}
		if err := m.createImage(ctx, s.id); err != nil {
			return err
		}
	}
	if err := m.mount(ctx, s.id); err != nil {
		return err
	}
	s.mounted = true
	return nil
}

// errNoWorkspace: the session has no files yet.
var errNoWorkspace = errcode.New(errcode.NotFound, "the session has no files yet")

// startBox starts a sandbox on s's mounted workspace, its place held for owner. s.mu is held.
func (m *Manager) startBox(ctx context.Context, s *session, net Network, owner string) (*box, error) {
	free, err := m.takePlace(ctx, owner)
	if err != nil {
		return nil, err
	}
	b, err := m.launch(ctx, s.id, net)
	if err != nil {
		free()
		return nil, err
	}
	m.hold(b, owner, free)
	return b, nil
}

// launch starts a sandbox of network net on the workspace mounted for name (a session's id, or
// a ready sandbox's name), holding no place in Options.Places (see hold).
func (m *Manager) launch(ctx context.Context, name string, net Network) (*box, error) {
	sandboxes, opts, err := m.boxOptions(m.mountPath(name), net)
	if err != nil {
		return nil, err
	}
	sb, err := sandboxes.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return m.watch(name, sb, net), nil
}

// boxOptions returns the manager that makes a session sandbox of network net on the
// workspace at the host folder work, and its options.
func (m *Manager) boxOptions(work string, net Network) (*sandbox.Manager, sandbox.Options, error) {
	program := agentProgram
	if m.viaExec {
		program = initProgram
	}
	opts := sandbox.Options{
		Args:      []string{"/usr/bin/python3", "-I", "-S", "-c", program},
		Lifetime:  sandbox.LongLived,
		Limits:    m.opts.Limits,
		Workspace: work,
		Network:   net == NetworkWeb,
		Ready:     "ready",
		GuardInit: true,
		// The agent's socket is its stdin, so that a checkpoint of the sandbox can be restored
		// with a new one (see checkpoint.go).
		ControlStdin: !m.viaExec,
	}
	sandboxes := m.opts.Sandboxes
	if net == NetworkPackages {
		if m.packages == nil {
			return nil, opts, errNoProxy
		}
		sandboxes, opts.Network = m.packages, true
	}
	return sandboxes, opts, nil
}

// watch makes the box of a started (or restored) sandbox sb of network net on the workspace
// of name: it closes ended when the sandbox ends, and logs a few of the agent's complaints.
func (m *Manager) watch(name string, sb *sandbox.Sandbox, net Network) *box {
	b := &box{sb: sb, net: net, ended: make(chan struct{})}
	if !m.viaExec {
		b.agent = newAgent(sb.Control)
	}
	go func() {
		// Nothing is written there: the read ends when the sandbox does.
		_, _ = io.Copy(io.Discard, sb.Stdout)
		b.final, _ = sb.Stats()
		close(b.ended)
		b.giveBack()
	}()
	go func() {
		// The agent's own complaints (the code's output never comes this way): a few reach the
		// log, the rest is drained.
		sc := bufio.NewScanner(sb.Stderr)
		for n := 0; sc.Scan(); n++ {
			if n < 20 {
				m.log.Warn("the agent of a session's sandbox", "session", name, "sandbox", sb.ID, "said", sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, sb.Stderr)
	}()
	return b
}

// hold makes b the holder of the place free gives back (taken for owner in Options.Places), its
// CPU weighed among owner's sandboxes: both are given back when b ends or is stopped, at once if
// it already ended.
func (m *Manager) hold(b *box, owner string, free func()) {
	if places := m.opts.Places; places != nil {
		// The place given back may be the one a ready sandbox waits for.
		unweigh, giveBack := places.Weigh(owner, b.sb), free
		free = sync.OnceFunc(func() { unweigh(); giveBack(); m.kickSpares() })
	}
	b.mu.Lock()
	b.free = free
	b.mu.Unlock()
	if b.isEnded() {
		free()
	}
}

// stopBox destroys the box's sandbox, telling the runs in it why.
func (m *Manager) stopBox(ctx context.Context, b *box, why string) error {
	b.mu.Lock()
	if b.why == "" {
		b.why = why
	}
	b.mu.Unlock()
	err := b.sb.Destroy(context.WithoutCancel(ctx))
	if err != nil {
		m.log.Warn("removing a session's sandbox", "sandbox", b.sb.ID, "error", err)
	}
	b.giveBack()
	return err
}

// takePlace takes a place for a new sandbox of owner's in Options.Places (see there), and
// returns what gives it back, once however often it is called.
func (m *Manager) takePlace(ctx context.Context, owner string) (free func(), err error) {
	places := m.opts.Places
	if places == nil {
		return func() {}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, m.opts.PlaceWait)
	defer cancel()
	if err := places.Take(wctx, owner); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m.opts.Counters.NoPlace.Add(1)
		limit := fmt.Sprintf("the host runs at most %d sandboxes at once", places.Max())
		if places.Max() == 1 {
			limit = "the host runs one sandbox at a time"
		}
		return nil, errcode.Errorf(errcode.TooManySandboxes,
			"%s (%s: tool runs and conversation sandboxes together), and all are running code, none idle to stop: try again when a run has ended, or an admin raises %s",
			limit, m.opts.PlacesSetting, m.opts.PlacesSetting)
	}
	return sync.OnceFunc(func() { places.Give(owner) }), nil
}

// errNoProxy: packages mode without the egress proxy.
var errNoProxy = errcode.New(errcode.Unsupported, "packages mode needs the host's egress proxy, which isn't set up: an admin lists the package indexes' hosts in [sessions] package_hosts")
