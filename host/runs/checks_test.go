package runs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
)

// TestChecksAreMeteredLikeRuns: a check of a python tool holds a place
// while it goes (the next one past max_running is too_many_runs), counts
// as a run, and its seconds count against sandbox_cpu_seconds_per_hour,
// so that once they are used up a check is refused with budget.
func TestChecksAreMeteredLikeRuns(t *testing.T) {
	d, _, clock := acctDispatcher(t, NewMemoryLedger(), Budget{SandboxSecondsPerHour: 5})
	d.SetCallers(func(string) Caller { return Caller{MaxRunning: 1, Who: `the token "ed"`, Setting: "its max_running"} })
	def := config.Tool{Name: "py", Run: map[string]any{"type": "sandboxed", "code": "print(1)"}}
	end, err := d.StartCheck("ed", def)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.StartCheck("ed", def)
	refusedWith(t, err, wire.CodeTooManyRuns, `the token "ed" already has 1 runs and checks going`)
	if g := d.Going("ed"); g != 1 {
		t.Errorf("a check holds %d places", g)
	}
	clock.advance(6 * time.Second)
	end()
	end() // a second end gives back nothing more
	if g := d.Going("ed"); g != 0 {
		t.Errorf("after the check, %d places are held", g)
	}
	use, err := d.Use(context.Background(), "ed")
	if err != nil {
		t.Fatal(err)
	}
	if use[0].Used != 1 || use[1].Used != 6 {
		t.Errorf("use after one check: %+v", use)
	}
	_, err = d.StartCheck("ed", def)
	refusedWith(t, err, wire.CodeBudget, "sandbox_cpu_seconds_per_hour", "the check of py was refused")
	if g := d.Going("ed"); g != 0 {
		t.Errorf("a refused check holds %d places", g)
	}
}

// writeCountingLedger is a MemoryLedger that counts the writes of usage.
type writeCountingLedger struct {
	*MemoryLedger
	writes atomic.Int64
}

func (l *writeCountingLedger) ChargeUsage(ctx context.Context, e UsageEntry, lim Limits) (Use, bool, error) {
	l.writes.Add(1)
	return l.MemoryLedger.ChargeUsage(ctx, e, lim)
}

func (l *writeCountingLedger) DropUsage(ctx context.Context, run string) error {
	l.writes.Add(1)
	return l.MemoryLedger.DropUsage(ctx, run)
}

// TestAFloodPastMaxRunningWritesNothing: calls and checks refused
// too_many_runs are refused before they are charged, so that a flood of
// them (an abuse test's storm of checks made 170,000) costs the store no
// write and the budget lock no wait: every other caller's charge shares
// that lock.
func TestAFloodPastMaxRunningWritesNothing(t *testing.T) {
	ledger := &writeCountingLedger{MemoryLedger: NewMemoryLedger()}
	d, k, _ := acctDispatcher(t, ledger, Budget{RunsPerHour: 1000})
	d.SetCallers(func(string) Caller { return Caller{MaxRunning: 1, Who: "ed", Setting: "x"} })
	hold, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	before := ledger.writes.Load()
	def := config.Tool{Name: "py", Run: map[string]any{"type": "sandboxed", "code": "print(1)"}}
	for range 50 {
		_, err := d.Start(Request{Tool: "count", Principal: "ed"})
		refusedWith(t, err, wire.CodeTooManyRuns)
		_, err = d.StartCheck("ed", def)
		refusedWith(t, err, wire.CodeTooManyRuns)
	}
	if w := ledger.writes.Load() - before; w != 0 {
		t.Errorf("100 calls and checks refused too_many_runs made %d writes to the ledger, want none", w)
	}
	close(k.gate)
	wait(t, hold)
}
