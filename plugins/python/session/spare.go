package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Ready sandboxes for new sessions (Options.Ready). Each is a sandbox started ahead, network off,
// on a blank workspace of its own (a disk made and mounted as a session's is, under a name of
// its own), its interpreter started by an empty cell and resting. A new session's first run
// (network off) takes one instead of making a disk and starting a sandbox: the disk is renamed to
// the session's, its filesystem mounted at the session's mount point instead (the sandbox holds
// the mounted filesystem, not the path, so it sees no change), and the sandbox becomes the session's, its
// place in Options.Places taken for the run's owner then. A ready sandbox holds no place, as the
// pool's ready sandboxes hold none: one is started only while a place is free.

// sparePrefix begins the name of a ready sandbox's disk (Dir/ready-*.img) and mount point
// (Dir/mnt/ready-*); session ids never do.
const sparePrefix = "ready-"

// spareRetry is how long the filler waits after a ready sandbox failed to start, doubled after
// each failure in a row up to spareRetryMax (a host whose disk is full isn't told every 10 s).
const (
	spareRetry    = 10 * time.Second
	spareRetryMax = 5 * time.Minute
)

// spareLook is how often the filler looks at the ready sandboxes and the places.
const spareLook = time.Second

// spareWarm bounds the start of a ready sandbox's interpreter.
const spareWarm = 30 * time.Second

// spare is a ready sandbox: its box runs on the workspace mounted for name.
type spare struct {
	name string
	b    *box
}

// spares are a manager's ready sandboxes and what fills them.
type spares struct {
	mu    sync.Mutex
	ready []*spare
	names map[string]bool // ready or being made: Reconcile leaves their disks and mounts alone
	// making counts the ready sandboxes being made; waiting counts the new sessions waiting for
	// one of those rather than starting their own; readied is closed (and replaced) whenever one
	// is made, or fails.
	making, waiting int
	readied         chan struct{}

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// startSpares starts the filler of Options.Ready sandboxes, if any are asked for.
func (m *Manager) startSpares() {
	m.spare.names = map[string]bool{}
	m.spare.readied = make(chan struct{})
	m.spare.kick = make(chan struct{}, 1)
	m.spare.done = make(chan struct{})
	if m.opts.Ready <= 0 {
		close(m.spare.done)
		m.spare.cancel = func() {}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.spare.cancel = cancel
	m.kickSpares()
	go m.fillSpares(ctx)
}

// ReadyCount is how many sandboxes wait ready for new sessions now.
func (m *Manager) ReadyCount() int {
	m.spare.mu.Lock()
	defer m.spare.mu.Unlock()
	return len(m.spare.ready)
}

// kickSpares asks the filler to look at the ready sandboxes now.
func (m *Manager) kickSpares() {
	select {
	case m.spare.kick <- struct{}{}:
	default:
	}
}

// fillSpares keeps Options.Ready sandboxes ready until ctx ends, one started at a time, looking
// every spareLook and when kicked. One that fails to start is tried again spareRetry later (more
// after failures in a row). While
// no place is free, the ready ones go: they wait only in places nobody uses, as the pool's do.
func (m *Manager) fillSpares(ctx context.Context) {
	defer close(m.spare.done)
	var (
		failed time.Time
		wait   time.Duration // after failed
	)
	lookEvery(ctx, m.spare.kick, func() {
		if !m.placeFree() {
			m.spare.mu.Lock()
			retire := m.spare.ready
			m.spare.ready = nil
			m.spare.mu.Unlock()
			for _, sp := range retire {
				m.dropSpare(ctx, sp.name, sp.b)
			}
			return
		}
		if time.Since(failed) < wait {
			return
		}
		for ctx.Err() == nil && m.needSpare() {
			if err := m.makeSpare(ctx); err != nil {
				if ctx.Err() == nil {
					failed, wait = time.Now(), retryWait(wait)
					m.log.Warn("starting a ready sandbox for new sessions", "error", err, "next try in", wait)
				}
				break
			}
			wait = 0
		}
	})
}

// lookEvery calls look every spareLook and whenever kick fires, until ctx ends: the loop of the
// fillers of sandboxes made ahead (the ready ones here, the prepared one in prepared.go).
func lookEvery(ctx context.Context, kick <-chan struct{}, look func()) {
	tick := time.NewTicker(spareLook)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-tick.C:
		}
		look()
	}
}

// retryWait is how long a filler waits after a failure that followed a wait of wait: spareRetry,
// doubled after each failure in a row, up to spareRetryMax.
func retryWait(wait time.Duration) time.Duration { return min(max(2*wait, spareRetry), spareRetryMax) }

// placeFree says whether Options.Places has a free place (always, without Places): sandboxes
// made ahead wait only in places nobody uses.
func (m *Manager) placeFree() bool { return m.opts.Places == nil || m.opts.Places.Free() > 0 }

// needSpare says whether one more ready sandbox is wanted: fewer than Options.Ready are ready
// (dead ones dropped), and a place is free for it.
func (m *Manager) needSpare() bool {
	if !m.placeFree() {
		return false
	}
	m.spare.mu.Lock()
	defer m.spare.mu.Unlock()
	m.dropEndedLocked()
	return len(m.spare.ready) < m.opts.Ready
}

// dropEndedLocked takes the ready sandboxes that ended out of the list and removes them in the
// background. m.spare.mu is held.
func (m *Manager) dropEndedLocked() {
	live := m.spare.ready[:0]
	for _, sp := range m.spare.ready {
		if sp.b.isEnded() {
			go m.dropSpare(context.Background(), sp.name, sp.b)
			continue
		}
		live = append(live, sp)
	}
	clear(m.spare.ready[len(live):])
	m.spare.ready = live
}

// makeSpare makes one ready sandbox: its disk, its mount, its sandbox and its interpreter.
func (m *Manager) makeSpare(ctx context.Context) (err error) {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	name := sparePrefix + hex.EncodeToString(nonce[:])
	m.spare.mu.Lock()
	m.spare.names[name] = true
	m.spare.making++
	m.spare.mu.Unlock()
	var b *box
	defer func() {
		if err != nil {
			m.dropSpare(context.WithoutCancel(ctx), name, b)
		}
		m.spare.mu.Lock()
		m.spare.making--
		close(m.spare.readied)
		m.spare.readied = make(chan struct{})
		m.spare.mu.Unlock()
	}()
	if err := m.createImage(ctx, name); err != nil {
		return err
	}
	if err := m.mount(ctx, name); err != nil {
		return err
	}
	if b, err = m.launch(ctx, name, NetworkOff); err != nil {
		return err
	}
	if b.agent != nil {
		if err := m.warm(ctx, b); err != nil {
			return err
		}
	}
	m.spare.mu.Lock()
	defer m.spare.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	m.spare.ready = append(m.spare.ready, &spare{name: name, b: b})
	return nil
}

// warm starts b's interpreter with an empty cell (the interpreter doesn't count it), with the
// environment a network-off session's first cell starts it with.
func (m *Manager) warm(ctx context.Context, b *box) error {
	_, frames, done, err := b.agent.startCell("", runToken+"="+newToken(), runEnv(Run{}, NetworkOff, newToken()), false)
	if err != nil {
		return err
	}
	defer done()
	timer := time.NewTimer(spareWarm)
	defer timer.Stop()
	for {
		select {
		case f := <-frames:
			switch f.kind {
			case 'x':
				if code, err := exitStatus(f.data); err != nil || code != 0 {
					return fmt.Errorf("the interpreter of a ready sandbox ended its first cell with %q", f.data)
				}
				return nil
			case 'f', 'r':
				return fmt.Errorf("the interpreter of a ready sandbox didn't start: %s", f.data)
			}
		case <-b.ended:
			return errors.New("a ready sandbox ended as its interpreter started")
		case <-timer.C:
			return fmt.Errorf("the interpreter of a ready sandbox didn't start within %s", spareWarm)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// takeSpare takes a live ready sandbox. When none is ready but one is being made that no other
// session waits for, it waits for that one (begun earlier, it is ready sooner than a sandbox
// started now, and two starts at once slow each other); it returns nil when there is none to
// take, or ctx ends first.
func (m *Manager) takeSpare(ctx context.Context) *spare {
	m.spare.mu.Lock()
	defer m.spare.mu.Unlock()
	for {
		m.dropEndedLocked()
		if len(m.spare.ready) > 0 {
			sp := m.spare.ready[0]
			m.spare.ready = m.spare.ready[1:]
			return sp
		}
		if m.spare.making <= m.spare.waiting {
			return nil
		}
		m.spare.waiting++
		readied := m.spare.readied
		m.spare.mu.Unlock()
		select {
		case <-readied:
		case <-ctx.Done():
		}
		m.spare.mu.Lock()
		m.spare.waiting--
		if ctx.Err() != nil {
			return nil
		}
	}
}

// adopt gives the new session s (no disk, nothing mounted, no sandbox) a ready sandbox, its place
// taken for owner, and reports whether it did: false, with no error, when none is ready or the
// handing over failed (the run then starts its own). s.mu is held.
func (m *Manager) adopt(ctx context.Context, s *session, owner string) (bool, error) {
	sp := m.takeSpare(ctx)
	if sp == nil {
		return false, nil
	}
	defer m.kickSpares()
	free, err := m.takePlace(ctx, owner)
	if err != nil {
		m.spare.mu.Lock()
		m.spare.ready = append(m.spare.ready, sp)
		m.spare.mu.Unlock()
		return false, err
	}
	if err := m.handOver(sp.name, s.id); err != nil {
		free()
		m.log.Warn("handing a ready sandbox to a new session", "session", s.id, "error", err)
		go m.dropSpare(context.Background(), sp.name, sp.b)
		return false, nil
	}
	m.spare.mu.Lock()
	delete(m.spare.names, sp.name)
	m.spare.mu.Unlock()
	m.hold(sp.b, owner, free)
	s.mounted, s.box = true, sp.b
	m.opts.Counters.ReadyTaken.Add(1)
	return true, nil
}

// handOver makes the ready sandbox name's disk and mount the session id's: the disk renamed
// (never over one there), its filesystem bound at the session's mount point and unmounted from
// the ready one's. (Not a move: mount(MS_MOVE) refuses a mount whose parent is shared, as
// systemd makes every mount.) The sandbox holds the filesystem, not the path, and sees no
// change. Undone if the bind fails.
func (m *Manager) handOver(name, id string) error {
	from, to := m.imagePath(name), m.imagePath(id)
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("naming the disk: %w", err)
	}
	mnt := m.mountPath(id)
	err := os.Mkdir(mnt, 0o700)
	if errors.Is(err, fs.ErrExist) {
		var mounted bool
		if mounted, err = isMountPoint(mnt); err == nil && mounted {
			err = errors.New("the session's mount point is in use")
		}
	}
	if err == nil {
		err = unix.Mount(m.mountPath(name), mnt, "", unix.MS_BIND, "")
	}
	if err != nil {
		_ = unix.Renameat2(unix.AT_FDCWD, to, unix.AT_FDCWD, from, unix.RENAME_NOREPLACE)
		return fmt.Errorf("mounting the disk at the session's mount point: %w", err)
	}
	if err := m.unmount(name); err != nil {
		m.log.Warn("unmounting a ready sandbox's disk from its own mount point", "sandbox", name, "error", err)
	}
	syncDir(m.opts.Dir)
	return nil
}

// dropSpare removes the ready sandbox name: its sandbox (b, if it started), mount and disk.
func (m *Manager) dropSpare(ctx context.Context, name string, b *box) {
	var errs []error
	if b != nil {
		errs = append(errs, m.stopBox(ctx, b, "the ready sandbox was removed"))
	}
	errs = append(errs, m.unmount(name), m.removeImage(name))
	if err := errors.Join(errs...); err != nil {
		m.log.Warn("removing a ready sandbox", "sandbox", name, "error", err)
	}
	m.spare.mu.Lock()
	delete(m.spare.names, name)
	m.spare.mu.Unlock()
}

// closeSpares stops the filler and removes every ready sandbox.
func (m *Manager) closeSpares(ctx context.Context) {
	m.spare.cancel()
	<-m.spare.done
	m.spare.mu.Lock()
	ready := m.spare.ready
	m.spare.ready = nil
	m.spare.mu.Unlock()
	var wg sync.WaitGroup
	for _, sp := range ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.dropSpare(ctx, sp.name, sp.b)
		}()
	}
	wg.Wait()
}

// sweepSpares removes the disks and mounts of the ready sandboxes named (found in the session
// folder by Reconcile) that this manager doesn't have: an earlier process's, whose sandboxes went
// with it.
func (m *Manager) sweepSpares(names map[string]bool) error {
	var errs []error
	for name := range names {
		m.spare.mu.Lock()
		live := m.spare.names[name]
		m.spare.mu.Unlock()
		if !live {
			errs = append(errs, m.unmount(name), m.removeImage(name))
		}
	}
	return errors.Join(errs...)
}
