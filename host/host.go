// Package host is the toolhost server put together: it starts the kind
// plugins, loads and checks the tools, and serves the API, until it is
// told to stop; then it stops everything it started.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/plugins"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/host/ui"
	"github.com/toolhost/toolhost/sdk"
)

// Version is the host's version, set at build time.
var Version = "dev"

// Host is one running toolhost.
type Host struct {
	cfgMu sync.RWMutex
	// toolsMu makes loads of the tools one at a time, so the last to
	// start is the last to replace the served set.
	toolsMu sync.Mutex
	// loads counts tool loads, so a late re-check of an older load stops.
	loads    atomic.Int64
	cfg      *config.Config
	log      hclog.Logger
	plugins  *plugins.Manager
	registry *tools.Registry
	runs     *runs.Dispatcher
	api      *api.Server
	http     *http.Server
	sessions *hostSessions
	// ownLedger is the store of budgets and keys when sessions opened none (budgets.go).
	ownLedger *sessions.Store
	// store is the store the dispatcher's ledger is kept in (openLedger);
	// nil when none could be opened. /healthz pings it.
	store atomic.Pointer[sessions.Store]
	// lease is the host's lease in the store (cluster.go); nil without a store.
	lease *lease
	// unavailable says why a kind could not be started, by kind.
	unavailable map[string]string
	// reloadsApplied and reloadsRefused count ReloadFile's outcomes, for /healthz.
	reloadsApplied, reloadsRefused atomic.Uint64
}

// New builds a host from a loaded config. Start brings it up.
func New(cfg *config.Config, log hclog.Logger) *Host { return newHost(cfg, log, false) }

// NewForCheck builds a host that only checks the config and its tools (toolhost check): its
// plugins are told so (sdk.CheckOnly) and may skip what only serving needs.
func NewForCheck(cfg *config.Config, log hclog.Logger) *Host { return newHost(cfg, log, true) }

func newHost(cfg *config.Config, log hclog.Logger, checkOnly bool) *Host {
	h := &Host{cfg: cfg, log: log, registry: tools.NewRegistry(), unavailable: map[string]string{}}
	h.runs = runs.NewDispatcher(h.registry, h.invoker, log.Named("runs"), time.Duration(cfg.Runs.KeepMinutes)*time.Minute)
	h.runs.SetCallers(callers(cfg))
	h.runs.SetBudgets(budgets(cfg))
	h.runs.SetKindInfo(h.kindInfo)
	h.sessions = newHostSessions(h, cfg)
	h.runs.SetApprovals(h.approvalPolicy(cfg))
	h.plugins = plugins.NewManager(plugins.Options{
		Dir:          cfg.Plugins.Dir,
		Pins:         cfg.Plugins.SHA256,
		PinsFile:     cfg.Plugins.SHA256File,
		StartTimeout: time.Duration(cfg.Plugins.StartTimeoutSeconds) * time.Second,
		KindConfig:   h.kindConfig,
		Host:         h.runs.ForKind,
		Logger:       log.Named("plugin"),
		PinsHint:     pinsHint(cfg),
		CheckOnly:    checkOnly,
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(pluginCollector{h}, capCollector{h}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h.api = api.New(api.Options{
		Registry:       h.registry,
		Dispatcher:     h.runs,
		Check:          h.CheckTool,
		Logger:         log.Named("api"),
		AllowedOrigins: cfg.Server.AllowedOrigins,
		Version:        Version,
		Tokens:         auth.New(cfg.Tokens),
		UI:             ui.Handler(),
		Metrics:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		ToolFiles:      &toolFiles{h: h},
		Sessions:       h.sessions.svc,
		Kinds:          h.kindInfo,
		Reloads:        func() (uint64, uint64) { return h.reloadsApplied.Load(), h.reloadsRefused.Load() },
		Store:          h.pingStore,
	})
	return h
}

// PrepareState makes the host's state folder ([server] state_dir) ready
// and keeps the older output of runs in a private folder under it; it
// removes what an earlier host process left there. Without it, runs keep
// all their output in memory. serve calls it before Start; check does
// not, so it never touches the running service's files.
func (h *Host) PrepareState() error {
	dir := h.config().Server.StateDir
	sd, err := runs.OpenSpillDir(dir)
	if err != nil {
		return fmt.Errorf("the state folder can't be used ([server] state_dir = %q in %s): %w", dir, h.config().File, err)
	}
	h.runs.SpillTo(sd, runs.DefaultMemoryBytes)
	h.log.Debug("run output beyond memory goes to disk", "folder", sd.Path())
	h.sessions.open(context.Background(), dir)
	h.openLedger(context.Background(), dir)
	if st := h.store.Load(); st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Ping(ctx); err != nil {
			h.log.Error("the store's database can't be reached: the host serves without it, refusing new calls (store_unavailable) "+
				"and answering 503 at /healthz, and picks it up by itself once it is back", "error", err)
		}
	}
	return nil
}

// pingStore says whether the store answers, for /healthz: nil without
// one (budgets and keys are then in memory, which always answers).
func (h *Host) pingStore(ctx context.Context) error {
	st := h.store.Load()
	if st == nil {
		return nil
	}
	return st.Ping(ctx)
}

// callers says what each principal may do under cfg: the token's limit
// on runs going at once, or why it may no longer run tools.
func callers(cfg *config.Config) runs.Callers {
	byName := make(map[string]config.Token, len(cfg.Tokens))
	for _, t := range cfg.Tokens {
		byName[t.Name] = t
	}
	perToken := cfg.Runs.MaxRunningPerToken
	return func(principal string) runs.Caller {
		if len(byName) == 0 {
			if principal == auth.LocalName {
				return runs.Caller{MaxRunning: perToken, Who: `the caller "local" (every caller on this machine, as no tokens are configured)`, Setting: "[runs] max_running_per_token"}
			}
			return runs.Caller{Refused: fmt.Sprintf("the token %q was removed from the config", principal)}
		}
		tok, ok := byName[principal]
		switch {
		case !ok && principal == auth.LocalName:
			return runs.Caller{Refused: "this host now needs a token, and the run was started without one"}
		case !ok:
			return runs.Caller{Refused: fmt.Sprintf("the token %q was removed from the config", principal)}
		case !(auth.Identity{Role: tok.Role}).CanCall():
			return runs.Caller{Refused: fmt.Sprintf("the token %q is a %s now, and may not run tools", principal, tok.Role)}
		}
		c := runs.Caller{MaxRunning: cfg.MaxRunningOf(tok), Who: fmt.Sprintf("the token %q", principal), Setting: "its max_running"}
		if tok.MaxRunning == 0 {
			c.Setting = "[runs] max_running_per_token"
		}
		return c
	}
}

func pinsHint(cfg *config.Config) string {
	if cfg.File == "" {
		return "[plugins.sha256] in toolhost.toml"
	}
	return "[plugins.sha256] in " + cfg.File
}

// kindConfig is the table handed to a kind's Configure: its table of the
// config in force, with the paths its schema marks resolved.
func (h *Host) kindConfig(kind string, info sdk.Info) json.RawMessage {
	return kindTable(h.config(), kind, info, h.log)
}

func kindTable(cfg *config.Config, kind string, info sdk.Info, log hclog.Logger) json.RawMessage {
	raw, err := cfg.KindTable(kind, info.ConfigSchema)
	if err != nil {
		// The plugin's schema is broken: its paths stay as written, and
		// its Configure says what it makes of them.
		log.Error("the kind's config schema can't be read", "kind", kind, "error", err)
		raw, _ = cfg.KindTable(kind, nil)
	}
	return raw
}

// configErrors splits a kind's refusal of its table: the problems with a
// value, placed at their file and line, and the rest (the machine can't run
// the kind), which stays the plugin's problem.
func configErrors(cfg *config.Config, err error) (config.Errors, error) {
	var ce *plugins.ConfigError
	if !errors.As(err, &ce) {
		return nil, err
	}
	var placed config.Errors
	var rest sdk.FieldErrors
	for _, fe := range ce.Errors {
		if fe.Path == "" {
			rest = append(rest, fe)
			continue
		}
		placed = append(placed, cfg.KindError(ce.Kind, fe.Path, fe.Message))
	}
	if len(rest) == 0 {
		return placed, nil
	}
	return placed, &plugins.ConfigError{Kind: ce.Kind, Errors: rest}
}

func (h *Host) invoker(kind string) (runs.Invoker, bool) {
	p, ok := h.plugins.Kind(kind)
	if !ok {
		return nil, false
	}
	return h.sessions.wrap(p), true
}

// kindInfo is what a running kind said of itself in Describe.
func (h *Host) kindInfo(kind string) (sdk.Info, bool) {
	p, ok := h.plugins.Kind(kind)
	if !ok {
		return sdk.Info{}, false
	}
	return p.Info(), true
}

func (h *Host) kinds(kind string) (tools.Checker, bool, string) {
	if p, ok := h.plugins.Kind(kind); ok {
		return p, true, ""
	}
	return nil, false, h.unavailable[kind]
}

// Problems is what Start found wrong: values of the config a kind refused
// or no kind takes, plugins not started and tools not served. The host
// serves everything else.
type Problems struct {
	// Config are problems with the config file, at their file and line:
	// a value a kind refused, a table that names no kind.
	Config  config.Errors
	Plugins []plugins.Problem
	Tools   config.Errors
}

// Empty says whether nothing is wrong.
func (p Problems) Empty() bool {
	return len(p.Config) == 0 && len(p.Plugins) == 0 && len(p.Tools) == 0
}

// Count is how many problems there are.
func (p Problems) Count() int { return len(p.Config) + len(p.Plugins) + len(p.Tools) }

// Start starts the plugins and loads the tools. What can't be used is
// reported in Problems and left out; the rest is served.
func (h *Host) Start(ctx context.Context) Problems {
	var pr Problems
	cfg := h.config()
	var failed []string
	for _, p := range h.plugins.Start(ctx) {
		placed, rest := configErrors(cfg, p.Err)
		pr.Config = append(pr.Config, placed...)
		why := ""
		if rest != nil {
			p.Err = rest
			pr.Plugins = append(pr.Plugins, p)
			why = p.Error()
		} else {
			why = fmt.Sprintf("the %s kind can't work with its config: %s", p.Kind, placed.Error())
		}
		if p.Kind != "" {
			h.unavailable[p.Kind] = why
			failed = append(failed, p.Kind)
		}
		h.log.Error("plugin not started", "kind", p.Kind, "why", why)
	}
	pr.Config = append(pr.Config, cfg.StrayKindTables(h.plugins.Kinds(), failed)...)
	m, merrs := modelOf(cfg)
	h.runs.SetModel(m)
	pr.Config = append(pr.Config, merrs...)
	h.sessions.start(ctx)
	pr.Tools = h.loadTools(ctx)
	return pr
}

// config is the config in force.
func (h *Host) config() *config.Config {
	h.cfgMu.RLock()
	defer h.cfgMu.RUnlock()
	return h.cfg
}

// loadTools checks every tool of the config in force and serves those that
// pass, all at once.
func (h *Host) loadTools(ctx context.Context) config.Errors {
	h.toolsMu.Lock()
	defer h.toolsMu.Unlock()
	defs, errs := h.config().AllTools()
	defs = h.sessions.withTools(defs)
	checked, cerrs, later := tools.CheckAll(ctx, defs, h.kinds)
	problems := append(errs, cerrs...)
	for _, e := range problems {
		h.log.Error("tool not served", "where", e.Error())
	}
	h.registry.Replace(checked)
	// After Replace, so a re-check never adds to the set this load replaces.
	if gen := h.loads.Add(1); len(later) > 0 {
		go h.recheck(gen, later)
	}
	h.log.Info("tools loaded", "served", len(checked), "refused", len(problems), "kinds", fmt.Sprint(h.plugins.Kinds()))
	return problems
}

// recheck checks again, with backoff, the tools their plugin could not
// check when they were loaded, and serves those that pass. It gives up
// after a few tries, or when the tools are loaded again.
func (h *Host) recheck(gen int64, defs []config.Tool) {
	wait := time.Second
	for try := 0; try < 6 && len(defs) > 0; try++ {
		time.Sleep(wait)
		wait *= 2
		if h.loads.Load() != gen {
			return
		}
		var still []config.Tool
		for _, def := range defs {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t, err := tools.Check(ctx, def, h.kinds, h.registry.CatalogWith(def))
			cancel()
			switch {
			case err == nil:
				if h.loads.Load() == gen && h.registry.Add(t) {
					h.log.Info("tool served after a second check", "tool", def.Name, "where", def.Source)
				}
			case tools.Unchecked(err):
				still = append(still, def)
			default:
				h.log.Error("tool not served", "where", err.Error())
			}
		}
		defs = still
	}
	for _, def := range defs {
		h.log.Error("tool not served: it could not be checked; reload to try again", "tool", def.Name, "where", def.Source)
	}
}

// Reload takes a new config while serving: the tokens and the limits on
// runs apply from the next request on (an open websocket whose token was
// removed or lowered in role is told why and closed; see
// api.Server.SetTokens), each kind gets its new table, and the tools are
// loaded and checked again and replace the served set at once. Runs going
// on are not stopped, but the runs of a token removed or lowered to viewer
// may no longer call tools. What only a start reads (listen, allowed
// origins, state_dir, the plugin folder and pins) waits for the next
// start.
func (h *Host) Reload(ctx context.Context, cfg *config.Config) Problems {
	// The kinds take their new tables first: a value one refuses refuses
	// the whole config, and the kinds that took theirs get the old back.
	var pr Problems
	old := h.config()
	var took []*plugins.Plugin
	for _, kind := range h.plugins.Kinds() {
		p, ok := h.plugins.Kind(kind)
		if !ok {
			continue
		}
		err := p.Reconfigure(ctx, kindTable(cfg, kind, p.Info(), h.log))
		if err == nil {
			took = append(took, p)
			continue
		}
		placed, rest := configErrors(cfg, err)
		pr.Config = append(pr.Config, placed...)
		if rest != nil {
			h.log.Error("kind refused its new config", "kind", kind, "why", rest)
			pr.Plugins = append(pr.Plugins, plugins.Problem{Kind: kind, Err: rest})
		}
	}
	pr.Config = append(pr.Config, cfg.StrayKindTables(h.plugins.Kinds(), h.failedKinds())...)
	m, merrs := modelOf(cfg)
	pr.Config = append(pr.Config, merrs...)
	if len(pr.Config) > 0 {
		for _, p := range took {
			if err := p.Reconfigure(ctx, kindTable(old, p.Info().Kind, p.Info(), h.log)); err != nil {
				h.log.Error("kind refused its config of before the reload", "kind", p.Info().Kind, "why", err)
			}
		}
		h.log.Error("the new config has problems; still serving the one before", "problems", pr.Config.Error())
		return pr
	}
	h.cfgMu.Lock()
	h.cfg = cfg
	h.cfgMu.Unlock()
	h.runs.SetCallers(callers(cfg))
	h.runs.SetBudgets(budgets(cfg))
	h.runs.SetModel(m)
	h.sessions.reload(ctx, cfg)
	h.runs.SetApprovals(h.approvalPolicy(cfg))
	h.api.SetTokens(auth.New(cfg.Tokens))
	if len(cfg.Tokens) == 0 {
		h.log.Warn("NO TOKENS ARE CONFIGURED after the reload: every caller on this machine is an admin, and nobody else is served")
	}
	pr.Tools = h.loadTools(ctx)
	return pr
}

// ReloadFile loads the config at path and reloads with it (see Reload). A config that does not
// load, or that Reload refuses, changes nothing and counts as refused; /healthz says how many
// reloads were applied and refused, so that `toolhost reload` can wait for the outcome of its
// signal. The error is the loading's; the problems are Reload's.
func (h *Host) ReloadFile(ctx context.Context, path string) (Problems, error) {
	cfg, err := config.Load(path)
	if err != nil {
		h.reloadsRefused.Add(1)
		return Problems{}, err
	}
	pr := h.Reload(ctx, cfg)
	if len(pr.Config) > 0 {
		h.reloadsRefused.Add(1)
	} else {
		h.reloadsApplied.Add(1)
	}
	return pr, nil
}

// failedKinds are the kinds whose plugins did not start.
func (h *Host) failedKinds() []string {
	out := make([]string, 0, len(h.unavailable))
	for k := range h.unavailable {
		out = append(out, k)
	}
	return out
}

// CheckTool checks one tool definition with its kind's plugin.
func (h *Host) CheckTool(ctx context.Context, def config.Tool) (*tools.Tool, error) {
	return tools.Check(ctx, def, h.kinds, h.registry.CatalogWith(def))
}

// Handler is the host's HTTP handler: the API, the web UI and /metrics,
// all behind the same checks of who is calling.
func (h *Host) Handler() http.Handler { return h.api }

// Serve serves the API on ln until ctx ends, then shuts down: it stops
// taking requests, cancels runs, and stops the plugins. To leave a load
// balancer's pool first, Drain before ctx ends (toolhost serve does on
// SIGTERM).
func (h *Host) Serve(ctx context.Context, ln net.Listener) error {
	h.http = &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go h.sweepRuns(ctx)
	errc := make(chan error, 1)
	go func() { errc <- h.http.Serve(ln) }()
	select {
	case err := <-errc:
		h.Stop()
		return fmt.Errorf("serving the API stopped: %w", err)
	case <-ctx.Done():
	}
	h.Stop()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Drain readies the host to stop behind a load balancer: /healthz answers
// 503 "draining" from now on, so that the balancer's health checks take the
// host out of its pool, while calls going on and new ones are served as
// before, for [server] drain_seconds (as the config in force says now) or
// until ctx ends (a second signal). Stop comes after it. A reload does not
// drain: it is done in the process, serving throughout.
func (h *Host) Drain(ctx context.Context) {
	d := time.Duration(h.config().Server.DrainSeconds) * time.Second
	if d <= 0 {
		return
	}
	h.api.Drain()
	h.log.Info("draining: /healthz answers 503 so that load balancers stop sending calls here; calls are still served until the drain ends", "drain", d.String())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		h.log.Info("drained: no new calls are taken from now on; stopping")
	case <-ctx.Done():
		h.log.Info("the drain was cut short; stopping now")
	}
}

// stopWait bounds Stop: the plugins get it to close, the python kind to remove every sandbox with
// its network and rules. The unit's TimeoutStopSec (120 s) is above it and the longest drain
// (config.MaxDrainSeconds) together.
const stopWait = 45 * time.Second

// websocketsStopWait bounds, within stopWait, how long the websockets get
// to receive the ends of their runs and close.
const websocketsStopWait = 15 * time.Second

// Stop shuts everything down; nothing the host started outlives it.
func (h *Host) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	// Runs first, so that HTTP calls waiting for theirs get their ends
	// and no run starts from now on; then the listener; then each
	// websocket, once it has the ends of the runs it follows.
	h.runs.CancelAll("the host is stopping (systemctl stop, a restart or SIGTERM), so its runs were stopped; run it again once the host is back")
	if h.http != nil {
		_ = h.http.Shutdown(ctx)
	}
	if h.api != nil {
		wsCtx, wsCancel := context.WithTimeout(ctx, websocketsStopWait)
		h.api.CloseWebsockets(wsCtx, "the host is stopping (systemctl stop, a restart or SIGTERM); connect again once it is back")
		wsCancel()
	}
	h.plugins.Stop(ctx)
	h.stopLease()
	h.sessions.stop(ctx)
	h.closeLedger()
	h.runs.Close()
	h.log.Info("stopped")
}

func (h *Host) sweepRuns(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.runs.Sweep(now)
		}
	}
}

// KindReport is what one kind's checks of this machine found.
type KindReport struct {
	Kind string
	// Version is the plugin's own version; Protocol the plugin protocol
	// version the host and the plugin agreed on.
	Version  string
	Protocol int
	sdk.DoctorReport
}

// Doctor starts every plugin of cfg, without configuring any, and asks each
// kind to check this machine with its table of cfg (toolhost doctor). The
// plugins are stopped before it returns. Plugins that could not be started
// or asked are returned as problems.
func Doctor(ctx context.Context, cfg *config.Config, log hclog.Logger) ([]KindReport, []plugins.Problem) {
	m := plugins.NewManager(plugins.Options{
		Dir:          cfg.Plugins.Dir,
		Pins:         cfg.Plugins.SHA256,
		PinsFile:     cfg.Plugins.SHA256File,
		StartTimeout: time.Duration(cfg.Plugins.StartTimeoutSeconds) * time.Second,
		NoConfigure:  true,
		Logger:       log.Named("plugin"),
		PinsHint:     pinsHint(cfg),
	})
	problems := m.Start(ctx)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		m.Stop(stopCtx)
	}()
	var out []KindReport
	for _, kind := range m.Kinds() {
		p, ok := m.Kind(kind)
		if !ok {
			continue
		}
		rep, err := p.Doctor(ctx, kindTable(cfg, kind, p.Info(), log))
		if err != nil {
			problems = append(problems, plugins.Problem{Kind: kind, Err: fmt.Errorf("the %s kind: %w", kind, err)})
			continue
		}
		out = append(out, KindReport{Kind: kind, Version: p.Info().Version, Protocol: p.Protocol(), DoctorReport: rep})
	}
	return out, problems
}
