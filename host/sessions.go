package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/egress"
	"github.com/toolhost/toolhost/host/plugins"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// hostSessions puts conversation sandboxes ([sessions]) into the host:
//
//   - PrepareState (serve only) opens the store, <state_dir>/toolhost.db;
//   - Start finds the python plugin's Sessions service (the backend),
//     starts the egress proxy when package_hosts lists hosts, configures
//     the backend, reconciles it with the store (every sandbox stopped,
//     the workspaces of unknown sessions removed), serves the built-in
//     session tools and expires unused sessions every minute;
//   - every call passes the dispatcher's gate (a session tool needs a
//     session and a role [sessions] who allows), and the python kind's
//     invoker is wrapped so that a session tool's run gets its session's
//     backend id, network and proxy URL, and lands in the ledger;
//   - Reload applies who, the limits, keep_hours and package_hosts;
//     enabled and proxy_listen wait for the next start;
//   - Stop stops the expiry, the proxy, and closes the store.
type hostSessions struct {
	h   *Host
	svc *sessions.Service
	// enabled is [sessions] enabled at start.
	enabled bool
	// backendOf finds the backend: the sessions kind's Sessions service.
	// Tests may replace it.
	backendOf func() (sessions.Backend, error)

	mu       sync.Mutex
	store    *sessions.Store
	attached sessions.Backend
	// kind is the kind that keeps the sessions, once attached, and
	// tools the session tools it declared (sdk.Info.SessionTools).
	kind       string
	tools      []sdk.SessionTool
	proxy      *egress.Proxy
	stopExpiry context.CancelFunc
}

func newHostSessions(h *Host, cfg *config.Config) *hostSessions {
	hs := &hostSessions{
		h:       h,
		enabled: cfg.Sessions.Enabled,
		svc:     sessions.New(sessions.Options{Config: cfg.Sessions, File: cfg.File, Log: h.log.Named("sessions")}),
	}
	hs.backendOf = hs.pluginBackend
	h.runs.SetGate(hs.gate)
	return hs
}

// gate is the dispatcher's check of every call: see sessions.Admit; and a
// call of a session tool whose run would make a session past the caps is
// refused before it starts (sessions.CheckNew).
func (hs *hostSessions) gate(req runs.Request, tool *tools.Tool) error {
	kind, _ := hs.h.kindInfo(tool.Kind)
	if err := hs.svc.Admit(req.Principal, roleOf(hs.h.config(), req.Principal), req.Session, tool.Name, kind, tool.Run); err != nil {
		return err
	}
	if _, ok := sessions.Language(kind, tool.Run); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.svc.CheckNew(ctx, req.Principal, req.Session)
}

// roleOf is the role of a principal under cfg: its token's, or admin for
// the local caller of a host with no tokens; "" for one it does not know.
func roleOf(cfg *config.Config, principal string) string {
	if len(cfg.Tokens) == 0 {
		if principal == auth.LocalName {
			return auth.Admin
		}
		return ""
	}
	for _, t := range cfg.Tokens {
		if t.Name == principal {
			return t.Role
		}
	}
	return ""
}

// wrap is the invoker of a kind: the one that keeps conversation sandboxes
// (sdk.Info.ServesSessions) runs its session tools in their sessions.
func (hs *hostSessions) wrap(p *plugins.Plugin) runs.Invoker {
	if !p.Info().ServesSessions || !hs.enabled {
		return p
	}
	return hs.svc.Invoker(p)
}

// open opens the store ([store]'s PostgreSQL database, or the SQLite file
// in the state folder); what goes wrong leaves sessions unavailable,
// saying why, and the rest of the host serving.
func (hs *hostSessions) open(ctx context.Context, stateDir string) {
	if !hs.enabled {
		return
	}
	st, err := sessions.Open(ctx, hs.h.config().Store, stateDir)
	if err != nil {
		hs.h.log.Error("conversation sandboxes are unavailable: their store can't be opened", "error", err)
		hs.svc.SetUnavailable(err.Error())
		return
	}
	hs.mu.Lock()
	hs.store = st
	hs.mu.Unlock()
	hs.h.log.Debug("sessions store opened", "database", st.Path())
}

// start makes sessions ready, once the plugins run. Without a store
// (toolhost check, or one that could not be opened) it does nothing.
func (hs *hostSessions) start(ctx context.Context) {
	hs.mu.Lock()
	st := hs.store
	hs.mu.Unlock()
	if !hs.enabled || st == nil {
		return
	}
	fail := func(why string) {
		hs.h.log.Error("conversation sandboxes are unavailable", "why", why)
		hs.svc.SetUnavailable(why)
	}
	p, err := hs.sessionsKind()
	if err != nil {
		fail(err.Error())
		return
	}
	b, err := hs.backendOf()
	if err != nil {
		fail(err.Error())
		return
	}
	cfg := hs.h.config()
	hs.startProxy(ctx, cfg)
	if err := b.ConfigureSessions(ctx, hs.svc.BackendConfig()); err != nil {
		fail(fmt.Sprintf("the %s kind can't serve conversation sandboxes: %v", p.Info().Kind, err))
		return
	}
	hs.svc.Attach(st, b)
	hs.mu.Lock()
	hs.attached, hs.kind, hs.tools = b, p.Info().Kind, p.Info().SessionTools
	hs.mu.Unlock()
	if _, err := hs.svc.Reconcile(ctx); err != nil {
		hs.h.log.Error("sessions could not be reconciled at start; their files are kept", "error", err)
	}
	expiry, cancel := context.WithCancel(context.Background())
	hs.mu.Lock()
	hs.stopExpiry = cancel
	hs.mu.Unlock()
	go hs.svc.ExpireEvery(expiry, time.Minute)
}

// startProxy starts the egress proxy of packages sessions when
// package_hosts lists hosts; without it, no session may have the packages
// network.
func (hs *hostSessions) startProxy(ctx context.Context, cfg *config.Config) {
	if len(cfg.Sessions.PackageHosts) == 0 {
		return
	}
	listen := egress.DefaultListen()
	if cfg.Sessions.ProxyListen != "" {
		listen = netip.MustParseAddrPort(cfg.Sessions.ProxyListen) // checked by config
	}
	p, err := egress.New(ctx, egress.Options{
		Listen: listen, AllowedHosts: cfg.Sessions.PackageHosts, Log: hs.h.log.Named("sessions"),
		Auth: func(user, pass string) (string, bool) {
			actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			se, ok := hs.svc.CheckProxy(actx, user, pass)
			if se.Backend == "" {
				return user, ok
			}
			return se.ID + " of " + se.Principal + " (" + se.Backend + ")", ok
		},
	})
	if err != nil {
		hs.h.log.Error("the egress proxy of packages sessions did not start; no session may have the packages network", "error", err)
		return
	}
	hs.mu.Lock()
	hs.proxy = p
	hs.mu.Unlock()
	hs.svc.SetProxy(p.Addr())
}

// withTools adds the session tools the sessions kind declared to defs
// when sessions are served, but not one whose name a tool of the config
// already has.
func (hs *hostSessions) withTools(defs []config.Tool) []config.Tool {
	if hs.svc.Ready() != nil {
		return defs
	}
	hs.mu.Lock()
	kind, declared := hs.kind, hs.tools
	hs.mu.Unlock()
	for _, t := range sessions.Tools(kind, declared) {
		if slices.ContainsFunc(defs, func(d config.Tool) bool { return d.Name == t.Name }) {
			hs.h.log.Warn("a tool of the config has the name of a built-in session tool, which is not served", "tool", t.Name)
			continue
		}
		defs = append(defs, t)
	}
	return defs
}

// reload puts a new [sessions] in force.
func (hs *hostSessions) reload(ctx context.Context, cfg *config.Config) {
	s := cfg.Sessions
	old := hs.svc.Config()
	if s.Enabled != hs.enabled || s.ProxyListen != old.ProxyListen {
		hs.h.log.Warn("[sessions] enabled and proxy_listen take effect at the next start")
		s.Enabled = hs.enabled
	}
	hs.svc.SetConfig(s, cfg.File)
	hs.mu.Lock()
	proxy := hs.proxy
	hs.mu.Unlock()
	if proxy != nil && len(s.PackageHosts) > 0 {
		if err := proxy.SetAllowedHosts(s.PackageHosts); err != nil {
			hs.h.log.Error("the egress proxy kept its hosts", "error", err)
		}
	} else if len(s.PackageHosts) > 0 || proxy != nil {
		hs.h.log.Warn("[sessions] package_hosts turns the egress proxy on or off at the next start; its hosts are kept until then")
	}
	if hs.svc.Ready() != nil {
		return
	}
	if b := hs.backend(); b != nil {
		if err := b.ConfigureSessions(ctx, hs.svc.BackendConfig()); err != nil {
			hs.h.log.Error("the sessions kind refused the new [sessions] limits; the earlier ones hold", "error", err)
		}
	}
}

// backend is the backend the service was attached to, if any.
func (hs *hostSessions) backend() sessions.Backend {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.attached
}

// stop stops the expiry and the proxy and closes the store.
func (hs *hostSessions) stop(ctx context.Context) {
	hs.mu.Lock()
	stop, proxy := hs.stopExpiry, hs.proxy
	hs.stopExpiry, hs.proxy, hs.store, hs.attached = nil, nil, nil, nil
	hs.mu.Unlock()
	if stop != nil {
		stop()
	}
	if proxy != nil {
		if err := proxy.Close(ctx); err != nil {
			hs.h.log.Warn("the egress proxy did not close cleanly", "error", err)
		}
	}
	if err := hs.svc.Close(); err != nil {
		hs.h.log.Warn("the sessions store did not close cleanly", "error", err)
	}
}

// sessionsPlugin is a plugin whose kind's Sessions service can be reached.
type sessionsPlugin interface {
	Sessions(ctx context.Context) (*hostside.SessionsClient, error)
}

// sessionsKind finds the running kind that keeps conversation sandboxes:
// the one whose plugin says so in Describe (sdk.Info.ServesSessions).
func (hs *hostSessions) sessionsKind() (*plugins.Plugin, error) {
	var keepers, running []string
	var keeper *plugins.Plugin
	for _, kind := range hs.h.plugins.Kinds() {
		running = append(running, kind)
		if p, ok := hs.h.plugins.Kind(kind); ok && p.Info().ServesSessions {
			keepers, keeper = append(keepers, kind), p
		}
	}
	switch len(keepers) {
	case 1:
		return keeper, nil
	case 0:
		why := "they need a kind that keeps them, and none of the running ones does"
		if len(running) == 0 {
			why = "they need a kind that keeps them, and no kind is running"
		} else {
			why += " (" + strings.Join(running, ", ") + "; a plugin built before this host may not say it does: build it from the same source, make build)"
		}
		var down []string
		for kind, reason := range hs.h.unavailable {
			down = append(down, fmt.Sprintf("the %s kind is not running: %s", kind, reason))
		}
		slices.Sort(down)
		if len(down) > 0 {
			why += "; " + strings.Join(down, "; ")
		}
		return nil, errors.New(why)
	}
	return nil, fmt.Errorf("the kinds %s each keep conversation sandboxes, and a host serves one kind's: take all but one out of the plugin folder", strings.Join(keepers, " and "))
}

// pluginBackend finds the Sessions service of the kind that keeps them.
func (hs *hostSessions) pluginBackend() (sessions.Backend, error) {
	p, err := hs.sessionsKind()
	if err != nil {
		return nil, err
	}
	sp, ok := any(p).(sessionsPlugin)
	if !ok {
		return nil, fmt.Errorf("this build of the host can't reach the %s plugin's Sessions service", p.Info().Kind)
	}
	return &pluginBackend{p: p, sp: sp, hs: hs}, nil
}

// pluginBackend is a plugin's Sessions service as a backend. A
// plugin that was restarted since it was configured is configured again,
// and reconciled with the store, before the next run or file operation.
type pluginBackend struct {
	p  *plugins.Plugin
	sp sessionsPlugin
	hs *hostSessions

	mu         sync.Mutex
	configured bool
	restarts   int // the plugin's restarts when it was last configured
}

func (b *pluginBackend) client(ctx context.Context) (*hostside.SessionsClient, error) {
	return b.sp.Sessions(ctx)
}

// Prepare configures a restarted plugin again and reconciles it.
func (b *pluginBackend) Prepare(ctx context.Context) error {
	b.mu.Lock()
	same := b.configured && b.restarts == b.p.Restarts()
	b.mu.Unlock()
	if same {
		return nil
	}
	if err := b.ConfigureSessions(ctx, b.hs.svc.BackendConfig()); err != nil {
		return err
	}
	if _, err := b.hs.svc.Reconcile(ctx); err != nil {
		b.hs.h.log.Error("a restarted plugin's sessions could not be reconciled", "error", err)
	}
	return nil
}

func (b *pluginBackend) ConfigureSessions(ctx context.Context, cfg sessions.Config) error {
	restarts := b.p.Restarts()
	c, err := b.client(ctx)
	if err != nil {
		return err
	}
	if err := c.ConfigureSessions(ctx, cfg); err != nil {
		return err
	}
	b.mu.Lock()
	b.configured, b.restarts = true, restarts
	b.mu.Unlock()
	return nil
}

func (b *pluginBackend) ListFiles(ctx context.Context, id string) ([]sessions.File, error) {
	c, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.ListFiles(ctx, id)
}

func (b *pluginBackend) OpenFile(ctx context.Context, id, path string, max int64) (io.ReadCloser, int64, error) {
	c, err := b.client(ctx)
	if err != nil {
		return nil, 0, err
	}
	return c.OpenFile(ctx, id, path, max)
}

func (b *pluginBackend) WriteFile(ctx context.Context, id, path string, r io.Reader) (sessions.File, error) {
	c, err := b.client(ctx)
	if err != nil {
		return sessions.File{}, err
	}
	return c.WriteFile(ctx, id, path, r)
}

func (b *pluginBackend) RemoveFile(ctx context.Context, id, path string) error {
	c, err := b.client(ctx)
	if err != nil {
		return err
	}
	return c.RemoveFile(ctx, id, path)
}

func (b *pluginBackend) StopSession(ctx context.Context, id string) error {
	c, err := b.client(ctx)
	if err != nil {
		return err
	}
	return c.StopSession(ctx, id)
}

func (b *pluginBackend) DeleteSession(ctx context.Context, id string) error {
	c, err := b.client(ctx)
	if err != nil {
		return err
	}
	return c.DeleteSession(ctx, id)
}

func (b *pluginBackend) Reconcile(ctx context.Context, keep []string) ([]string, error) {
	c, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Reconcile(ctx, keep)
}
