package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// budgetClock is a clock tests move by hand.
type budgetClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *budgetClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *budgetClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// acctKind counts its runs: "count" answers its arguments, "box" (a
// python tool) takes 6 seconds of the test's clock, "nest" calls "count"
// three times one after another and answers what each got, "hold" waits
// for the gate.
type acctKind struct {
	d     *Dispatcher
	clock *budgetClock
	gate  chan struct{}

	mu    sync.Mutex
	calls map[string]int
}

func (k *acctKind) Invoke(ctx context.Context, inv hostside.Invocation, emit func(sdk.Event)) (json.RawMessage, error) {
	k.mu.Lock()
	k.calls[inv.Tool.Name]++
	k.mu.Unlock()
	switch inv.Tool.Name {
	case "count":
		emit(sdk.Event{Stdout: []byte("counted\n")})
		return json.Marshal(string(inv.Args))
	case "box":
		k.clock.advance(6 * time.Second)
		return json.RawMessage(`"boxed"`), nil
	case "hold":
		select {
		case <-k.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage(`"held"`), nil
	case "nest":
		var got []string
		for range 3 {
			res, err := k.d.CallTool(ctx, sdk.ToolCall{ParentRunID: inv.RunID, Tool: "count", Args: json.RawMessage(`{}`)})
			switch {
			case err != nil:
				return nil, err
			case res.Error != nil:
				got = append(got, res.Error.Code+": "+res.Error.Message)
			default:
				got = append(got, "ok")
			}
		}
		return json.Marshal(got)
	}
	return nil, errors.New("no such tool")
}

func (k *acctKind) count(tool string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[tool]
}

func acctDispatcher(t *testing.T, ledger Ledger, b Budget) (*Dispatcher, *acctKind, *budgetClock) {
	t.Helper()
	reg := tools.NewRegistry()
	var list []*tools.Tool
	for _, name := range []string{"count", "box", "nest", "hold"} {
		def := config.Tool{Name: name, Description: "A test tool.", Effect: "read",
			Params: []config.Param{{Name: "n", Type: "integer"}, {Name: "s", Type: "text"}}}
		kind := "acct"
		if name == "box" {
			kind = "sandboxed"
		}
		list = append(list, &tools.Tool{Tool: def, Kind: kind, Run: json.RawMessage(`{"type":"acct"}`)})
	}
	reg.Replace(list)
	clock := &budgetClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	k := &acctKind{clock: clock, gate: make(chan struct{}), calls: map[string]int{}}
	d := NewDispatcher(reg, func(string) (Invoker, bool) { return k, true }, nil, time.Hour)
	d.SetKindInfo(func(kind string) (sdk.Info, bool) {
		return sdk.Info{Kind: kind, SandboxRuns: kind == "sandboxed"}, true
	})
	k.d = d
	d.SetLedger(ledger, clock.now)
	d.SetBudgets(func(p string) Budget {
		b.Who, b.RunsSetting, b.SecondsSetting = fmt.Sprintf("the token %q", p), "its runs_per_hour", "its sandbox_cpu_seconds_per_hour"
		return b
	})
	t.Cleanup(func() { d.CancelAll("the test is over"); d.Close() })
	return d, k, clock
}

func refusedWith(t *testing.T, err error, code string, says ...string) {
	t.Helper()
	var se *sdk.Error
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("got %v; want a refusal with code %s", err, code)
	}
	for _, s := range says {
		if !strings.Contains(se.Message, s) {
			t.Errorf("the refusal %q does not say %q", se.Message, s)
		}
	}
}

// TestRunsPerHourIsRefusedPastItAndResetsAnHourLater: the fourth call in
// an hour of a token with runs_per_hour 3 never runs and says which
// budget, the use and when it resets; an hour after the first it goes.
func TestRunsPerHourIsRefusedPastItAndResetsAnHourLater(t *testing.T) {
	d, k, clock := acctDispatcher(t, NewMemoryLedger(), Budget{RunsPerHour: 3})
	for i := range 3 {
		run, err := d.Start(Request{Tool: "count", Args: json.RawMessage(`{}`), Principal: "ed"})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		wait(t, run)
		clock.advance(10 * time.Minute)
	}
	_, err := d.Start(Request{Tool: "count", Args: json.RawMessage(`{}`), Principal: "ed"})
	refusedWith(t, err, wire.CodeBudget, `the token "ed"`, "runs_per_hour", "3 runs of 3", "resets at 13:00:00 UTC (in 30m0s)")
	if n := k.count("count"); n != 3 {
		t.Errorf("the tool ran %d times; want 3", n)
	}
	// Another token has its own budget.
	if run, err := d.Start(Request{Tool: "count", Args: json.RawMessage(`{}`), Principal: "eve"}); err != nil {
		t.Fatalf("another token was refused: %v", err)
	} else {
		wait(t, run)
	}
	use, err := d.Use(context.Background(), "ed")
	if err != nil || use[0].Name != "runs_per_hour" || use[0].Used != 3 || use[0].Limit != 3 || use[0].Resets == nil ||
		!use[0].Resets.Equal(time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)) {
		t.Errorf("use = %+v, %v", use, err)
	}
	clock.advance(30 * time.Minute) // the first run is an hour old
	run, err := d.Start(Request{Tool: "count", Args: json.RawMessage(`{}`), Principal: "ed"})
	if err != nil {
		t.Fatalf("after the reset: %v", err)
	}
	wait(t, run)
	_, err = d.Start(Request{Tool: "count", Args: json.RawMessage(`{}`), Principal: "ed"})
	refusedWith(t, err, wire.CodeBudget, "3 runs of 3")
}

// TestSandboxSecondsAreCountedForSandboxedRunsOnly: runs of the python
// kind count their seconds; past the budget the next is refused, while a
// tool of another kind still runs.
func TestSandboxSecondsAreCountedForSandboxedRunsOnly(t *testing.T) {
	d, k, clock := acctDispatcher(t, NewMemoryLedger(), Budget{SandboxSecondsPerHour: 10})
	for range 2 {
		run, err := d.Start(Request{Tool: "box", Principal: "ed"})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, run)
	}
	_, err := d.Start(Request{Tool: "box", Principal: "ed"})
	refusedWith(t, err, wire.CodeBudget, "sandbox_cpu_seconds_per_hour", "12.0 sandbox seconds of 10")
	if k.count("box") != 2 {
		t.Errorf("box ran %d times; want 2", k.count("box"))
	}
	run, err := d.Start(Request{Tool: "count", Principal: "ed"})
	if err != nil {
		t.Fatalf("a tool outside the sandbox was refused: %v", err)
	}
	wait(t, run)
	clock.advance(time.Hour)
	if _, err := d.Start(Request{Tool: "box", Principal: "ed"}); err != nil {
		t.Fatalf("an hour later: %v", err)
	}
}

// TestNestedCallsCountAgainstTheSameToken: a tool's calls of tools count
// against its caller's runs_per_hour; the one past it is refused inside
// the run, and then the token's next call.
func TestNestedCallsCountAgainstTheSameToken(t *testing.T) {
	d, k, _ := acctDispatcher(t, NewMemoryLedger(), Budget{RunsPerHour: 3})
	run, err := d.Start(Request{Tool: "nest", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	last := wait(t, run)
	var got []string
	if err := json.Unmarshal(last.Result, &got); err != nil || len(got) != 3 {
		t.Fatalf("result %s, %v", last.Result, err)
	}
	if got[0] != "ok" || got[1] != "ok" || !strings.HasPrefix(got[2], "budget: ") || !strings.Contains(got[2], "3 runs of 3") {
		t.Errorf("the nested calls got %q; want two ok and a budget refusal", got)
	}
	if k.count("count") != 2 {
		t.Errorf("count ran %d times; want 2", k.count("count"))
	}
	_, err = d.Start(Request{Tool: "count", Principal: "ed"})
	refusedWith(t, err, wire.CodeBudget, "runs_per_hour")
}

// TestARunRefusedForItsPlaceIsNotCounted: a call refused for
// max_running does not use the budget.
func TestARunRefusedForItsPlaceIsNotCounted(t *testing.T) {
	d, k, _ := acctDispatcher(t, NewMemoryLedger(), Budget{RunsPerHour: 2})
	d.SetCallers(func(string) Caller { return Caller{MaxRunning: 1, Who: "ed", Setting: "x"} })
	hold, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := d.Start(Request{Tool: "count", Principal: "ed"})
		refusedWith(t, err, wire.CodeTooManyRuns)
	}
	close(k.gate)
	wait(t, hold)
	run, err := d.Start(Request{Tool: "count", Principal: "ed"})
	if err != nil {
		t.Fatalf("the refused calls were counted: %v", err)
	}
	wait(t, run)
}

// TestHostsSharingALedgerSpendABudgetOnce: calls at once through three
// dispatchers sharing a ledger (three hosts on one store) against
// runs_per_hour 5 run exactly five times; the rest are refused, saying
// the budget is used up.
func TestHostsSharingALedgerSpendABudgetOnce(t *testing.T) {
	ledger := NewMemoryLedger()
	var ds []*Dispatcher
	var ks []*acctKind
	for range 3 {
		d, k, _ := acctDispatcher(t, ledger, Budget{RunsPerHour: 5})
		ds, ks = append(ds, d), append(ks, k)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var started []*Run
	refused := 0
	for i := range 30 {
		wg.Go(func() {
			run, err := ds[i%3].Start(Request{Tool: "count", Args: json.RawMessage(`{}`), Principal: "ed"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refusedWith(t, err, wire.CodeBudget, "5 runs of 5")
				refused++
				return
			}
			started = append(started, run)
		})
	}
	wg.Wait()
	for _, run := range started {
		wait(t, run)
	}
	ran := 0
	for _, k := range ks {
		ran += k.count("count")
	}
	if len(started) != 5 || refused != 25 || ran != 5 {
		t.Errorf("%d started, %d refused, %d ran; want 5, 25, 5", len(started), refused, ran)
	}
}
