package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/plugins/python/session"
	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

//go:embed runner.py
var runnerSource string

// version is the kind's own version, reported by Describe.
const version = "1.0.0"

// kindOptions configure the kind.
type kindOptions struct {
	// Logger receives what is for the host's log; hclog's null logger when nil.
	Logger hclog.Logger
	// CheckOnly says the plugin only checks a config and its tools (toolhost check): no sandbox
	// is kept ready, every check starts its own.
	CheckOnly bool

	// runtimeBinary, when set, is the runsc the sandboxes run with instead of [python] runsc
	// (which toolhost doctor's checks still read): tests wrap the real runsc with it.
	runtimeBinary string
	// hostTimerOff leaves a run's wall-clock limit to the runner inside the sandbox alone
	// (tests: the limit must hold whatever happens to the plugin).
	hostTimerOff bool
	// placeWait is how long a session run waits for a sandbox place (session.DefaultPlaceWait
	// when 0; tests shorten it).
	placeWait time.Duration
}

// kind implements sdk.Kind for python tools.
type kind struct {
	log  hclog.Logger
	opts kindOptions

	mu sync.Mutex
	// inst is this process's share of the sandbox prefix: what it sweeps is its own and what
	// processes that are gone left, never the sandboxes of another process on the same prefix
	// (a host beside a toolhost check).
	inst *sandbox.Instance
	cfg  Config
	mgr  *sandbox.Manager
	// smgr makes the conversation sandboxes: mgr's sibling on [python] session_rootfs
	// (sandbox.Manager.WithRootfs), nil while that rootfs is missing (sessionSandboxes looks
	// again).
	smgr *sandbox.Manager
	pool *sandbox.Pool // its Max bounds the sandboxes in use at once
	// places are the sandboxes the kind may run at once ([python.pool] max): its pools' runs and
	// ready sandboxes and the session sandboxes together, across a reconfigure.
	places *sandbox.Places
	// counters count what the session caps did, across session managers.
	counters *session.Counters
	// runs is held for reading by every run on mgr, so a replaced manager is closed only once
	// its runs are done.
	runs *sync.RWMutex
	// sess is the conversation sandboxes (session.go), on smgr.
	sess *sessions
}

var (
	_ sdk.Kind          = (*kind)(nil)
	_ sdk.MetricsSource = (*kind)(nil)
	_ sdk.Doctor        = (*kind)(nil)
)

func newKind(o kindOptions) *kind {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return &kind{log: o.Logger, opts: o, sess: newSessions(o.Logger), places: sandbox.NewPlaces(defaultPoolMax),
		counters: &session.Counters{}}
}

// Describe names the kind and its run table.
func (k *kind) Describe(context.Context) (sdk.Info, error) {
	k.mu.Lock()
	maxMem := k.cfg.MaxMemoryMB
	k.mu.Unlock()
	if maxMem == 0 {
		maxMem = defaultConfig().MaxMemoryMB
	}
	// A python tool with network = true reads the web: its runs bring outside text.
	return sdk.Info{Kind: "python", Version: version, RunSchema: runSchema(maxMem), ConfigSchema: json.RawMessage(configSchema), OutsideTextWhen: "network",
		SandboxRuns: true, AdminWritesOnly: true, SessionTools: declaredSessionTools()}, nil
}

// Doctor checks, line by line, that this machine can run the kind's sandboxes with the [python]
// table raw (toolhost doctor): root, runsc, the rootfs, cgroups, network namespaces and a
// platform that starts. It needs no Configure: it is most use when Configure failed.
func (k *kind) Doctor(ctx context.Context, raw json.RawMessage) (sdk.DoctorReport, error) {
	cfg, err := parseConfig(raw)
	if err != nil {
		return sdk.DoctorReport{Checks: []sdk.DoctorCheck{{Name: "settings", Detail: err.Error(),
			Fix: "correct [python] in the config file"}}}, nil
	}
	var rep sdk.DoctorReport
	for _, c := range sandbox.Doctor(ctx, sandbox.DoctorOptions{Runsc: cfg.Runsc, Rootfs: cfg.Rootfs, SessionRootfs: cfg.SessionRootfs,
		StateDir: cfg.StateDir, Platform: cfg.Platform, Prefix: cfg.SandboxPrefix}) {
		rep.Checks = append(rep.Checks, sdk.DoctorCheck{Name: c.Name, OK: c.OK, Detail: c.Detail, Fix: c.Fix})
	}
	rep.Summary = "this machine can run python tools in gVisor sandboxes"
	return rep, nil
}

// Configure takes the [python] table, checks that this machine can run sandboxes (the same checks
// as toolhost doctor), and on the first call (or a new prefix or state folder) removes whatever
// an earlier run of the plugin left: the sandboxes of processes that are gone, never those of a
// process still running on the same prefix.
func (k *kind) Configure(ctx context.Context, raw json.RawMessage) (err error) {
	cfg, err := parseConfig(raw)
	if err != nil {
		return err
	}
	k.mu.Lock()
	same := k.mgr != nil && reflect.DeepEqual(cfg, k.cfg)
	k.mu.Unlock()
	if same {
		return nil
	}
	rt, doctor, err := k.newRuntime(ctx, cfg)
	if err != nil {
		return err
	}
	k.mu.Lock()
	inst, oldInst := k.inst, k.inst
	k.mu.Unlock()
	newInst := inst == nil || inst.Prefix() != cfg.SandboxPrefix || inst.StateDir() != cfg.StateDir
	if newInst {
		if inst, err = sandbox.OpenInstance(cfg.StateDir, cfg.SandboxPrefix); err != nil {
			return fmt.Errorf("the python kind can't start: %w", err)
		}
		defer func() {
			if err != nil {
				_ = inst.Close()
			}
		}()
	}
	mgr, err := k.newManager(ctx, cfg, rt, inst, newInst, doctor)
	if err != nil {
		return err
	}
	if err := checkPreload(ctx, cfg, mgr); err != nil {
		return err
	}
	pool, err := k.newPool(ctx, cfg, mgr)
	if err != nil {
		return err
	}
	// The conversation sandboxes' rootfs is needed only by sessions: a missing one is said when
	// a session is used (and by toolhost doctor), so that tool runs go on without it.
	smgr, serr := mgr.WithRootfs(cfg.SessionRootfs)
	if serr != nil {
		k.log.Info("conversation sandboxes can't start until their rootfs ([python] session_rootfs) is built", "error", serr)
	}
	k.mu.Lock()
	old, oldSmgr, oldPool := k.mgr, k.smgr, k.pool
	oldRuns := k.runs
	k.inst = inst
	k.cfg, k.mgr, k.smgr, k.pool, k.runs = cfg, mgr, smgr, pool, &sync.RWMutex{}
	k.mu.Unlock()
	if old != nil {
		// Runs in flight finish on the old manager; it is closed once they are done.
		go k.retire(old, oldSmgr, oldPool, oldRuns, oldInst, newInst)
	}
	return nil
}

// newRuntime runs the checks of toolhost doctor but the platform's, and makes the runsc runtime
// of cfg. It returns the doctor's options too, for the platform's advice later.
func (k *kind) newRuntime(ctx context.Context, cfg Config) (*runsc.Runtime, sandbox.DoctorOptions, error) {
	// The platform is tried last, with the new manager, so its sandbox is removed in the
	// background instead of holding up the start.
	doctor := sandbox.DoctorOptions{Runsc: cfg.Runsc, Rootfs: cfg.Rootfs, StateDir: cfg.StateDir,
		Platform: cfg.Platform, Prefix: cfg.SandboxPrefix, SkipPlatform: true}
	if err := sandbox.Ready(sandbox.Doctor(ctx, doctor)); err != nil {
		return nil, doctor, fmt.Errorf("the python kind can't start: %w", err)
	}
	if k.opts.runtimeBinary != "" {
		doctor.Runsc = k.opts.runtimeBinary
	}
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: doctor.Runsc, Root: filepath.Join(cfg.StateDir, "runsc"), Platform: cfg.Platform})
	if err != nil {
		return nil, doctor, fmt.Errorf("the python kind can't start: %w", err)
	}
	return rt, doctor, nil
}

// newManager makes the sandbox manager of cfg on rt and inst, sweeps what processes that are
// gone left when inst is new, and checks that the platform starts a sandbox (with advice from
// doctor when not). On failure the manager is closed.
func (k *kind) newManager(ctx context.Context, cfg Config, rt *runsc.Runtime, inst *sandbox.Instance, newInst bool, doctor sandbox.DoctorOptions) (*sandbox.Manager, error) {
	mgr, err := sandbox.NewManager(sandbox.ManagerOptions{Runtime: rt, Rootfs: cfg.Rootfs, StateDir: cfg.StateDir,
		Prefix: cfg.SandboxPrefix, Network: networkOptions(cfg), Instance: inst,
		Swept: func(what string) { k.log.Info("removed a leftover of a sandbox from before", "leftover", what) }})
	if err != nil {
		return nil, fmt.Errorf("the python kind can't start: %w", err)
	}
	if newInst {
		// Starting up: whatever processes that are gone left goes first.
		if err := mgr.Sweep(ctx); err != nil {
			k.log.Warn("removing leftover sandboxes", "error", err)
		}
	}
	if err := mgr.CheckPlatform(ctx); err != nil {
		_ = mgr.Close(context.WithoutCancel(ctx))
		if why := sandbox.Ready([]sandbox.Check{sandbox.PlatformAdvice(ctx, doctor, err)}); why != nil {
			err = why
		}
		return nil, fmt.Errorf("the python kind can't start: %w", err)
	}
	return mgr, nil
}

// checkPreload starts one sandbox that preloads [python.pool] preload, when it names modules: a
// module that can't be imported would fail every sandbox, so it is said now, as a FieldError. On
// failure mgr is closed.
func checkPreload(ctx context.Context, cfg Config, mgr *sandbox.Manager) error {
	if len(cfg.pool.Preload) == 0 {
		return nil
	}
	sb, err := mgr.Start(ctx, sandboxOptions(cfg, runTable{MemoryMB: cfg.MaxMemoryMB}))
	if err != nil {
		_ = mgr.Close(context.WithoutCancel(ctx))
		return sdk.FieldErrors{{Path: "python.pool.preload", Message: fmt.Sprintf("a sandbox can't preload these modules: %v", err)}}
	}
	mgr.DestroyInBackground(sb, nil)
	return nil
}

// newPool sets the places' max and makes the pool of ready sandboxes on mgr (none ready for a
// check), warming the shape most runs have. On failure mgr is closed.
func (k *kind) newPool(ctx context.Context, cfg Config, mgr *sandbox.Manager) (*sandbox.Pool, error) {
	size := cfg.pool.Size
	if k.opts.CheckOnly {
		size = 0 // a check keeps nothing ready: it ends as soon as its tools are checked
	}
	k.places.SetMax(cfg.pool.Max)
	pool, err := sandbox.NewPool(sandbox.PoolOptions{
		Manager: mgr, Size: size, Max: cfg.pool.Max, Places: k.places,
		MaxIdle:     time.Duration(cfg.pool.MaxIdleMinutes) * time.Minute,
		MemoryBytes: int64(cfg.MaxMemoryMB+overheadMB) << 20,
		Starts:      poolStarts,
		Log:         func(msg string, err error) { k.log.Warn(msg, "error", err) },
	})
	if err != nil {
		_ = mgr.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("the python kind can't start: %w", err)
	}
	// The shape most runs have (no network) is kept ready from the start; the network shape
	// once a tool asks for it.
	pool.Warm(sandboxOptions(cfg, runTable{MemoryMB: min(defaultMemoryMB, cfg.MaxMemoryMB)}))
	return pool, nil
}

// retire closes the manager a new configuration replaced (and its sibling of the session
// rootfs, oldSmgr, when there is one), once the runs of oldRuns are done: its ready sandboxes go
// at once, its session sandboxes stop (their files stay). When the instance was new too, what is
// left of the previous prefix or state folder is swept with oldInst's tag and oldInst closed.
func (k *kind) retire(old, oldSmgr *sandbox.Manager, oldPool *sandbox.Pool, oldRuns *sync.RWMutex, oldInst *sandbox.Instance, newInst bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := oldPool.Close(ctx); err != nil {
		k.log.Warn("closing the previous sandbox pool", "error", err)
	}
	// The session sandboxes on the old manager stop once their runs are done (their files
	// stay); the next use starts them on the new one.
	k.sess.leave(ctx, old)
	oldRuns.Lock()
	defer oldRuns.Unlock()
	if oldSmgr != nil {
		if err := oldSmgr.Close(ctx); err != nil {
			k.log.Warn("closing the previous session sandboxes' manager", "error", err)
		}
	}
	if err := old.Close(ctx); err != nil {
		k.log.Warn("closing the previous sandbox manager", "error", err)
	}
	if newInst && oldInst != nil {
		// The previous prefix or state folder: what is left of it goes with its tag.
		if err := old.Sweep(ctx); err != nil {
			k.log.Warn("removing the previous sandboxes' leftovers", "error", err)
		}
		if err := oldInst.Close(); err != nil {
			k.log.Warn("closing the previous sandbox instance", "error", err)
		}
	}
}

// poolStarts bounds how many sandboxes the pool starts at once: one per core of this kind of
// machine (2), so refilling can't take every core from the runs.
const poolStarts = 2

type configured struct {
	cfg  Config
	mgr  *sandbox.Manager
	smgr *sandbox.Manager // nil while the session rootfs is missing
	pool *sandbox.Pool
	runs *sync.RWMutex
}

func (k *kind) current() (configured, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.mgr == nil {
		return configured{}, errors.New("the python kind has no configuration yet")
	}
	return configured{k.cfg, k.mgr, k.smgr, k.pool, k.runs}, nil
}

// Metrics reports the sandboxes running against [python.pool] max, what the caps refused, and
// the pool's state per shape (no_network, network).
func (k *kind) Metrics(context.Context) []sdk.Metric {
	k.mu.Lock()
	pool := k.pool
	k.mu.Unlock()
	if pool == nil {
		return nil
	}
	out := []sdk.Metric{
		{Name: "sandboxes_in_use", Type: "gauge", Value: float64(k.places.InUse()),
			Help: "Sandboxes holding one of the [python.pool] max places: tool runs and live conversation sandboxes."},
		{Name: "sandboxes_max", Type: "gauge", Value: float64(k.places.Max()),
			Help: "Sandboxes that may run at once ([python.pool] max)."},
		{Name: "session_sandboxes_stopped_for_room_total", Type: "counter", Value: float64(k.counters.StoppedForRoom.Load()),
			Help: "Idle conversation sandboxes stopped (files kept) because another run needed their place."},
		{Name: "session_ready", Type: "gauge", Value: float64(k.sess.readyCount()),
			Help: "Conversation sandboxes started ahead and waiting for a new conversation ([python.pool] ready_sessions)."},
		{Name: "session_ready_taken_total", Type: "counter", Value: float64(k.counters.ReadyTaken.Load()),
			Help: "New conversations whose first run took a sandbox started ahead for it."},
		{Name: "session_resumed_total", Type: "counter", Value: float64(k.counters.Resumed.Load()),
			Help: "Conversation sandboxes restored from their checkpoints after an idle stop or a restart."},
		{Name: "session_resumed_prepared_total", Type: "counter", Value: float64(k.counters.ResumedPrepared.Load()),
			Help: "Of those, the ones restored into a sandbox prepared ahead (the quick way)."},
		{Name: "session_prepared", Type: "gauge", Value: float64(k.sess.preparedCount()),
			Help: "Sandboxes prepared ahead for the next resume of a conversation (one while any has a checkpoint)."},
		{Name: "refusals_total", Type: "counter", Value: float64(k.counters.NoPlace.Load()), Labels: map[string]string{"cap": errcode.TooManySandboxes},
			Help: "Session runs and disks refused by a cap, by the error they got."},
		{Name: "refusals_total", Type: "counter", Value: float64(k.counters.NoRoom.Load()), Labels: map[string]string{"cap": errcode.DiskFull},
			Help: "Session runs and disks refused by a cap, by the error they got."},
	}
	for _, s := range pool.Stats() {
		l := map[string]string{"shape": s.Shape}
		g := func(name, help string, v int) {
			out = append(out, sdk.Metric{Name: name, Help: help, Type: "gauge", Value: float64(v), Labels: l})
		}
		c := func(name, help string, v uint64) {
			out = append(out, sdk.Metric{Name: name, Help: help, Type: "counter", Value: float64(v), Labels: l})
		}
		g("pool_ready", "Sandboxes started and waiting for a run.", s.Ready)
		g("pool_starting", "Sandboxes being started for the pool.", s.Starting)
		g("pool_in_use", "Sandboxes handed to a run (ready or cold) and not yet released.", s.InUse)
		g("pool_target", "Sandboxes the pool keeps ready now: size, or more while calls come close together or at once.", s.Target)
		c("pool_handed_out_total", "Runs given a ready sandbox.", s.HandedOut)
		c("pool_cold_starts_total", "Runs that started a sandbox themselves because none was ready (every run when the pool is off).", s.Cold)
		c("pool_died_total", "Ready sandboxes found dead, removed and replaced.", s.Died)
		c("pool_retired_total", "Ready sandboxes removed because demand fell.", s.Retired)
		c("pool_start_failures_total", "Sandboxes that failed to start for the pool.", s.StartFailures)
	}
	return out
}

// checksOwner owns the sandboxes of checks among the places (sandbox.Places): a check comes
// with no principal, so everyone's checks share one owner, whom places go to last while it
// holds more than a caller's runs. (Checks come from the pool, as calls do: starting every
// check cold, with few CPU shares, made a host's start and reload in the VMs run past
// systemd's time.)
const checksOwner = "(checks)"

// Check checks the run table and compiles the code in a sandbox (never in this process), which
// also confirms a top-level run exists.
func (k *kind) Check(ctx context.Context, tool sdk.Tool) (json.RawMessage, error) {
	c, err := k.current()
	if err != nil {
		return nil, err
	}
	table, err := parseRun(tool.Run, c.cfg.MaxMemoryMB)
	if err != nil {
		return nil, err
	}
	if table.Session != "" {
		// A tool of the conversation's sandbox: no code of its own to compile.
		return json.Marshal(map[string]string{"type": "python", "session": table.Session})
	}
	limits := table
	limits.Seconds, limits.MemoryMB, limits.Network = c.cfg.CheckSeconds, min(checkMemoryMB, c.cfg.MaxMemoryMB), false
	ans, serr := k.runInSandbox(ctx, c, limits, checksOwner, request{Mode: "check", Code: table.Code, CPUSeconds: c.cfg.CheckSeconds, Seconds: c.cfg.CheckSeconds}, nil)
	if serr != nil {
		switch serr.Code {
		case codeCompile, codeNoRun:
			return nil, sdk.FieldErrors{{Path: "run.code", Message: serr.Message}}
		}
		return nil, fmt.Errorf("the code couldn't be checked: %w", serr)
	}
	_ = ans
	return json.Marshal(table)
}

// Invoke runs the tool's code once in a fresh sandbox.
func (k *kind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	c, err := k.current()
	if err != nil {
		return nil, sdk.Errorf("not_configured", "%v", err)
	}
	table, err := parseRun(call.Tool.Run, c.cfg.MaxMemoryMB)
	if err != nil {
		return nil, sdk.Errorf("bad_tool", "the tool's run table is wrong: %v", err)
	}
	if table.Session != "" {
		return k.invokeSession(ctx, call, table, emit)
	}
	args := call.Args
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return nil, sdk.Errorf("bad_args", "the arguments must be a JSON object")
	}
	result, serr := k.runInSandbox(ctx, c, table, call.Principal, request{Mode: "run", Code: table.Code, Args: args, CPUSeconds: table.Seconds, Seconds: table.Seconds}, emit)
	if serr != nil {
		return nil, serr
	}
	return result, nil
}

// Close stops the session sandboxes (their files stay), removes every sandbox of the kind and
// sweeps what is left of them (and of processes of the same prefix that are gone), then gives up
// the kind's instance.
func (k *kind) Close(ctx context.Context) error {
	serr := k.sess.close(ctx)
	k.mu.Lock()
	mgr, smgr, pool, inst := k.mgr, k.smgr, k.pool, k.inst
	k.mgr, k.smgr, k.pool, k.inst = nil, nil, nil, nil
	k.mu.Unlock()
	if mgr == nil {
		return serr
	}
	var sclose error
	if smgr != nil {
		sclose = smgr.Close(ctx)
	}
	return errors.Join(serr, pool.Close(ctx), sclose, mgr.Close(ctx), mgr.Sweep(ctx), inst.Close())
}
