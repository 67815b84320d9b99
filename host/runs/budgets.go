package runs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
)

// BudgetWindow is the sliding window budgets are counted over.
const BudgetWindow = time.Hour

// Budget is what a principal may use per hour; 0 is no limit.
type Budget struct {
	RunsPerHour           int
	SandboxSecondsPerHour int
	// Who names the principal in messages (`the token "ed"`); RunsSetting
	// and SecondsSetting name where each budget is set.
	Who, RunsSetting, SecondsSetting string
}

// Budgets says what each principal may use; nil is no limit.
type Budgets func(principal string) Budget

// BudgetUse is a principal's budgets and use now, as GET /api/v1/me shows
// them.
type BudgetUse struct {
	Name string `json:"name"`
	// Limit is 0 when there is none.
	Limit int     `json:"limit"`
	Used  float64 `json:"used"`
	// Resets is when the oldest use counted leaves the hour; nil when
	// nothing is counted.
	Resets *time.Time `json:"resets,omitempty"`
}

// accounting is the dispatcher's budgets and idempotency keys: the ledger
// they are kept in (which makes a check and its record one step, across
// the hosts sharing it) and the clock.
type accounting struct {
	mu      sync.Mutex
	ledger  Ledger
	budgets Budgets
	now     func() time.Time
	// kinds says what each kind is: whose runs count against sandbox
	// budgets (sdk.Info.SandboxRuns).
	kinds KindInfo
	// keep is how long an idempotency key holds; 0 is the dispatcher's
	// keep time.
	keep time.Duration
	// host is this host as its idempotency keys' claims name it (SetHost).
	host HostID
	// keyMu makes this host's calls with idempotency keys start one at a
	// time, so that a retry finds the run its key claimed already going;
	// the ledger's claim (ClaimKey) makes two identical calls start one
	// run, on this host or another.
	keyMu sync.Mutex
}

// SetLedger sets where usage and idempotency keys are kept (the host's
// store) and the clock budgets are counted by (nil: time.Now). Call it
// before the first Start; without it they are kept in memory.
func (d *Dispatcher) SetLedger(l Ledger, now func() time.Time) {
	d.acct.mu.Lock()
	defer d.acct.mu.Unlock()
	d.acct.ledger, d.acct.now = l, now
}

// SetBudgets sets what each principal may use per hour, for the calls
// from now on.
func (d *Dispatcher) SetBudgets(b Budgets) {
	d.acct.mu.Lock()
	defer d.acct.mu.Unlock()
	d.acct.budgets = b
}

// KindInfo says what a kind said of itself in Describe; ok is false for a
// kind no plugin serves.
type KindInfo func(kind string) (info sdk.Info, ok bool)

// SetKindInfo sets where the dispatcher reads what each kind is: whose runs
// and checks count their seconds against sandbox_cpu_seconds_per_hour
// (sdk.Info.SandboxRuns). Without it, no kind's do.
func (d *Dispatcher) SetKindInfo(k KindInfo) {
	d.acct.mu.Lock()
	defer d.acct.mu.Unlock()
	d.acct.kinds = k
}

// sandboxRuns says whether kind's runs are sandboxed code, whose seconds
// count against a sandbox budget.
func (d *Dispatcher) sandboxRuns(kind string) bool {
	d.acct.mu.Lock()
	kinds := d.acct.kinds
	d.acct.mu.Unlock()
	return kinds.sandboxRuns(kind)
}

func (k KindInfo) sandboxRuns(kind string) bool {
	if k == nil {
		return false
	}
	info, ok := k(kind)
	return ok && info.SandboxRuns
}

// ledgerOf returns the ledger and the clock; called with acct.mu held.
func (a *accounting) ledgerOf() (Ledger, func() time.Time) {
	if a.ledger == nil {
		a.ledger = NewMemoryLedger()
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a.ledger, a.now
}

func (d *Dispatcher) clock() func() time.Time {
	d.acct.mu.Lock()
	defer d.acct.mu.Unlock()
	_, now := d.acct.ledgerOf()
	return now
}

// charge checks the principal's budgets and records the run's start as
// one step, or refuses the call (wire.CodeBudget) saying which budget, the
// use and when it resets. sandboxed is whether the run was counted as
// sandboxed code, whose seconds its end records: decided here, once, so a
// reload between its start and its end can't change how it is counted.
func (d *Dispatcher) charge(id string, req Request, tool *tools.Tool) (sandboxed bool, err error) {
	return d.chargeFor(id, req, tool, "the call of "+req.Tool)
}

// chargeFor is charge; what names the refused work in its message ("the
// call of send", "the check of send").
func (d *Dispatcher) chargeFor(id string, req Request, tool *tools.Tool, what string) (sandboxed bool, err error) {
	sandboxed = d.sandboxRuns(tool.Kind) // asks the plugins, before the ledger is asked
	a := &d.acct
	a.mu.Lock()
	l, now := a.ledgerOf()
	var b Budget
	if a.budgets != nil {
		b = a.budgets(req.Principal)
	}
	a.mu.Unlock()
	// The ledger counts and records as one step, for every host that
	// shares it: no lock of this process is needed.
	t := now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lim := Limits{Since: t.Add(-BudgetWindow), Runs: b.RunsPerHour, SandboxSeconds: b.SandboxSecondsPerHour}
	e := UsageEntry{Run: id, Principal: req.Principal, Tool: tool.Name, Parent: req.Parent, Started: t, Sandbox: sandboxed}
	use, charged, err := l.ChargeUsage(ctx, e, lim)
	if err != nil {
		if lim.Counted() {
			return false, fmt.Errorf("the budgets of %s can't be counted: %w", req.Principal, err)
		}
		return false, fmt.Errorf("the run of %s can't be counted against its budgets: %w", req.Tool, err)
	}
	if charged {
		return sandboxed, nil
	}
	if b.RunsPerHour > 0 && use.Runs >= b.RunsPerHour {
		return false, budgetError(b.Who, "runs_per_hour", b.RunsSetting, fmt.Sprintf("%d runs of %d", use.Runs, b.RunsPerHour), use.OldestRun, t, what)
	}
	return false, budgetError(b.Who, "sandbox_cpu_seconds_per_hour", b.SecondsSetting,
		fmt.Sprintf("%.1f sandbox seconds of %d", use.SandboxSeconds, b.SandboxSecondsPerHour), use.OldestSandbox, t, what)
}

func budgetError(who, budget, setting, use string, oldest, now time.Time, what string) error {
	resets := oldest.Add(BudgetWindow)
	if oldest.IsZero() || resets.Before(now) {
		resets = now
	}
	return &sdk.Error{Code: wire.CodeBudget, Message: fmt.Sprintf(
		"%s used up its %s budget (%s): %s in the last hour; %s was refused. It resets at %s (in %s), when the oldest use counted is an hour old; ask an admin to raise it if that is too little",
		who, budget, setting, use, what, resets.UTC().Format("15:04:05 UTC"), resets.Sub(now).Round(time.Second))}
}

// refund forgets the start of a run that was refused after it was charged.
func (d *Dispatcher) refund(id string) {
	d.acct.mu.Lock()
	l, _ := d.acct.ledgerOf()
	d.acct.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.DropUsage(ctx, id); err != nil {
		d.log.Warn("a refused run stays counted against its budget", "run", id, "error", err)
	}
}

// ended records what a run used and, for a call with an idempotency key,
// its outcome; end is its terminal event, not appended yet.
func (d *Dispatcher) ended(run *Run, tool *tools.Tool, end Event, began time.Time) {
	d.acct.mu.Lock()
	l, now := d.acct.ledgerOf()
	d.acct.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if run.sandboxed {
		d.endUsage(run.ID, now().Sub(began).Seconds())
	}
	if run.IdempotencyKey != "" {
		d.keyEnded(ctx, l, run, end)
	}
}

// endUsage records the seconds a sandboxed run (or check) used.
func (d *Dispatcher) endUsage(id string, seconds float64) {
	d.acct.mu.Lock()
	l, _ := d.acct.ledgerOf()
	d.acct.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.EndUsage(ctx, id, seconds); err != nil {
		d.log.Warn("a sandboxed run's seconds are not counted against its budget", "run", id, "error", err)
	}
}

// Use returns the principal's budgets and their use now.
func (d *Dispatcher) Use(ctx context.Context, principal string) ([]BudgetUse, error) {
	a := &d.acct
	a.mu.Lock()
	l, now := a.ledgerOf()
	var b Budget
	if a.budgets != nil {
		b = a.budgets(principal)
	}
	a.mu.Unlock()
	t := now()
	use, err := l.Usage(ctx, principal, t.Add(-BudgetWindow))
	if err != nil {
		return nil, fmt.Errorf("the budgets of %s can't be counted: %w", principal, err)
	}
	resets := func(oldest time.Time) *time.Time {
		if oldest.IsZero() {
			return nil
		}
		r := oldest.Add(BudgetWindow).UTC()
		return &r
	}
	return []BudgetUse{
		{Name: "runs_per_hour", Limit: b.RunsPerHour, Used: float64(use.Runs), Resets: resets(use.OldestRun)},
		{Name: "sandbox_cpu_seconds_per_hour", Limit: b.SandboxSecondsPerHour, Used: use.SandboxSeconds, Resets: resets(use.OldestSandbox)},
	}, nil
}

// MaxRunning is how many runs the principal may have going at once; 0 is
// no limit.
func (d *Dispatcher) MaxRunning(principal string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.callers == nil {
		return 0
	}
	return d.callers(principal).MaxRunning
}

// forget drops usage older than the window and keys older than their keep
// time; Sweep calls it.
func (d *Dispatcher) forget(now time.Time) {
	a := &d.acct
	a.mu.Lock()
	l := a.ledger
	keep := a.keep
	a.mu.Unlock()
	if l == nil {
		return
	}
	if keep == 0 {
		keep = d.keep
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Forget(ctx, now.Add(-BudgetWindow), now.Add(-keep)); err != nil {
		d.log.Warn("old usage and idempotency keys could not be forgotten", "error", err)
	}
}
