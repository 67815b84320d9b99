package session

import (
	"context"
	"sync"
	"time"

	"github.com/toolhost/toolhost/runsc/sandbox"
)

// A sandbox prepared for the next resume (checkpoint.go). Most of a restore is runsc's making of
// the sandbox (its processes, cgroup, seccomp programs, platform), not the loading of the
// checkpoint. So while some session has a checkpoint, the manager keeps one sandbox made ahead
// (sandbox.Manager.Prepare: created, nothing running, /work an empty mount point), and a resume
// restores into it, binding the session's workspace there (Sandbox.Resume): 105-150 ms where a
// whole restore takes about 200. A second resume meanwhile restores the whole way, and the
// next one is made after each is taken.
//
// Like the ready sandboxes for new sessions (spare.go), it holds no place in Options.Places and
// is made only while a place is free; while none is, it goes, and none is made for spareRetry
// after (a busy host doesn't make and remove one over and over). It starts with few CPU shares
// (preparedShares), so that under contention its making yields to running code; Resume gives
// it a running sandbox's. It is made only when checkpoints are (not with Options.NoCheckpoints,
// nor in viaExec's measurements).

// preparedShares is the cpu.shares of a prepared sandbox until it is resumed (a running
// sandbox's are 1024).
const preparedShares = 64

// prepared is the manager's sandbox prepared for the next resume, and what keeps it made.
type prepared struct {
	mu     sync.Mutex
	sb     *sandbox.Sandbox
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// startPrepared starts the keeper of the sandbox prepared for resumes, when there are resumes.
func (m *Manager) startPrepared() {
	m.prep.kick = make(chan struct{}, 1)
	m.prep.done = make(chan struct{})
	if m.opts.NoCheckpoints || m.viaExec {
		close(m.prep.done)
		m.prep.cancel = func() {}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.prep.cancel = cancel
	go m.keepPrepared(ctx)
}

// kickPrepared asks the keeper to look now: a checkpoint was made, or the prepared sandbox taken.
func (m *Manager) kickPrepared() {
	select {
	case m.prep.kick <- struct{}{}:
	default:
	}
}

// keepPrepared keeps one sandbox prepared while a session has a checkpoint and a place is free,
// looking every spareLook and when kicked, until ctx ends. A failure is logged and tried again
// spareRetry later (more after failures in a row).
func (m *Manager) keepPrepared(ctx context.Context) {
	defer close(m.prep.done)
	var (
		failed time.Time
		wait   time.Duration // after failed
	)
	lookEvery(ctx, m.prep.kick, func() {
		free := m.placeFree()
		m.prep.mu.Lock()
		have := m.prep.sb
		m.prep.mu.Unlock()
		if have != nil {
			if !free {
				m.dropPrepared(ctx)
				failed, wait = time.Now(), spareRetry
			}
			return
		}
		if !free || time.Since(failed) < wait || len(m.checkpointIDs()) == 0 {
			return
		}
		sandboxes, opts, err := m.boxOptions("", NetworkOff)
		opts.Limits.CPUShares = preparedShares
		if err == nil {
			var sb *sandbox.Sandbox
			if sb, err = sandboxes.Prepare(ctx, opts); err == nil {
				m.prep.mu.Lock()
				m.prep.sb = sb
				m.prep.mu.Unlock()
				wait = 0
				return
			}
		}
		if ctx.Err() == nil {
			failed, wait = time.Now(), retryWait(wait)
			m.log.Warn("preparing a sandbox for the next resume", "error", err, "next try in", wait)
		}
	})
}

// PreparedCount is 1 while a sandbox is prepared for the next resume, 0 otherwise.
func (m *Manager) PreparedCount() int {
	m.prep.mu.Lock()
	defer m.prep.mu.Unlock()
	if m.prep.sb == nil {
		return 0
	}
	return 1
}

// takePrepared takes the prepared sandbox, if there is one, and has the next one made.
func (m *Manager) takePrepared() *sandbox.Sandbox {
	m.prep.mu.Lock()
	sb := m.prep.sb
	m.prep.sb = nil
	m.prep.mu.Unlock()
	if sb != nil {
		m.kickPrepared()
	}
	return sb
}

// dropPrepared removes the prepared sandbox, if there is one.
func (m *Manager) dropPrepared(ctx context.Context) {
	m.prep.mu.Lock()
	sb := m.prep.sb
	m.prep.sb = nil
	m.prep.mu.Unlock()
	if sb == nil {
		return
	}
	if err := sb.Destroy(context.WithoutCancel(ctx)); err != nil {
		m.log.Warn("removing the sandbox prepared for resumes", "sandbox", sb.ID, "error", err)
	}
}

// closePrepared stops the keeper and removes the prepared sandbox.
func (m *Manager) closePrepared(ctx context.Context) {
	m.prep.cancel()
	<-m.prep.done
	m.dropPrepared(ctx)
}
