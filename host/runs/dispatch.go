package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// Invoker runs a tool in its kind's plugin.
type Invoker interface {
	Invoke(ctx context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error)
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
	// callers says what each principal may do; nil lets everyone run
	// without a limit.
	callers Callers
	// places counts, by principal, the places its runs hold (see Caller).
	places map[string]int
	// placeFreed is closed and replaced whenever a place comes free.
	placeFreed chan struct{}
	// calls counts the nested calls (tools and model) made under each
	// top-level run, by the top-level run's id.
	calls map[string]int
	// model answers AskModel; nil when the host has none.
	model Model
	// gateFn is the host's own check of calls (hooks.go).
	gateFn Gate
	// appr are the approvals of change calls (approvals.go).
	appr *approvals
	// acct are the budgets and idempotency keys (budgets.go, idempotency.go).
	acct accounting
	// stopping, once set by CancelAll, is why runs are no longer started.
	stopping string
	// router says which host runs a call in a conversation other hosts
	// may hold (relay.go); nil runs every call here.
	router Router
}

// Model answers the questions runs ask the model (AskModel). The host's is
// package model's Client, built from [model].
type Model interface {
	Ask(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error)
}

// Caller is what the dispatcher knows of a principal: whether it may
// still run tools, and how many runs it may have going at once.
//
// Every run holds a place among its principal's MaxRunning while it runs.
// A run that calls a tool (a nested call, through HostService) lends its
// place to the first of its calls going at a time, so a chain of nested
// calls holds one place; nested calls made side by side hold one more
// each. A top-level call past the limit is refused at once (too_many_runs);
// a nested call past it waits for a place for as long as its caller waits
// for it. The lent place always lets one nested call of every run go on,
// so a run whose nested calls are more than the limit is slowed down,
// never stuck.
type Caller struct {
	// Refused, when set, says why the principal may not run tools any
	// more (its token was removed or lowered to viewer); its runs' nested
	// calls are refused with it.
	Refused string
	// MaxRunning is how many places the principal's runs may hold; 0 is
	// no limit.
	MaxRunning int
	// Who and Setting name the principal and its limit in the message of
	// a refused call, e.g. `the token "ed"` and "its max_running".
	Who, Setting string
}

// Callers says what a principal may do now.
type Callers func(principal string) Caller

// MaxNesting bounds tools calling tools calling tools.
const MaxNesting = 8

// MaxNestedCalls bounds the nested calls (of tools and of the model) made
// under one top-level run, however deep: a graph that fans out into more
// is stopped.
const MaxNestedCalls = 1000

// NewDispatcher returns a Dispatcher serving the registry's tools.
func NewDispatcher(reg *tools.Registry, plugins Plugins, log hclog.Logger, keep time.Duration) *Dispatcher {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Dispatcher{
		registry: reg, plugins: plugins, log: log, keep: keep, runs: map[string]*Run{}, parent: map[string]string{},
		places: map[string]int{}, placeFreed: make(chan struct{}), calls: map[string]int{},
	}
}

// SetModel sets what answers the runs' questions for the model, for the
// questions from now on; nil answers that no model is configured.
func (d *Dispatcher) SetModel(m Model) {
	d.mu.Lock()
	d.model = m
	d.mu.Unlock()
}

// SetCallers sets what each principal may do, for the calls from now on;
// runs going on keep their places.
func (d *Dispatcher) SetCallers(c Callers) {
	d.mu.Lock()
	d.callers = c
	d.mu.Unlock()
	d.freed() // a higher limit may let a waiting nested call go
}

// SpillTo makes runs keep at most about memoryBytes of their events in
// memory and move older ones to a file of their own in dir. Call it
// before the first Start; without it every event stays in memory. Close
// closes dir.
func (d *Dispatcher) SpillTo(dir *SpillDir, memoryBytes int) {
	if memoryBytes <= 0 {
		memoryBytes = DefaultMemoryBytes
	}
	d.spill = spillConfig{dir: dir, memoryBytes: memoryBytes}
}

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
	// Forwarded says another host routed the call here (relay.go): it
	// runs here, and is not routed again.
	Forwarded bool
}

// Start checks a call and starts its run. The run goes on until it ends or
// is cancelled, whoever is reading it. A call refused before it ran returns
// an *sdk.Error. A call past its principal's limit is refused at once.
func (d *Dispatcher) Start(req Request) (*Run, error) {
	if run, err := d.route(req); run != nil || err != nil {
		return run, err
	}
	if req.IdempotencyKey != "" && req.Parent == "" {
		return d.startKeyed(req)
	}
	return d.start(context.Background(), req, false, "")
}

// start is Start; with wait, a call past its principal's limit waits for
// a place until ctx ends instead of being refused.
// The run's id is id, or a new one when id is "".
func (d *Dispatcher) start(ctx context.Context, req Request, wait bool, id string) (*Run, error) {
	tool, ok := d.registry.Get(req.Tool)
	if !ok {
		return nil, &sdk.Error{Code: wire.CodeUnknownTool, Message: fmt.Sprintf("there is no tool named %q", req.Tool)}
	}
	args, err := tools.CheckArgs(tool, req.Args)
	if err != nil {
		return nil, &sdk.Error{Code: wire.CodeBadArgs, Message: err.Error()}
	}
	if err := d.gate(req, tool); err != nil {
		return nil, err
	}
	if req.Parent != "" && d.depth(req.Parent) >= MaxNesting {
		return nil, &sdk.Error{Code: wire.CodeTooDeep, Message: fmt.Sprintf("tools called tools more than %d deep; the call to %s was refused", MaxNesting, req.Tool)}
	}
	inv, ok := d.plugins(tool.Kind)
	if !ok {
		return nil, &sdk.Error{Code: wire.CodePluginUnavailable, Message: fmt.Sprintf("the %s kind is not running", tool.Kind)}
	}
	req.Tool = tool.Name
	// A call that would be refused a place is refused before it is charged:
	// a flood of calls past max_running costs no writes to the ledger.
	if !wait {
		if err := d.refusedAtOnce(req); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancelCause(context.Background())
	if id == "" {
		id = newRunID()
	}
	sandboxed, err := d.charge(id, req, tool)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	run := newRun(id, req, d.spill, cancel)
	run.kind, run.sandboxed = tool.Kind, sandboxed
	if err := d.admit(ctx, run, req, wait); err != nil {
		cancel(nil)
		d.refund(id)
		return nil, err
	}
	go d.execute(runCtx, run, tool, inv, args)
	return run, nil
}

// placeLocked says where req's place would come from now, under d.mu: the
// parent run that would lend it its own (nil when none), or whether its
// principal has one free; err when it may have none at all.
func (d *Dispatcher) placeLocked(req Request) (lender *Run, free bool, c Caller, err error) {
	if d.callers != nil {
		c = d.callers(req.Principal)
	}
	if c.Refused != "" {
		return nil, false, c, &sdk.Error{Code: wire.CodeForbidden, Message: c.Refused}
	}
	if d.stopping != "" {
		return nil, false, c, &sdk.Error{Code: wire.CodeShuttingDown, Message: d.stopping}
	}
	if parent := d.runs[req.Parent]; parent != nil && parent.holds && parent.lentTo == nil && parent.Principal == req.Principal {
		return parent, false, c, nil
	}
	return nil, c.MaxRunning <= 0 || d.places[req.Principal] < c.MaxRunning, c, nil
}

// tooManyRunsLocked is the refusal of a call whose principal holds all its places.
func (d *Dispatcher) tooManyRunsLocked(req Request, c Caller) error {
	return &sdk.Error{Code: wire.CodeTooManyRuns, Message: fmt.Sprintf("%s already has %d runs going (%s); wait for one to finish or cancel one", c.Who, d.places[req.Principal], c.Setting)}
}

// refusedAtOnce is the refusal that admit without waiting would give req
// now, or nil when it would have a place.
func (d *Dispatcher) refusedAtOnce(req Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	lender, free, c, err := d.placeLocked(req)
	if err == nil && lender == nil && !free {
		err = d.tooManyRunsLocked(req, c)
	}
	return err
}

// admit gives the run a place among its principal's and records it, or
// says why it can't.
func (d *Dispatcher) admit(ctx context.Context, run *Run, req Request, wait bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		lender, free, c, err := d.placeLocked(req)
		if err != nil {
			return err
		}
		switch {
		case lender != nil:
			lender.lentTo, run.lender = run, lender
		case free:
			d.places[req.Principal]++
		case !wait:
			return d.tooManyRunsLocked(req, c)
		default:
			ch := d.placeFreed
			d.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				d.mu.Lock()
				return ctx.Err()
			}
			d.mu.Lock()
			continue
		}
		run.holds = true
		d.runs[run.ID] = run
		if req.Parent != "" {
			d.parent[run.ID] = req.Parent
		}
		return nil
	}
}

// release gives up the run's place: to the nested call it lent it to, back
// to the run that lent it, or to its principal.
func (d *Dispatcher) release(run *Run) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !run.holds {
		return
	}
	run.holds = false
	switch {
	case run.lentTo != nil:
		// The run ends before its nested call: the call keeps the place.
		child := run.lentTo
		child.lender = run.lender
		if run.lender != nil {
			run.lender.lentTo = child
		}
		run.lentTo, run.lender = nil, nil
		return
	case run.lender != nil:
		run.lender.lentTo = nil
		run.lender = nil
	default:
		if d.places[run.Principal]--; d.places[run.Principal] <= 0 {
			delete(d.places, run.Principal)
		}
	}
	d.freedLocked()
}

func (d *Dispatcher) freed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.freedLocked()
}

func (d *Dispatcher) freedLocked() {
	close(d.placeFreed)
	d.placeFreed = make(chan struct{})
}

// Going is how many places the runs of principal hold now.
func (d *Dispatcher) Going(principal string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.places[principal]
}

// nestedCall counts one more nested call under the top-level run of
// parent, or says why it may not be made: the parent is unknown, its
// principal may no longer run tools, or the top-level run made
// MaxNestedCalls already. It returns the parent.
func (d *Dispatcher) nestedCall(parentRunID, what string) (*Run, *sdk.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	parent, ok := d.runs[parentRunID]
	if !ok || parent.Done() {
		return nil, &sdk.Error{Code: wire.CodeUnknownRun, Message: fmt.Sprintf("%s must be made by a run that is going on, named by its id", what)}
	}
	if d.callers != nil {
		if c := d.callers(parent.Principal); c.Refused != "" {
			return nil, &sdk.Error{Code: wire.CodeForbidden, Message: c.Refused}
		}
	}
	root := parentRunID
	for p, ok := d.parent[root]; ok; p, ok = d.parent[root] {
		root = p
	}
	if d.calls[root] >= MaxNestedCalls {
		return nil, &sdk.Error{Code: wire.CodeTooManyCalls, Message: fmt.Sprintf(
			"the run %s already made %d nested calls of tools and the model, the most one call may make; %s was refused", root, MaxNestedCalls, what)}
	}
	d.calls[root]++
	return parent, nil
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
	defer run.cancel(nil)
	started, began := time.Now(), d.clock()()
	// One text stream per stream and node, so a character split across
	// two chunks of one node is never mixed with another node's.
	type streamKey struct{ typ, node string }
	var streams []streamKey
	texts := map[streamKey]*textStream{}
	var mu sync.Mutex // onEvent may be called while the result is being appended
	var content []wire.Content
	inv = d.approving(run, tool, inv)
	result, err := inv.Invoke(ctx, hostside.Invocation{
		Tool: tool.SDK(), Args: args, RunID: run.ID, Principal: run.Principal, Session: run.Session,
	}, func(e sdk.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Stdout != nil || e.Stderr != nil:
			k, data := streamKey{wire.TypeStdout, e.Node}, e.Stdout
			if e.Stdout == nil {
				k, data = streamKey{wire.TypeStderr, e.Node}, e.Stderr
			}
			ts := texts[k]
			if ts == nil {
				ts = &textStream{}
				texts[k] = ts
				streams = append(streams, k)
			}
			if s := ts.text(data); s != "" {
				run.append(Event{Type: k.typ, Data: s, Node: k.node})
			}
		case e.Progress != nil:
			f := e.Progress.Fraction
			run.append(Event{Type: wire.TypeProgress, Fraction: &f, Message: e.Progress.Message, Node: e.Progress.Node})
		case e.Log != nil && e.Log.ToCaller:
			run.append(Event{Type: wire.TypeLog, Level: callerLogLevel(e.Log.Level), Message: e.Log.Message})
		case e.Log != nil:
			d.log.Named(tool.Kind).Info(e.Log.Message, "run", run.ID, "level", e.Log.Level)
		case e.Content != nil:
			content = append(content, contentToClient(e.Content)...)
		case e.Display != nil && sdk.CheckContent([]sdk.Content{*e.Display}) == nil:
			// Shown now; the result's content, which the plugin sends at the
			// end, has it too (a wrong part fails the run there, named).
			run.append(Event{Type: wire.TypeDisplay, Content: contentToClient([]sdk.Content{*e.Display})})
		}
	})
	mu.Lock()
	for _, k := range streams {
		if s := texts[k].flush(); s != "" {
			run.append(Event{Type: k.typ, Data: s, Node: k.node})
		}
	}
	end := Event{Type: wire.TypeResult, Result: result, Content: content}
	mu.Unlock()
	if ue := errcode.FromRun(ctx, err); ue != nil {
		end = Event{Type: wire.TypeError, Error: &ErrorBody{Code: ue.Code, Message: ue.Message}}
		var why cancelReason
		if ue.Code == wire.CodeCancelled && errors.As(context.Cause(ctx), &why) {
			end.Error.Message = string(why)
		}
	}
	// The place comes free before the end is told: whoever sees the end
	// may start another run at once.
	d.release(run)
	d.ended(run, tool, end, began)
	run.append(end)
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
	d.forget(now)
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, r := range d.runs {
		if e := r.Ended(); !e.IsZero() && now.Sub(e) > d.keep {
			delete(d.runs, id)
			delete(d.parent, id)
			delete(d.calls, id)
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
	if d.spill.dir != nil {
		if err := d.spill.dir.Close(); err != nil {
			d.log.Warn("the folder of run output could not be removed", "folder", d.spill.dir.Path(), "error", err)
		}
		d.spill.dir = nil
	}
}

// CancelAll cancels every run still going here, saying why (reason, in
// the user's words), and refuses new ones with the same words, calls
// waiting for a place included; used at shutdown. Runs relayed from other
// hosts go on there.
func (d *Dispatcher) CancelAll(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping == "" {
		d.stopping = reason
		close(d.placeFreed)
		d.placeFreed = make(chan struct{})
	}
	for _, r := range d.runs {
		if r.relayed {
			// It goes on on its own host, which is not stopping: its
			// caller reconnects to another host and follows it there.
			continue
		}
		r.CancelBecause(reason)
	}
}

// CallTool runs a tool for a plugin's nested call and waits for its end,
// passing its output to req.OnEvent as it comes. It is the host's side of
// sdk.Host.
func (d *Dispatcher) CallTool(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
	parent, refused := d.nestedCall(req.ParentRunID, "a call of "+req.Tool)
	if refused != nil {
		return sdk.ToolResult{Error: refused}, nil
	}
	run, err := d.start(ctx, Request{Tool: req.Tool, Args: req.Args, Principal: parent.Principal, Session: parent.Session, Parent: parent.ID}, true, "")
	if err != nil {
		var ce *sdk.Error
		if errors.As(err, &ce) {
			return sdk.ToolResult{Error: ce}, nil
		}
		return sdk.ToolResult{}, err
	}
	last, err := follow(ctx, run, req.OnEvent)
	if err != nil {
		run.Cancel()
		return sdk.ToolResult{}, err
	}
	printed, _, _ := run.Printed()
	if last.Error != nil {
		return sdk.ToolResult{Printed: printed, Error: &sdk.Error{Code: last.Error.Code, Message: last.Error.Message}}, nil
	}
	return sdk.ToolResult{Result: last.Result, Content: contentToSDK(last.Content), Printed: printed}, nil
}

// follow passes a run's output to onEvent (when set) as it comes, and
// returns its terminal event.
func follow(ctx context.Context, run *Run, onEvent func(sdk.Event)) (Event, error) {
	if onEvent == nil {
		return run.Wait(ctx)
	}
	for from := uint64(0); ; {
		batch, err := run.Next(ctx, from)
		if err != nil {
			return Event{}, err
		}
		if len(batch) == 0 {
			return run.Wait(ctx)
		}
		for _, e := range batch {
			switch e.Type {
			case wire.TypeStdout:
				onEvent(sdk.Event{Stdout: []byte(e.Data), Node: e.Node})
			case wire.TypeStderr:
				onEvent(sdk.Event{Stderr: []byte(e.Data), Node: e.Node})
			case wire.TypeProgress:
				f := 0.0
				if e.Fraction != nil {
					f = *e.Fraction
				}
				onEvent(sdk.Event{Progress: &sdk.Progress{Fraction: f, Message: e.Message, Node: e.Node}})
			}
			if e.Terminal() {
				return e, nil
			}
		}
		from = batch[len(batch)-1].Seq + 1
	}
}

// AskModel asks the host's model for a run. It is the host's side of
// sdk.Host.
func (d *Dispatcher) AskModel(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
	if _, refused := d.nestedCall(req.ParentRunID, "a question for the model"); refused != nil {
		return sdk.ModelAnswer{}, refused
	}
	d.mu.Lock()
	m := d.model
	d.mu.Unlock()
	if m == nil {
		return sdk.ModelAnswer{}, &sdk.Error{Code: wire.CodeUnsupported, Message: "this host has no model configured: set [model] base_url and model in its config"}
	}
	return m.Ask(ctx, req)
}

var _ sdk.Host = (*Dispatcher)(nil)

func newRunID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "r" + hex.EncodeToString(b[:])
}
