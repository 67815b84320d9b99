package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/closethen"
	"github.com/toolhost/toolhost/plugins/python/session"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// The kind keeps conversation sandboxes (sdk.SessionKeeper) with package plugins/python/session: one
// long-lived sandbox per session while it is used, on the kind's sandbox manager's sibling of
// [python] session_rootfs (the scientific stack; one-shot tool runs keep the lean rootfs), its
// files on a per-session image under [python] sessions_dir. The session manager is made when first
// needed (the host's Sessions.Configure, a run, a file call), not at Configure: a kind that never
// serves a session (toolhost check, a host with [sessions] off) never takes the folder's lock.

var _ sdk.SessionKeeper = (*kind)(nil)

// sessions holds the kind's session manager and what it was made with.
type sessions struct {
	log hclog.Logger

	// gen is held for reading by every use of the manager (a run, a file call) and for writing
	// to replace it, so that a manager is closed (by a new config, or a new sandbox manager)
	// only once what runs on it is done. Close does not wait: it stops what runs.
	gen sync.RWMutex

	mu     sync.Mutex // guards what follows
	m      *session.Manager
	on     *sandbox.Manager // the sandbox manager m runs on
	dir    string           // m's folder
	conf   sdk.SessionsConfig
	closed bool
}

func newSessions(log hclog.Logger) *sessions {
	return &sessions{log: log, conf: withSessionDefaults(sdk.SessionsConfig{})}
}

// withSessionDefaults fills in what of [sessions] the kind has not been sent (0) with config's
// defaults, the host's own: the kind serves the same sessions before the host's Configure as after
// one that sends the defaults.
func withSessionDefaults(c sdk.SessionsConfig) sdk.SessionsConfig {
	if c.DiskMB == 0 {
		c.DiskMB = config.SessionDiskMBDefault
	}
	if c.MemoryMB == 0 {
		c.MemoryMB = config.SessionMemoryMBDefault
	}
	if c.IdleMinutes == 0 {
		c.IdleMinutes = config.SessionIdleMinutesDefault
	}
	if c.Seconds == 0 {
		c.Seconds = config.SessionSecondsDefault
	}
	return c
}

// checkSessionsConfig says what of the host's [sessions] is outside config's ranges. The host
// decodes [sessions] with the same ranges and never sends such a value: this only keeps a host
// of another version, or another program on the protocol, from making sandboxes the kind can't
// run.
func checkSessionsConfig(c sdk.SessionsConfig) error {
	var errs []error
	in := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("[sessions] %s must be from %d to %d, not %d", name, lo, hi, v))
		}
	}
	in("disk_mb", c.DiskMB, config.SessionDiskMBMin, config.SessionDiskMBMax)
	in("memory_mb", c.MemoryMB, config.SessionMemoryMBMin, config.SessionMemoryMBMax)
	if c.Pids != 0 {
		in("pids", c.Pids, 16, 65536)
	}
	in("idle_minutes", c.IdleMinutes, config.SessionIdleMinutesMin, config.SessionIdleMinutesMax)
	in("seconds", c.Seconds, config.SessionSecondsMin, config.SessionSecondsMax)
	if err := errors.Join(errs...); err != nil {
		return sdk.Errorf(errcode.BadArgs, "%v", err)
	}
	return nil
}

// ConfigureSessions takes the host's [sessions] limits. A change replaces the session manager
// once the runs in flight are done (sandboxes stop, files stay): the next run starts a sandbox
// with the new limits. The manager is made here, so that what stops it (the folder in use by
// another process, a missing tool) is said to the host now.
func (k *kind) ConfigureSessions(ctx context.Context, conf sdk.SessionsConfig) error {
	conf = withSessionDefaults(conf)
	if err := checkSessionsConfig(conf); err != nil {
		return err
	}
	s := k.sess
	s.mu.Lock()
	changed := conf != s.conf
	s.conf = conf
	s.mu.Unlock()
	if changed {
		s.gen.Lock()
		s.mu.Lock()
		old := s.m
		s.m, s.on = nil, nil
		s.mu.Unlock()
		if old != nil {
			if err := old.Close(ctx); err != nil {
				k.log.Warn("closing the session manager for new limits", "error", err)
			}
		}
		s.gen.Unlock()
	}
	_, done, err := k.sessionManager(ctx)
	if err != nil {
		return err
	}
	done()
	return nil
}

// sessionManager returns the session manager on the kind's current sandbox manager, made if
// there is none, with the config it was made with; done must be called when the caller is done
// with it.
func (k *kind) sessionManager(ctx context.Context) (*session.Manager, func(), error) {
	m, _, done, err := k.sessionManagerConf(ctx)
	return m, done, err
}

func (k *kind) sessionManagerConf(ctx context.Context) (*session.Manager, sdk.SessionsConfig, func(), error) {
	s := k.sess
	for range 3 {
		c, err := k.current()
		if err != nil {
			return nil, sdk.SessionsConfig{}, nil, sdk.Errorf("not_configured", "%v", err)
		}
		dir := c.cfg.SessionsDir
		s.gen.RLock()
		s.mu.Lock()
		m, on, mdir, conf, closed := s.m, s.on, s.dir, s.conf, s.closed
		s.mu.Unlock()
		if closed {
			s.gen.RUnlock()
			return nil, conf, nil, sdk.Errorf(errcode.PluginUnavailable, "the python kind is stopping")
		}
		if m != nil && on == c.mgr && mdir == dir {
			return m, conf, s.gen.RUnlock, nil
		}
		s.gen.RUnlock()
		if err := k.remakeSessions(ctx, c, dir); err != nil {
			return nil, conf, nil, err
		}
	}
	return nil, sdk.SessionsConfig{}, nil, sdk.Errorf(errcode.Failed, "the python kind's configuration kept changing: try again")
}

// remakeSessions makes the session manager on c's sandbox manager, closing one on another first
// (once its runs are done).
func (k *kind) remakeSessions(ctx context.Context, c configured, dir string) error {
	s := k.sess
	s.gen.Lock()
	defer s.gen.Unlock()
	s.mu.Lock()
	old, conf := s.m, s.conf
	if old != nil && s.on == c.mgr && s.dir == dir {
		s.mu.Unlock()
		return nil // made meanwhile
	}
	s.m, s.on = nil, nil
	s.mu.Unlock()
	if old != nil {
		if err := old.Close(ctx); err != nil {
			k.log.Warn("closing the previous session manager", "error", err)
		}
	}
	smgr, err := k.sessionSandboxes(c)
	if err != nil {
		return sdk.Errorf(errcode.Failed, "conversation sandboxes can't start: %v", err)
	}
	ready := c.cfg.pool.ReadySessions
	if k.opts.CheckOnly {
		ready = 0 // a check keeps nothing ready
	}
	m, err := session.New(session.Options{
		Sandboxes: smgr,
		Dir:       dir,
		DiskMB:    conf.DiskMB,
		Limits: sandbox.Limits{
			MemoryBytes: int64(conf.MemoryMB+overheadMB) << 20,
			Pids:        int64(conf.Pids),
			CPUs:        1,
		},
		IdleStop:      time.Duration(conf.IdleMinutes) * time.Minute,
		ProxyAddr:     conf.ProxyAddr,
		Places:        k.places,
		Counters:      k.counters,
		PlaceWait:     k.opts.placeWait,
		KeepFreeMB:    keepFreeMB(c.cfg.SessionsKeepFreeMB),
		NoCheckpoints: !c.cfg.SessionCheckpoints,
		Ready:         ready,
		Log:           k.log.Named("sessions"),
	})
	if err != nil {
		return sdk.Errorf(errcode.Failed, "conversation sandboxes can't start: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = m.Close(context.WithoutCancel(ctx))
		return sdk.Errorf(errcode.PluginUnavailable, "the python kind is stopping")
	}
	s.m, s.on, s.dir = m, c.mgr, dir
	return nil
}

// sessionSandboxes is the sandbox manager of c's session rootfs; when it was missing at
// Configure, it is looked for again (a toolhost rootfs run since needs no restart).
func (k *kind) sessionSandboxes(c configured) (*sandbox.Manager, error) {
	if c.smgr != nil {
		return c.smgr, nil
	}
	smgr, err := c.mgr.WithRootfs(c.cfg.SessionRootfs)
	if err != nil {
		return nil, fmt.Errorf("the conversation sandboxes' rootfs ([python] session_rootfs) is missing: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.mgr != c.mgr {
		return nil, errors.New("the python kind's configuration changed: try again")
	}
	if k.smgr == nil {
		k.smgr = smgr
	}
	return k.smgr, nil
}

// readyCount is how many sandboxes the session manager keeps ready now (0 with none made).
func (s *sessions) readyCount() int { return s.count((*session.Manager).ReadyCount) }

// preparedCount is how many sandboxes the session manager keeps prepared for resumes now.
func (s *sessions) preparedCount() int { return s.count((*session.Manager).PreparedCount) }

// count is what of the session manager gives (0 with none made).
func (s *sessions) count(of func(*session.Manager) int) int {
	s.mu.Lock()
	m := s.m
	s.mu.Unlock()
	if m == nil {
		return 0
	}
	return of(m)
}

// keepFreeMB is [python] sessions_keep_free_mb as session.Options takes it (0 there is the
// default, negative none).
func keepFreeMB(mb int) int {
	if mb == 0 {
		return -1
	}
	return mb
}

// leave closes the session manager if it runs on mgr, once its runs are done: mgr is about to
// be closed (Configure replaced it). The next use makes one on the new manager.
func (s *sessions) leave(ctx context.Context, mgr *sandbox.Manager) {
	s.gen.Lock()
	defer s.gen.Unlock()
	s.mu.Lock()
	m := s.m
	if m == nil || s.on != mgr {
		s.mu.Unlock()
		return
	}
	s.m, s.on = nil, nil
	s.mu.Unlock()
	if err := m.Close(ctx); err != nil {
		s.log.Warn("closing the session manager of the previous sandbox manager", "error", err)
	}
}

// close stops every session sandbox and unmounts the workspaces (their files stay), without
// waiting for runs: they end with it.
func (s *sessions) close(ctx context.Context) error {
	s.mu.Lock()
	m := s.m
	s.m, s.on, s.closed = nil, nil, true
	s.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.Close(ctx)
}

// ListFiles lists a session's workspace.
func (k *kind) ListFiles(ctx context.Context, id string) ([]sdk.SessionFile, error) {
	m, done, err := k.sessionManager(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	files, err := m.Files(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]sdk.SessionFile, len(files))
	for i, f := range files {
		out[i] = sdk.SessionFile(f)
	}
	return out, nil
}

// OpenFile opens one file of a session's workspace to read.
func (k *kind) OpenFile(ctx context.Context, id, path string, max int64) (io.ReadCloser, int64, error) {
	m, done, err := k.sessionManager(ctx)
	if err != nil {
		return nil, 0, err
	}
	r, size, err := m.OpenFile(ctx, id, path, max)
	if err != nil {
		done()
		return nil, 0, err
	}
	return closethen.Reader(r, done), size, nil
}

// WriteFile writes one file of a session's workspace.
func (k *kind) WriteFile(ctx context.Context, id, path string, r io.Reader) (sdk.SessionFile, error) {
	m, done, err := k.sessionManager(ctx)
	if err != nil {
		return sdk.SessionFile{}, err
	}
	defer done()
	f, err := m.WriteFile(ctx, id, path, r)
	return sdk.SessionFile(f), err
}

// RemoveFile removes one file or empty folder of a session's workspace.
func (k *kind) RemoveFile(ctx context.Context, id, path string) error {
	m, done, err := k.sessionManager(ctx)
	if err != nil {
		return err
	}
	defer done()
	return m.RemoveFile(ctx, id, path)
}

// StopSession stops a session's sandbox; its files stay.
func (k *kind) StopSession(ctx context.Context, id string) error {
	m, done, err := k.sessionManager(ctx)
	if err != nil {
		return err
	}
	defer done()
	return m.Stop(ctx, id)
}

// DeleteSession removes a session's sandbox and files.
func (k *kind) DeleteSession(ctx context.Context, id string) error {
	m, done, err := k.sessionManager(ctx)
	if err != nil {
		return err
	}
	defer done()
	return m.Delete(ctx, id)
}

// Reconcile keeps the workspaces of the sessions in keep and deletes the others.
func (k *kind) Reconcile(ctx context.Context, keep []string) ([]string, error) {
	m, done, err := k.sessionManager(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	set := make(map[string]bool, len(keep))
	for _, id := range keep {
		set[id] = true
	}
	return m.Reconcile(ctx, set)
}
