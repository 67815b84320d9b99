package sessions

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/closethen"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Service is the host's sessions: ownership, the store, expiry, the files
// of a session through the backend, and the ledger. It is made when the
// host is, and is ready to serve once Attach gives it its store and
// backend; until then (or when [sessions] is off) Ready says why not.
type Service struct {
	log hclog.Logger
	now func() time.Time
	// fixedClock: Options gave now, and the store's times are counted by
	// it too (tests); else by the store's clock (storeNow).
	fixedClock bool
	secret     []byte // keys the egress proxy's per-session passwords

	// reconciling is held by Reconcile across its read of the store's ids
	// and the backend's reconcile, and shared by acquire across its read or
	// write of the store: a session is then either in the store when
	// Reconcile reads it, or made only after the backend has reconciled, so
	// its new workspace is never taken for a leftover. Taken before mu.
	reconciling sync.RWMutex

	mu          sync.Mutex
	cfg         config.SessionsConfig
	cfgFile     string
	store       *Store
	backend     Backend
	unavailable string
	proxy       netip.AddrPort
	// busy counts, by backend id, the runs and file operations going on
	// in a session: expiry leaves such a session alone.
	busy map[string]int
	// deleting holds the backend ids of sessions being deleted: nothing
	// new starts in them.
	deleting map[string]bool
	// fresh holds the backend ids of sessions that acquire made and that
	// nothing else has acquired since: an upload that made one and failed
	// takes it back (see takeBack).
	fresh map[string]bool
	// transfers counts, by principal, the file uploads and downloads going
	// on; transferring is their sum (see Transfer).
	transfers    map[string]int
	transferring int
	// refused counts the refusals of each cap, by its name (Caps).
	refused map[string]uint64
	// hostID is the host's [cluster] host_id once the host shares its
	// store (SetHostID): it expires only the sessions it holds.
	hostID string
}

// SetHostID says the store is shared, and this host is hostID: Expire
// expires only the sessions placed on it (or on no host), as the others
// hold the rest (placement.go).
func (s *Service) SetHostID(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hostID = id
}

// Options make a Service.
type Options struct {
	// Config is [sessions]; File the config file's path, for messages.
	Config config.SessionsConfig
	File   string
	Log    hclog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// New makes a Service; Attach makes it ready.
func New(opts Options) *Service {
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	fixedClock := opts.Now != nil
	if opts.Now == nil {
		opts.Now = time.Now
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		panic("no randomness for the egress proxy's passwords: " + err.Error())
	}
	return &Service{
		log: opts.Log, now: opts.Now, fixedClock: fixedClock, secret: secret, cfg: opts.Config, cfgFile: opts.File,
		busy: map[string]int{}, deleting: map[string]bool{}, fresh: map[string]bool{}, transfers: map[string]int{}, refused: map[string]uint64{},
	}
}

// storeNow is the time the store's rows are written and compared at (a
// session's last use, the expiry's cutoff): the store's clock, which is
// the database's on PostgreSQL so that every host sharing it expires a
// session at the same time; the service's own when Options gave one.
func (s *Service) storeNow(st *Store) time.Time {
	if s.fixedClock {
		return s.now()
	}
	return st.Clock()()
}

// Attach gives the service its store and backend: from now on it serves
// (when [sessions] enabled is true).
func (s *Service) Attach(store *Store, backend Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store, s.backend, s.unavailable = store, backend, ""
}

// SetUnavailable says why the sessions can't be served though [sessions]
// enabled is true (the python plugin serves none, the store can't be
// opened); Ready gives it to callers.
func (s *Service) SetUnavailable(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable = why
}

// SetConfig puts a new [sessions] in force: who may use sessions, how long
// they are kept, the network of new ones. (enabled is read at start only.)
func (s *Service) SetConfig(cfg config.SessionsConfig, file string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg, s.cfgFile = cfg, file
}

// Config is the [sessions] in force.
func (s *Service) Config() config.SessionsConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// SetProxy sets the egress proxy's address, which packages sessions reach
// (the zero AddrPort: there is none).
func (s *Service) SetProxy(addr netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proxy = addr
}

// BackendConfig is what the backend is configured with.
func (s *Service) BackendConfig() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Config{DiskMB: s.cfg.DiskMB, MemoryMB: s.cfg.MemoryMB, IdleMinutes: s.cfg.IdleMinutes, Seconds: s.cfg.Seconds, ProxyAddr: s.proxy}
}

// Ready says whether sessions are served: nil, or why not (unsupported:
// [sessions] is off; plugin_unavailable: they can't be served now).
func (s *Service) Ready() error {
	_, _, err := s.parts()
	return err
}

func (s *Service) parts() (*Store, Backend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.cfg.Enabled:
		where := "the config"
		if s.cfgFile != "" {
			where = s.cfgFile
		}
		return nil, nil, errcode.Errorf(wire.CodeUnsupported, "conversation sandboxes are off on this host: [sessions] enabled = true in %s turns them on", where)
	case s.unavailable != "":
		return nil, nil, errcode.Errorf(wire.CodePluginUnavailable, "conversation sandboxes can't be used now: %s", s.unavailable)
	case s.store == nil || s.backend == nil:
		return nil, nil, errcode.New(wire.CodePluginUnavailable, "conversation sandboxes are not ready yet: the host is starting")
	}
	return s.store, s.backend, nil
}

// prepared is the backend, ready for a run or a file operation.
func (s *Service) prepared(ctx context.Context) (*Store, Backend, error) {
	st, b, err := s.parts()
	if err != nil {
		return nil, nil, err
	}
	if p, ok := b.(Preparer); ok {
		if err := p.Prepare(ctx); err != nil {
			return nil, nil, err
		}
	}
	return st, b, nil
}

// Close detaches the store and closes it; the service serves no more.
func (s *Service) Close() error {
	s.mu.Lock()
	st := s.store
	s.store, s.backend = nil, nil
	s.unavailable = "the host is stopping"
	s.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.Close()
}

// MayUse says whether a caller of role may use sessions under [sessions]
// who: editors and admins, or admins only; viewers never.
func (s *Service) MayUse(role string) bool {
	who := s.Config().Who
	return role == "admin" || (role == "editor" && who != "admins")
}

// Forbidden is the error for a caller whose role may not use sessions.
func (s *Service) Forbidden(name, role string) error {
	who := s.Config().Who
	allowed := "editors and admins"
	if who == "admins" {
		allowed = "admins only"
	}
	return errcode.Errorf(wire.CodeForbidden, "%s is %s, and conversation sandboxes are for %s ([sessions] who = %q)", name, article(role), allowed, who)
}

func article(role string) string {
	if role == "admin" || role == "editor" {
		return "an " + role
	}
	return "a " + role
}

// acquire finds the principal's session, making it when create (within
// [sessions] max_sessions_per_principal and max_sessions, else
// too_many_sessions and nothing made), marks it used when touch (a session
// made is), and holds it against expiry and deletion until release is
// called.
func (s *Service) acquire(ctx context.Context, principal, session string, create, touch bool) (Session, func(), error) {
	if err := CheckID(session); err != nil {
		return Session{}, nil, err
	}
	st, _, err := s.parts()
	if err != nil {
		return Session{}, nil, err
	}
	id := BackendID(principal, session)
	s.reconciling.RLock()
	defer s.reconciling.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleting[id] {
		if !create {
			return Session{}, nil, NotFound(session)
		}
		return Session{}, nil, errcode.Errorf(wire.CodeFailed, "the session %q is being deleted; call again in a moment to start it afresh", session)
	}
	se, ok, err := st.Get(ctx, principal, session)
	if err != nil {
		return Session{}, nil, err
	}
	switch {
	case !ok && !create:
		return Session{}, nil, NotFound(session)
	case !ok:
		// The caps hold for new sessions only: a session already there
		// keeps working when a reload lowers them. Checked before
		// anything of the session is made, under mu, which every
		// create holds.
		if err := s.checkNewSession(ctx, st, principal, session); err != nil {
			return Session{}, nil, err
		}
		if se, _, err = st.Touch(ctx, principal, session, id, s.cfg.Network, s.storeNow(st)); err != nil {
			return Session{}, nil, err
		}
		s.fresh[id] = true
	default:
		delete(s.fresh, id)
		if touch {
			if se, _, err = st.Touch(ctx, principal, session, id, s.cfg.Network, s.storeNow(st)); err != nil {
				return Session{}, nil, err
			}
		}
	}
	s.busy[id]++
	release := sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.busy[id]--; s.busy[id] <= 0 {
			delete(s.busy, id)
			delete(s.fresh, id)
		}
	})
	return se, release, nil
}

// Get returns the principal's session.
func (s *Service) Get(ctx context.Context, principal, session string) (Session, error) {
	if err := CheckID(session); err != nil {
		return Session{}, err
	}
	st, _, err := s.parts()
	if err != nil {
		return Session{}, err
	}
	se, ok, err := st.Get(ctx, principal, session)
	if err != nil {
		return Session{}, err
	}
	if !ok {
		return Session{}, NotFound(session)
	}
	return se, nil
}

// List returns the sessions of principal, or of everyone when all.
func (s *Service) List(ctx context.Context, principal string, all bool) ([]Session, error) {
	st, _, err := s.parts()
	if err != nil {
		return nil, err
	}
	if all {
		principal = ""
	}
	return st.List(ctx, principal)
}

// Expires is when a session is deleted if it is not used before.
func (s *Service) Expires(se Session) time.Time {
	return se.LastUsed.Add(time.Duration(s.Config().KeepHours) * time.Hour)
}

// SetNetwork sets the network of the principal's session, making the
// session if it is not there yet. Its next run gets a sandbox with that
// network, on the same files.
func (s *Service) SetNetwork(ctx context.Context, principal, session, network string) (Session, error) {
	if !slices.Contains(config.SessionNetworks, network) {
		return Session{}, errcode.Errorf(wire.CodeBadArgs, "a session's network is \"off\", \"web\" or \"packages\", not %q", network)
	}
	s.mu.Lock()
	noProxy := !s.proxy.IsValid()
	s.mu.Unlock()
	if network == config.SessionNetworkPackages && noProxy {
		return Session{}, errcode.New(wire.CodeUnsupported, "this host runs no egress proxy, so a session can't have the \"packages\" network: "+
			"list the package index's hosts in [sessions] package_hosts and restart the host")
	}
	st, b, err := s.prepared(ctx)
	if err != nil {
		return Session{}, err
	}
	se, release, err := s.acquire(ctx, principal, session, true, true)
	if err != nil {
		return Session{}, err
	}
	defer release()
	if _, err := st.SetNetwork(ctx, principal, session, network); err != nil {
		return Session{}, err
	}
	if se.Network != network {
		s.log.Info("session network changed", "session", describe(se), "from", se.Network, "to", network)
	}
	// The sandbox running now has the old network: what an earlier run left
	// in it (a process reading /work and sending out what it finds) must not
	// see a file that comes after the switch. Its files stay; the next run
	// starts a new sandbox. Stopped even when the network is the same, so a
	// call again after a failed stop stops it.
	if err := b.StopSession(ctx, se.Backend); err != nil {
		return Session{}, fmt.Errorf("the session's network is now %q, but its running sandbox, which still has the old one, could not be stopped: %w; call again to stop it", network, err)
	}
	se.Network = network
	return se, nil
}

// Stop stops the sandbox of the principal's session, if one runs: a run
// going on in it ends, its files stay, and the next run starts a new
// sandbox. The session is not marked used.
func (s *Service) Stop(ctx context.Context, principal, session string) error {
	_, b, err := s.prepared(ctx)
	if err != nil {
		return err
	}
	se, release, err := s.acquire(ctx, principal, session, false, false)
	if err != nil {
		return err
	}
	defer release()
	if err := b.StopSession(ctx, se.Backend); err != nil && !errcode.Has(err, wire.CodeNotFound) {
		return fmt.Errorf("the sandbox of the session %q could not be stopped: %w; its files are kept", session, err)
	}
	s.log.Info("session sandbox stopped", "session", describe(se))
	return nil
}

// Delete removes the principal's session: its sandbox and files at once,
// then its record. The ledger of its runs stays.
func (s *Service) Delete(ctx context.Context, principal, session string) error {
	if err := CheckID(session); err != nil {
		return err
	}
	st, b, err := s.prepared(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	se, ok, err := st.Get(ctx, principal, session)
	switch {
	case err != nil:
		s.mu.Unlock()
		return err
	case !ok || s.deleting[se.Backend]:
		s.mu.Unlock()
		return NotFound(session)
	}
	s.deleting[se.Backend] = true
	s.mu.Unlock()
	err = s.remove(ctx, st, b, se)
	if err == nil {
		s.log.Info("session deleted", "session", describe(se))
	}
	return err
}

// remove deletes a session marked deleting from the backend and the store,
// and unmarks it.
func (s *Service) remove(ctx context.Context, st *Store, b Backend, se Session) error {
	defer func() {
		s.mu.Lock()
		delete(s.deleting, se.Backend)
		s.mu.Unlock()
	}()
	if err := b.DeleteSession(ctx, se.Backend); err != nil && !errcode.Has(err, wire.CodeNotFound) {
		return fmt.Errorf("the session %q can't be deleted: %w", se.ID, err)
	}
	return st.Delete(ctx, se.Principal, se.ID)
}

// Expire deletes the sessions unused for [sessions] keep_hours, but not
// those with a run or file operation going on, and returns them. The
// ledger of their runs stays.
func (s *Service) Expire(ctx context.Context) ([]Session, error) {
	st, b, err := s.prepared(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := s.storeNow(st).Add(-time.Duration(s.Config().KeepHours) * time.Hour)
	s.mu.Lock()
	old, err := st.Unused(ctx, cutoff, s.hostID)
	var take []Session
	for _, se := range old {
		if s.busy[se.Backend] > 0 || s.deleting[se.Backend] {
			continue
		}
		s.deleting[se.Backend] = true
		take = append(take, se)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var done []Session
	var errs []error
	for _, se := range take {
		if err := s.remove(ctx, st, b, se); err != nil {
			s.log.Error("an expired session could not be deleted; trying again later", "session", describe(se), "error", err)
			errs = append(errs, err)
			continue
		}
		s.log.Info("session expired and deleted", "session", describe(se), "last_used", se.LastUsed)
		done = append(done, se)
	}
	return done, errors.Join(errs...)
}

// ExpireEvery runs Expire every interval until ctx ends.
func (s *Service) ExpireEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Expire(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("expiring sessions", "error", err)
			}
		}
	}
}

// Reconcile is called at start: the backend stops every sandbox, keeps the
// workspaces of every session the store knows and deletes the others. It
// returns the backend ids removed.
func (s *Service) Reconcile(ctx context.Context) ([]string, error) {
	s.reconciling.Lock()
	defer s.reconciling.Unlock()
	st, b, err := s.parts()
	if err != nil {
		return nil, err
	}
	keep, err := st.BackendIDs(ctx)
	if err != nil {
		return nil, err
	}
	removed, err := b.Reconcile(ctx, keep)
	if err != nil {
		return removed, fmt.Errorf("reconciling the sessions' sandboxes and files with the store: %w", err)
	}
	if len(removed) > 0 {
		s.log.Warn("removed sandboxes and workspaces no session owns", "removed", fmt.Sprint(removed))
	}
	s.log.Info("sessions reconciled", "kept", len(keep), "removed", len(removed))
	return removed, nil
}

// Files lists the files of the principal's session.
func (s *Service) Files(ctx context.Context, principal, session string) ([]File, error) {
	_, b, err := s.prepared(ctx)
	if err != nil {
		return nil, err
	}
	se, release, err := s.acquire(ctx, principal, session, false, false)
	if err != nil {
		return nil, err
	}
	defer release()
	files, err := b.ListFiles(ctx, se.Backend)
	if errcode.Has(err, wire.CodeNotFound) {
		return []File{}, nil // a session with no workspace yet has no files
	}
	return files, err
}

// OpenFile opens a file of the principal's session to read, and says its
// size (-1: not known); larger than max bytes is too_large. The reader holds
// a chunk at most, whatever the file's size, and the session counts as in
// use until it is closed. Its caller holds a Transfer until the reader is
// closed.
func (s *Service) OpenFile(ctx context.Context, principal, session, path string, max int64) (io.ReadCloser, int64, error) {
	if err := CheckPath(path); err != nil {
		return nil, 0, err
	}
	_, b, err := s.prepared(ctx)
	if err != nil {
		return nil, 0, err
	}
	se, release, err := s.acquire(ctx, principal, session, false, false)
	if err != nil {
		return nil, 0, err
	}
	r, size, err := b.OpenFile(ctx, se.Backend, path, max)
	if err != nil {
		release()
		return nil, 0, err
	}
	return closethen.Reader(r, release), size, nil
}

// WriteFile writes r to a file of the principal's session, making the
// session if it is not there yet (within the caps on sessions: refused,
// nothing is made and r is not read). A session it made is taken back
// when the write fails. Its caller holds a Transfer around it.
func (s *Service) WriteFile(ctx context.Context, principal, session, path string, r io.Reader) (File, error) {
	if err := CheckPath(path); err != nil {
		return File{}, err
	}
	st, b, err := s.prepared(ctx)
	if err != nil {
		return File{}, err
	}
	se, release, err := s.acquire(ctx, principal, session, true, true)
	if err != nil {
		return File{}, err
	}
	defer release()
	f, err := b.WriteFile(ctx, se.Backend, path, r)
	if err != nil {
		s.takeBack(ctx, st, b, se)
	}
	return f, err
}

// takeBack deletes a session that acquire made for an upload that then
// failed (too large, no room, the caller went away), so that it holds no
// place under the caps: unless anything else acquired it meanwhile, and
// while the upload still holds it. The ledger is not touched.
func (s *Service) takeBack(ctx context.Context, st *Store, b Backend, se Session) {
	s.mu.Lock()
	if !s.fresh[se.Backend] || s.busy[se.Backend] != 1 || s.deleting[se.Backend] {
		s.mu.Unlock()
		return
	}
	delete(s.fresh, se.Backend)
	s.deleting[se.Backend] = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.remove(ctx, st, b, se); err != nil {
		s.log.Error("a session made by a failed upload could not be taken back; it expires as any other", "session", describe(se), "error", err)
		return
	}
	s.log.Info("a session made by a failed upload was taken back", "session", describe(se))
}

// RemoveFile removes a file of the principal's session.
func (s *Service) RemoveFile(ctx context.Context, principal, session, path string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	_, b, err := s.prepared(ctx)
	if err != nil {
		return err
	}
	se, release, err := s.acquire(ctx, principal, session, false, true)
	if err != nil {
		return err
	}
	defer release()
	return b.RemoveFile(ctx, se.Backend, path)
}

// Runs reads the ledger.
func (s *Service) Runs(ctx context.Context, f RunFilter) ([]RunEntry, error) {
	st, _, err := s.parts()
	if err != nil {
		return nil, err
	}
	return st.Runs(ctx, f)
}

// ProxyPassword is the egress proxy's password of a backend id: an HMAC
// under a key of this host process, so it is never stored and a restart
// changes every one.
func (s *Service) ProxyPassword(backend string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(backend))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// ProxyURL is the proxy a packages run is given: its credentials are the
// session's backend id and password. "" when there is no proxy.
func (s *Service) ProxyURL(backend string) string {
	s.mu.Lock()
	addr := s.proxy
	s.mu.Unlock()
	if !addr.IsValid() {
		return ""
	}
	return "http://" + backend + ":" + s.ProxyPassword(backend) + "@" + addr.String()
}

// CheckProxy is the egress proxy's check of the credentials a sandbox
// presents: the session they name, if the password is that session's and
// its network is packages now.
func (s *Service) CheckProxy(ctx context.Context, user, pass string) (Session, bool) {
	want := s.ProxyPassword(user)
	if subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 {
		return Session{}, false
	}
	st, _, err := s.parts()
	if err != nil {
		return Session{}, false
	}
	se, ok, err := st.ByBackend(ctx, user)
	if err != nil || !ok || se.Network != config.SessionNetworkPackages {
		return se, false
	}
	return se, true
}
