package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
)

// Invoker runs a tool in its kind's plugin.
type Invoker interface {
	Invoke(ctx context.Context, inv sdk.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error)
}

// Plugins finds the invoker of a kind.
type Plugins func(kind string) (Invoker, bool)

// Dispatcher checks calls and starts runs; it keeps runs for a while
// after they end so clients can read them back.
type Dispatcher struct {
	registry *tools.Registry
	plugins  Plugins
	log      hclog.Logger
	keep     time.Duration
	spill    spillConfig

	mu   sync.Mutex
	runs map[string]*Run
	// parent of a nested run, for the depth limit.
	parent map[string]string
}

// MaxNesting bounds tools calling tools calling tools.
const MaxNesting = 8

// NewDispatcher returns a Dispatcher serving the registry's tools.
func NewDispatcher(reg *tools.Registry, plugins Plugins, log hclog.Logger, keep time.Duration) *Dispatcher {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Dispatcher{registry: reg, plugins: plugins, log: log, keep: keep, runs: map[string]*Run{}, parent: map[string]string{}}
}

// SpillTo makes runs keep at most about memoryBytes of their events in
// memory and move older ones to a file of their own in dir (made when
// first needed). Call it before the first Start; without it every event
// stays in memory.
func (d *Dispatcher) SpillTo(dir string, memoryBytes int) {
	if memoryBytes <= 0 {
		memoryBytes = DefaultMemoryBytes
	}
	d.spill = spillConfig{dir: dir, memoryBytes: memoryBytes}
}

// CallError is a call refused before it ran.
type CallError struct {
	Code    string
	Message string
}

func (e *CallError) Error() string { return e.Message }

// Request is a call to start.
type Request struct {
	Tool      string
	Args      json.RawMessage
	Principal string
	Session   string
	// IdempotencyKey names the call so a retry can be recognised; it is
	// recorded on the run (and not acted on yet).
	IdempotencyKey string
	// Parent is the run that made this call, for nested calls.
	Parent string
}

// Start checks a call and starts its run. The run goes on until it ends or
// is cancelled, whoever is reading it. A call refused before it ran returns
// a *CallError.
func (d *Dispatcher) Start(req Request) (*Run, error) {
	tool, ok := d.registry.Get(req.Tool)
	if !ok {
		return nil, &CallError{Code: "unknown_tool", Message: fmt.Sprintf("there is no tool named %q", req.Tool)}
	}
	args, err := tools.CheckArgs(tool, req.Args)
	if err != nil {
		return nil, &CallError{Code: "bad_args", Message: err.Error()}
	}
	if req.Parent != "" && d.depth(req.Parent) >= MaxNesting {
		return nil, &CallError{Code: "too_deep", Message: fmt.Sprintf("tools called tools more than %d deep; the call to %s was refused", MaxNesting, req.Tool)}
	}
	inv, ok := d.plugins(tool.Kind)
	if !ok {
		return nil, &CallError{Code: "plugin_unavailable", Message: fmt.Sprintf("the %s kind is not running", tool.Kind)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	req.Tool = tool.Name
	run := newRun(newRunID(), req, d.spill, cancel)
	d.mu.Lock()
	d.runs[run.ID] = run
	if req.Parent != "" {
		d.parent[run.ID] = req.Parent
	}
	d.mu.Unlock()
	go d.execute(ctx, run, tool, inv, args)
	return run, nil
}

func (d *Dispatcher) depth(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for p, ok := d.parent[id]; ok; p, ok = d.parent[p] {
		n++
	}
	return n + 1
}

func (d *Dispatcher) execute(ctx context.Context, run *Run, tool *tools.Tool, inv Invoker, args json.RawMessage) {
	defer run.cancel()
	started := time.Now()
	var out, errs textStream
	var mu sync.Mutex // onEvent may be called while the result is being appended
	result, err := inv.Invoke(ctx, sdk.Invocation{
		Tool: tool.SDK(), Args: args, RunID: run.ID, Principal: run.Principal, Session: run.Session,
	}, func(e sdk.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Stdout != nil:
			if s := out.text(e.Stdout); s != "" {
				run.append(Event{Type: "stdout", Data: s})
			}
		case e.Stderr != nil:
			if s := errs.text(e.Stderr); s != "" {
				run.append(Event{Type: "stderr", Data: s})
			}
		case e.Progress != nil:
			f := e.Progress.Fraction
			run.append(Event{Type: "progress", Fraction: &f, Message: e.Progress.Message})
		case e.Log != nil:
			d.log.Named(tool.Kind).Info(e.Log.Message, "run", run.ID, "level", e.Log.Level)
		}
	})
	mu.Lock()
	if s := out.flush(); s != "" {
		run.append(Event{Type: "stdout", Data: s})
	}
	if s := errs.flush(); s != "" {
		run.append(Event{Type: "stderr", Data: s})
	}
	mu.Unlock()
	var ue *sdk.Error
	switch {
	case err == nil:
		run.append(Event{Type: "result", Result: result})
	case errors.As(err, &ue):
		run.append(Event{Type: "error", Error: &ErrorBody{Code: ue.Code, Message: ue.Message}})
	case errors.Is(err, context.Canceled):
		run.append(Event{Type: "error", Error: &ErrorBody{Code: "cancelled", Message: "the run was cancelled"}})
	default:
		run.append(Event{Type: "error", Error: &ErrorBody{Code: "failed", Message: err.Error()}})
	}
	last, _ := run.Wait(context.Background())
	outcome := last.Type
	if last.Error != nil {
		outcome = last.Error.Code
	}
	spilled, spillErr := run.Spilled()
	if spillErr != nil {
		d.log.Warn("a run's output is kept in memory only", "run", run.ID, "why", spillErr.Error())
	}
	d.log.Info("run ended", "run", run.ID, "tool", tool.Name, "principal", run.Principal, "outcome", outcome,
		"events", last.Seq+1, "on_disk", spilled, "ms", time.Since(started).Milliseconds())
}

// Get returns a run that is going on or ended less than the keep time ago.
func (d *Dispatcher) Get(id string) (*Run, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.runs[id]
	return r, ok
}

// List returns the runs kept now, in no order.
func (d *Dispatcher) List() []*Run {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*Run, 0, len(d.runs))
	for _, r := range d.runs {
		out = append(out, r)
	}
	return out
}

// Sweep forgets runs that ended more than the keep time ago.
func (d *Dispatcher) Sweep(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, r := range d.runs {
		if e := r.Ended(); !e.IsZero() && now.Sub(e) > d.keep {
			delete(d.runs, id)
			delete(d.parent, id)
			r.discard()
		}
	}
}

// Close forgets every run and removes the files of their output; used at
// shutdown, after CancelAll.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, r := range d.runs {
		r.discard()
		delete(d.runs, id)
	}
	if d.spill.dir != "" {
		_ = os.RemoveAll(d.spill.dir)
	}
}

// CancelAll cancels every run still going; used at shutdown.
func (d *Dispatcher) CancelAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runs {
		r.Cancel()
	}
}

// CallTool runs a tool for a plugin's nested call and waits for its end.
// It is the host's side of sdk.Host.
func (d *Dispatcher) CallTool(ctx context.Context, parentRunID, tool string, args json.RawMessage) (sdk.ToolResult, error) {
	principal, session := "", ""
	if p, ok := d.Get(parentRunID); ok {
		principal, session = p.Principal, p.Session
	} else {
		return sdk.ToolResult{Error: &sdk.Error{Code: "unknown_run", Message: "a nested call must name the run that makes it"}}, nil
	}
	run, err := d.Start(Request{Tool: tool, Args: args, Principal: principal, Session: session, Parent: parentRunID})
	if err != nil {
		var ce *CallError
		if errors.As(err, &ce) {
			return sdk.ToolResult{Error: &sdk.Error{Code: ce.Code, Message: ce.Message}}, nil
		}
		return sdk.ToolResult{}, err
	}
	last, err := run.Wait(ctx)
	if err != nil {
		run.Cancel()
		return sdk.ToolResult{}, err
	}
	printed, _, _ := run.Printed()
	if last.Error != nil {
		return sdk.ToolResult{Printed: printed, Error: &sdk.Error{Code: last.Error.Code, Message: last.Error.Message}}, nil
	}
	return sdk.ToolResult{Result: last.Result, Printed: printed}, nil
}

// AskModel is not served by this host yet.
func (d *Dispatcher) AskModel(context.Context, string, string, string) (string, error) {
	return "", &sdk.Error{Code: "unsupported", Message: "this host has no model configured"}
}

var _ sdk.Host = (*Dispatcher)(nil)

func newRunID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "r" + hex.EncodeToString(b[:])
}

// SpillDirPrefix starts the name of the folder, one per host process,
// where runs keep their older output: SpillDirPrefix + the process id.
const SpillDirPrefix = "toolhost-runs-"

// RemoveOrphanSpills removes the output folders in parent left by host
// processes that are gone (after a crash); the folders of running hosts
// are left alone.
func RemoveOrphanSpills(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := strings.CutPrefix(e.Name(), SpillDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", n)); os.IsNotExist(err) {
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}
