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

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/sdk"
)

//go:embed runner.py
var runnerSource string

// version is the kind's own version, reported by Describe.
const version = "1.0.0"

// kindOptions configure the kind.
type kindOptions struct {
	// Logger receives what is for the host's log; hclog's null logger when nil.
	Logger hclog.Logger
}

// kind implements sdk.Kind for python tools.
type kind struct {
	log hclog.Logger

	mu    sync.Mutex
	cfg   Config
	mgr   *runsc.Manager
	slots chan struct{} // one per sandbox allowed at once
	// runs is held for reading by every run on mgr, so a replaced manager is closed only once
	// its runs are done.
	runs *sync.RWMutex
}

var _ sdk.Kind = (*kind)(nil)

func newKind(o kindOptions) *kind {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return &kind{log: o.Logger}
}

// Describe names the kind and its run table.
func (k *kind) Describe(context.Context) (sdk.Info, error) {
	k.mu.Lock()
	maxMem := k.cfg.MaxMemoryMB
	k.mu.Unlock()
	if maxMem == 0 {
		maxMem = defaultConfig().MaxMemoryMB
	}
	return sdk.Info{Kind: "python", Version: version, RunSchema: runSchema(maxMem)}, nil
}

// Configure takes the [python] table, checks that this machine can run sandboxes (the same checks
// as toolhost doctor), and on the first call removes whatever an earlier run of the plugin left.
func (k *kind) Configure(ctx context.Context, raw json.RawMessage) error {
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
	// The checks of toolhost doctor; the platform is tried last, with the new manager, so its
	// sandbox is removed in the background instead of holding up the start.
	doctor := runsc.DoctorOptions{Runsc: cfg.Runsc, Rootfs: cfg.Rootfs, StateDir: cfg.StateDir,
		Platform: cfg.Platform, Prefix: cfg.SandboxPrefix, SkipPlatform: true}
	if err := runsc.Ready(runsc.Doctor(ctx, doctor)); err != nil {
		return fmt.Errorf("the python kind can't start: %w", err)
	}
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: cfg.Runsc, Root: filepath.Join(cfg.StateDir, "runsc"), Platform: cfg.Platform})
	if err != nil {
		return fmt.Errorf("the python kind can't start: %w", err)
	}
	mgr, err := runsc.NewManager(runsc.ManagerOptions{Runtime: rt, Rootfs: cfg.Rootfs, StateDir: cfg.StateDir,
		Prefix: cfg.SandboxPrefix, Network: runsc.NetworkOptions{ExtraAllowedCIDRs: cfg.extraCIDRs}})
	if err != nil {
		return fmt.Errorf("the python kind can't start: %w", err)
	}
	k.mu.Lock()
	old, oldCfg := k.mgr, k.cfg
	k.mu.Unlock()
	if old == nil || oldCfg.SandboxPrefix != cfg.SandboxPrefix || oldCfg.StateDir != cfg.StateDir {
		// Starting up: whatever an earlier run of the plugin left goes first.
		if err := mgr.Sweep(ctx); err != nil {
			k.log.Warn("removing leftover sandboxes", "error", err)
		}
	}
	if err := mgr.CheckPlatform(ctx); err != nil {
		_ = mgr.Close(context.WithoutCancel(ctx))
		if why := runsc.Ready([]runsc.Check{runsc.PlatformCheck(ctx, doctor)}); why != nil {
			err = why
		}
		return fmt.Errorf("the python kind can't start: %w", err)
	}
	k.mu.Lock()
	old = k.mgr
	oldRuns := k.runs
	k.cfg, k.mgr, k.slots, k.runs = cfg, mgr, make(chan struct{}, poolMax(cfg.Pool)), &sync.RWMutex{}
	k.mu.Unlock()
	if old != nil {
		// Runs in flight finish on the old manager; it is closed once they are done.
		go func() {
			oldRuns.Lock()
			defer oldRuns.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := old.Close(ctx); err != nil {
				k.log.Warn("closing the previous sandbox manager", "error", err)
			}
		}()
	}
	return nil
}

// poolMax reads [python.pool] max: how many sandboxes may run at once (16 by default).
func poolMax(raw json.RawMessage) int {
	var p struct {
		Max int `json:"max"`
	}
	if len(raw) > 0 && json.Unmarshal(raw, &p) == nil && p.Max > 0 {
		return p.Max
	}
	return 16
}

type configured struct {
	cfg   Config
	mgr   *runsc.Manager
	slots chan struct{}
	runs  *sync.RWMutex
}

func (k *kind) current() (configured, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.mgr == nil {
		return configured{}, errors.New("the python kind has no configuration yet")
	}
	return configured{k.cfg, k.mgr, k.slots, k.runs}, nil
}

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
	limits := table
	limits.Seconds, limits.MemoryMB, limits.Network = checkSeconds, min(checkMemoryMB, c.cfg.MaxMemoryMB), false
	ans, serr := k.runInSandbox(ctx, c, limits, request{Mode: "check", Code: table.Code, CPUSeconds: checkSeconds}, nil)
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
	args := call.Args
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return nil, sdk.Errorf("bad_args", "the arguments must be a JSON object")
	}
	result, serr := k.runInSandbox(ctx, c, table, request{Mode: "run", Code: table.Code, Args: args, CPUSeconds: table.Seconds}, emit)
	if serr != nil {
		return nil, serr
	}
	return result, nil
}

// Close removes every sandbox of the kind and sweeps leftovers of its prefix.
func (k *kind) Close(ctx context.Context) error {
	k.mu.Lock()
	mgr := k.mgr
	k.mgr = nil
	k.mu.Unlock()
	if mgr == nil {
		return nil
	}
	return errors.Join(mgr.Close(ctx), mgr.Sweep(ctx))
}
