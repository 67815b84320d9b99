package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// This file is approvals: a run of a tool with effect "change" (called by
// a client, or nested in a graph) waits, before its plugin is invoked, for
// a person to approve it. The waiting run, and every run it is nested in,
// gets an approval_required event; Decide approves or declines; the wait
// ends with the run's error when it is declined, expires or is cancelled.
//
// Taint (taint.go): a conversation that read outside text asks for its
// change calls from then on even when [approvals] change is "auto".
//
// A tool whose changes stay in the caller's own sandbox (the session
// tools run_python and run_bash: ApprovalPolicy.InSandbox) runs at once,
// unless its session is tainted and has a network: code could carry what
// it read out.

// Who decides approvals ([approvals] by).
const (
	ByCaller    = "caller"    // the principal who started the run, an admin or an approver
	ByAdmins    = "admins"    // admins only, never on a run they started
	ByApprovers = "approvers" // approver tokens only, never on a run they started
)

// ApprovalPolicy is what [approvals] says.
type ApprovalPolicy struct {
	// By is ByCaller (the default), ByAdmins or ByApprovers.
	By string
	// Auto runs change tools without asking ([approvals] change =
	// "auto"); a tainted session's change calls ask all the same.
	Auto bool
	// Expire is how long an approval waits; 0 is DefaultExpire.
	Expire time.Duration
	// SessionNetwork says a session's network ("off", "web",
	// "packages"); a run in a web or packages session is outside text.
	// Nil knows none.
	SessionNetwork func(ctx context.Context, principal, session string) string
	// InSandbox says whether a tool's changes stay in its caller's own
	// sandbox; nil says none do.
	InSandbox func(tool *tools.Tool) bool
	// OutsideText says whether a run of the tool brings outside text: its
	// kind said so in Describe (taint.go). Nil says none does.
	OutsideText func(tool *tools.Tool) bool
	// TaintUploads says a file uploaded into a session taints it
	// ([approvals] taint_uploads).
	TaintUploads bool
}

// DefaultExpire is how long an approval waits unless [approvals]
// expire_minutes says otherwise.
const DefaultExpire = 10 * time.Minute

// Clock is the time approvals read; tests give their own.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// nowClock is a clock read from now (a store's), whose durations pass as
// the host's do.
type nowClock struct{ now func() time.Time }

func (c nowClock) Now() time.Time                       { return c.now() }
func (nowClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Approval is a change call waiting for a person's decision, as GET
// /api/v1/approvals lists it.
type Approval struct {
	ID        string          `json:"id"`
	Run       string          `json:"run"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
	Why       string          `json:"why"`
	Principal string          `json:"principal"`
	Session   string          `json:"session,omitempty"`
	Asked     time.Time       `json:"asked"`
	Expires   time.Time       `json:"expires"`
	// Decision is "" while it waits, then approve, decline, expired or
	// cancelled.
	Decision string `json:"decision,omitempty"`
}

// Decider is who decides an approval.
type Decider struct {
	Name  string
	Admin bool
	// Viewer is set for a viewer, who never decides unless Approver is
	// set too.
	Viewer bool
	// Approver is set for a token with approver = true: it decides the
	// approvals of other principals' runs.
	Approver bool
	// Local is set for the one caller of a host with no tokens, who
	// decides its own runs whatever By says: there is no second token.
	Local bool
}

// approvals is the dispatcher's approvals; see Dispatcher.approvals.
type approvals struct {
	mu     sync.Mutex
	policy ApprovalPolicy
	clock  Clock
	// book keeps the approvals: in memory, or in the store the hosts
	// share (SetApprovalStore).
	book ApprovalStore
	// store keeps taint (taint.go); fallback keeps, in memory, the
	// taint the store could not.
	store, fallback TaintStore
	// taintNow is the clock taint is counted by (SetTaintStore); nil is
	// clock's.
	taintNow func() time.Time
	// forgotTaint is when the taint that ran out was last removed.
	forgotTaint time.Time
}

func (d *Dispatcher) approvals() *approvals {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.appr == nil {
		d.appr = &approvals{policy: ApprovalPolicy{By: ByCaller, Expire: DefaultExpire}, clock: realClock{}, book: NewMemoryApprovals()}
	}
	return d.appr
}

// SetApprovals sets [approvals] for the approvals asked from now on.
func (d *Dispatcher) SetApprovals(p ApprovalPolicy) {
	if p.By == "" {
		p.By = ByCaller
	}
	if p.Expire <= 0 {
		p.Expire = DefaultExpire
	}
	a := d.approvals()
	a.mu.Lock()
	a.policy = p
	a.mu.Unlock()
}

// SetApprovalClock sets the clock approvals read (tests).
func (d *Dispatcher) SetApprovalClock(c Clock) {
	a := d.approvals()
	a.mu.Lock()
	a.clock = c
	a.mu.Unlock()
}

// SetApprovalStore makes st keep the approvals asked from now on, read by
// the clock now (the store's): the store the hosts share, so that an
// approval asked on one is listed and decided on any.
func (d *Dispatcher) SetApprovalStore(st ApprovalStore, now func() time.Time) {
	a := d.approvals()
	a.mu.Lock()
	a.book = st
	if now != nil {
		a.clock = nowClock{now}
	}
	a.mu.Unlock()
}

// approving returns the invoker of a run: inv, behind the run's approval
// when its tool changes things (or its session is tainted), and noting
// when the run's output taints its session.
func (d *Dispatcher) approving(run *Run, tool *tools.Tool, inv Invoker) Invoker {
	return approvingInvoker{d: d, run: run, tool: tool, inv: inv}
}

type approvingInvoker struct {
	d    *Dispatcher
	run  *Run
	tool *tools.Tool
	inv  Invoker
}

func (ai approvingInvoker) Invoke(ctx context.Context, in hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	a := ai.d.approvals()
	if why := a.asks(ctx, ai.run, ai.tool); why != "" {
		if err := ai.d.await(ctx, a, ai.run, in.Args, why); err != nil {
			return nil, err
		}
	}
	res, err := ai.inv.Invoke(ctx, in, onEvent)
	ai.d.noteOutside(ctx, ai.run, ai.tool, err != nil)
	return res, err
}

// asks says why the run must be approved, or "" when it need not.
func (a *approvals) asks(ctx context.Context, run *Run, tool *tools.Tool) string {
	if tool.Effect != "change" {
		return ""
	}
	a.mu.Lock()
	p := a.policy
	a.mu.Unlock()
	if p.InSandbox != nil && p.InSandbox(tool) {
		if run.Session == "" || p.SessionNetwork == nil {
			return ""
		}
		taint := a.taintedAll(ctx, run.Principal, run.Session)
		if taint == "" {
			return ""
		}
		network := p.SessionNetwork(ctx, run.Principal, run.Session)
		if network == "" || network == "off" {
			return ""
		}
		return fmt.Sprintf("this conversation read outside text (%s), and its sandbox reaches the network (%s): %s could carry what it read out", taint, network, tool.Name)
	}
	taint := a.taintedAll(ctx, run.Principal, run.Session)
	switch {
	case !p.Auto && taint != "":
		return fmt.Sprintf("%s changes things (effect \"change\"), and this conversation read outside text (%s)", tool.Name, taint)
	case !p.Auto:
		return fmt.Sprintf("%s changes things (effect \"change\"): a person approves each run", tool.Name)
	case taint != "":
		return fmt.Sprintf("this conversation read outside text (%s): %s changes things, so it asks first even though [approvals] change is \"auto\"", taint, tool.Name)
	}
	return ""
}

// storeTimeout bounds a call of the approval store that has no caller's
// context to follow.
const storeTimeout = 10 * time.Second

// await asks for the run's approval and waits for the decision, which may
// be made on any host sharing the approval store.
func (d *Dispatcher) await(ctx context.Context, a *approvals, run *Run, args json.RawMessage, why string) error {
	a.mu.Lock()
	clock, expire, book := a.clock, a.policy.Expire, a.book
	a.mu.Unlock()
	now := clock.Now()
	p := Approval{
		ID: newApprovalID(), Run: run.ID, Tool: run.Tool, Args: args, Why: why, Principal: run.Principal,
		Session: run.Session, Asked: now.UTC(), Expires: now.Add(expire).UTC(),
	}
	decided, stop := book.Watch(p.ID)
	defer stop()
	if err := book.Put(ctx, p); err != nil {
		return fmt.Errorf("the call of %s needs a person's approval, which can't be asked: %w", run.Tool, err)
	}
	if err := book.Forget(ctx, now.Add(-keepDecided)); err != nil {
		d.log.Warn("old approvals could not be forgotten", "error", err)
	}
	ev := Event{Type: wire.TypeApprovalRequired, Approval: p.ID, Tool: run.Tool, Args: args, Why: why}
	for _, r := range d.lineage(run) {
		r.append(ev)
	}
	d.log.Info("a run waits for approval", "run", run.ID, "tool", run.Tool, "approval", p.ID, "principal", run.Principal)
	timer := clock.After(expire)
	var dec string
	select {
	case dec = <-decided:
	case <-timer:
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		got, _, err := book.Decide(sctx, p.ID, wire.DecisionExpired, "", clock.Now())
		cancel()
		if err != nil {
			// The store can't say: the call does not run.
			d.log.Warn("an expired approval could not be recorded", "approval", p.ID, "error", err)
			got.Decision = wire.DecisionExpired
		}
		dec = got.Decision
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		if _, _, err := book.Decide(sctx, p.ID, wire.DecisionCancelled, "", clock.Now()); err != nil {
			d.log.Warn("a cancelled approval could not be recorded", "approval", p.ID, "error", err)
		}
		cancel()
		return ctx.Err()
	}
	switch dec {
	case wire.DecisionApprove:
		return nil
	case wire.DecisionExpired:
		// It waited its expire_minutes, whichever host's clock passed them.
		waited := expire.Round(time.Second)
		return &sdk.Error{Code: wire.CodeApprovalExpired, Message: fmt.Sprintf(
			"nobody approved the call of %s in %s, so it expired and did not run ([approvals] expire_minutes); call it again and approve it in time", run.Tool, waited)}
	}
	return &sdk.Error{Code: wire.CodeDeclined, Message: fmt.Sprintf("the call of %s was declined; it did not run", run.Tool)}
}

// lineage is the run and the runs it is nested in, innermost first.
func (d *Dispatcher) lineage(run *Run) []*Run {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := []*Run{run}
	for p, ok := d.parent[run.ID]; ok; p, ok = d.parent[p] {
		if r := d.runs[p]; r != nil {
			out = append(out, r)
		}
	}
	return out
}

// keepDecided is how long a decided approval is kept, so a second
// decision is told it came too late rather than that there is none.
const keepDecided = time.Hour

// mayDecide says whether who may decide p under the policy.
func (a *approvals) mayDecide(p *Approval, who Decider) bool {
	if who.Viewer && !who.Approver {
		return false
	}
	if ownRun(p, who) {
		return a.policy.By == ByCaller || who.Local
	}
	switch a.policy.By {
	case ByAdmins:
		return who.Admin
	case ByApprovers:
		return who.Approver
	}
	return who.Admin || who.Approver
}

// ownRun says whether p's run was started by who's token.
func ownRun(p *Approval, who Decider) bool {
	return who.Name != "" && who.Name == p.Principal
}

// seesApproval says whether who may learn that p exists: its own run's,
// or any run's for an admin or an approver.
func seesApproval(p *Approval, who Decider) bool {
	return who.Admin || who.Approver || ownRun(p, who)
}

// Approvals lists the approvals waiting that who may decide, oldest
// first; an empty list when the approval store can't be read (the log
// says why). The API lists them with ListApprovals.
func (d *Dispatcher) Approvals(who Decider) []Approval {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	list, err := d.ListApprovals(ctx, who)
	if err != nil {
		d.log.Warn("the approvals could not be listed", "error", err)
		return []Approval{}
	}
	return list
}

// ListApprovals lists the approvals waiting, on every host sharing the
// approval store, that who may decide, oldest first.
func (d *Dispatcher) ListApprovals(ctx context.Context, who Decider) ([]Approval, error) {
	a := d.approvals()
	a.mu.Lock()
	book, now := a.book, a.clock.Now()
	a.mu.Unlock()
	all, err := book.Pending(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("the approvals waiting can't be listed: %w", err)
	}
	out := []Approval{}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range all {
		if a.mayDecide(&all[i], who) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// Decide approves ("approve") or declines ("decline") an approval for
// who, whichever host's run waits for it. The error is an *sdk.Error:
// bad_args for another decision, not_found for an approval there is not
// (or one who may not even see), self_approval for the token that started
// the run where By is not ByCaller, forbidden for one who may see but not
// decide, already_decided for one decided before (here or on another
// host). When the approval store fails, the error wraps the store's
// (store_unavailable while its database can't be reached).
func (d *Dispatcher) Decide(id string, who Decider, decision string) (Approval, error) {
	if decision != wire.DecisionApprove && decision != wire.DecisionDecline {
		return Approval{}, &sdk.Error{Code: wire.CodeBadArgs, Message: fmt.Sprintf("the decision must be \"approve\" or \"decline\", not %q", decision)}
	}
	if who.Viewer && !who.Approver {
		return Approval{}, &sdk.Error{Code: wire.CodeForbidden, Message: fmt.Sprintf("%s is a viewer and may not decide approvals", who.Name)}
	}
	a := d.approvals()
	a.mu.Lock()
	book, clock := a.book, a.clock
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	// The store's error keeps its code (store_unavailable while its
	// database can't be reached) for the caller.
	unreachable := func(err error) error {
		return fmt.Errorf("the approval can't be decided now: %w", err)
	}
	p, ok, err := book.Get(ctx, id)
	if err != nil {
		return Approval{}, unreachable(err)
	}
	if !ok || !seesApproval(&p, who) {
		return Approval{}, &sdk.Error{Code: wire.CodeNotFound, Message: "there is no approval with that id waiting for you"}
	}
	a.mu.Lock()
	may := a.mayDecide(&p, who)
	var refused error
	if !may {
		refused = a.refusal(&p, who)
	}
	a.mu.Unlock()
	if !may {
		return p, refused
	}
	if p.Decision == "" {
		var won bool
		p, won, err = book.Decide(ctx, id, decision, who.Name, clock.Now())
		if err != nil {
			return Approval{}, unreachable(err)
		}
		if won {
			d.log.Info("approval decided", "approval", id, "run", p.Run, "tool", p.Tool, "decision", decision, "by", who.Name)
			return p, nil
		}
	}
	return p, &sdk.Error{Code: wire.CodeAlreadyDecided, Message: fmt.Sprintf("the approval was already decided (%s): a call is approved or declined once", describeDecision(p.Decision))}
}

// refusal says why who, who may see p, may not decide it.
func (a *approvals) refusal(p *Approval, who Decider) error {
	deciders := map[string]string{ByAdmins: "an admin", ByApprovers: "a token with approver = true"}[a.policy.By]
	if ownRun(p, who) {
		return &sdk.Error{Code: wire.CodeSelfApproval, Message: fmt.Sprintf(
			"%s started this run, and on this host the token that starts a run may not approve it ([approvals] by = %q): %s decides it, with a token the caller does not hold", who.Name, a.policy.By, deciders)}
	}
	return &sdk.Error{Code: wire.CodeForbidden, Message: fmt.Sprintf("only %s decides approvals on this host ([approvals] by = %q)", deciders, a.policy.By)}
}

func describeDecision(d string) string {
	switch d {
	case wire.DecisionApprove:
		return "approved"
	case wire.DecisionDecline:
		return "declined"
	case wire.DecisionExpired:
		return "it expired"
	case wire.DecisionCancelled:
		return "its run was cancelled"
	}
	return d
}

func newApprovalID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "a" + hex.EncodeToString(b[:])
}
