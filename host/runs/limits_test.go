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

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// nestKind is an in-process kind whose tools call tools back through the
// dispatcher, as a graph plugin does through HostService: "fan" calls
// "leaf" three times side by side, "chain" calls itself n deep, "block"
// waits to be cancelled, and "leaf" counts how many leaves run at once.
type nestKind struct {
	d    *Dispatcher
	gate chan struct{} // leaves wait for it to close

	mu              sync.Mutex
	leaves, maxLeaf int
}

func (k *nestKind) Invoke(ctx context.Context, inv hostside.Invocation, _ func(sdk.Event)) (json.RawMessage, error) {
	switch inv.Tool.Name {
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "leaf":
		k.mu.Lock()
		k.leaves++
		k.maxLeaf = max(k.maxLeaf, k.leaves)
		k.mu.Unlock()
		select {
		case <-k.gate:
		case <-ctx.Done():
		}
		k.mu.Lock()
		k.leaves--
		k.mu.Unlock()
		return json.RawMessage(`"leaf"`), nil
	case "chain":
		var a struct{ N int }
		_ = json.Unmarshal(inv.Args, &a)
		if a.N == 0 {
			return json.RawMessage(`0`), nil
		}
		res, err := k.d.CallTool(ctx, sdk.ToolCall{ParentRunID: inv.RunID, Tool: "chain", Args: fmt.Appendf(nil, `{"n":%d}`, a.N-1)})
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, res.Error
		}
		return res.Result, nil
	case "fan":
		var wg sync.WaitGroup
		results := make([]string, 3)
		for i := range results {
			wg.Go(func() {
				res, err := k.d.CallTool(ctx, sdk.ToolCall{ParentRunID: inv.RunID, Tool: "leaf"})
				switch {
				case err != nil:
					results[i] = err.Error()
				case res.Error != nil:
					results[i] = res.Error.Code + ": " + res.Error.Message
				default:
					results[i] = string(res.Result)
				}
			})
		}
		wg.Wait()
		return json.Marshal(results)
	}
	return nil, errors.New("no such tool")
}

func nestDispatcher(t *testing.T, limit int) (*Dispatcher, *nestKind) {
	t.Helper()
	reg := tools.NewRegistry()
	var list []*tools.Tool
	for _, name := range []string{"fan", "leaf", "chain", "block"} {
		def := config.Tool{Name: name, Description: "A test tool.", Effect: "read"}
		if name == "chain" {
			def.Params = []config.Param{{Name: "n", Type: "integer"}}
		}
		list = append(list, &tools.Tool{Tool: def, Kind: "nest", Run: json.RawMessage(`{"type":"nest"}`)})
	}
	reg.Replace(list)
	k := &nestKind{gate: make(chan struct{})}
	d := NewDispatcher(reg, func(string) (Invoker, bool) { return k, true }, nil, time.Hour)
	k.d = d
	d.SetCallers(func(p string) Caller {
		if p == "gone" {
			return Caller{Refused: `the token "gone" was removed from the config`}
		}
		return Caller{MaxRunning: limit, Who: fmt.Sprintf("the token %q", p), Setting: "its max_running"}
	})
	t.Cleanup(func() { d.CancelAll("the test is over"); d.Close() })
	return d, k
}

func wait(t *testing.T, r *Run) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("run %s did not end: %v", r.Tool, err)
	}
	return last
}

// TestATopLevelCallPastTheLimitIsRefusedUntilARunEnds: with max_running
// 2, a third call is refused with a sentence saying what to do, and goes
// once one of the two has ended.
func TestATopLevelCallPastTheLimitIsRefusedUntilARunEnds(t *testing.T) {
	d, _ := nestDispatcher(t, 2)
	a, err := d.Start(Request{Tool: "block", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(Request{Tool: "block", Principal: "ed"}); err != nil {
		t.Fatal(err)
	}
	_, err = d.Start(Request{Tool: "block", Principal: "ed"})
	var ce *sdk.Error
	if !errors.As(err, &ce) || ce.Code != "too_many_runs" ||
		ce.Message != `the token "ed" already has 2 runs going (its max_running); wait for one to finish or cancel one` {
		t.Fatalf("a third run: %v; want too_many_runs", err)
	}
	if r, err := d.Start(Request{Tool: "block", Principal: "ada"}); err != nil {
		t.Fatalf("another principal is held back by ed's runs: %v", err)
	} else {
		r.Cancel()
	}
	a.Cancel()
	wait(t, a)
	c, err := d.Start(Request{Tool: "block", Principal: "ed"})
	if err != nil {
		t.Fatalf("a call after one of the two ended: %v", err)
	}
	c.Cancel()
}

// TestNestedCallsCountButNeverDeadlock: with max_running 1, a run whose
// nested calls go three side by side, or eight deep, still ends with every
// result: it lends its place to one nested call at a time, and the other
// calls wait for it. The leaves never run more than one at a time, and a
// top-level call of the same caller is refused meanwhile.
func TestNestedCallsCountButNeverDeadlock(t *testing.T) {
	d, k := nestDispatcher(t, 1)
	fan, err := d.Start(Request{Tool: "fan", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(Request{Tool: "leaf", Principal: "ed"}); err == nil || !strings.Contains(err.Error(), "already has 1 runs going") {
		t.Errorf("a top-level call while the fan runs: %v; want it refused", err)
	}
	close(k.gate)
	if last := wait(t, fan); last.Type != "result" || string(last.Result) != `["\"leaf\"","\"leaf\"","\"leaf\""]` {
		t.Fatalf("the fan ended with %+v %s", last, last.Result)
	}
	if k.maxLeaf != 1 {
		t.Errorf("%d leaves ran at once with max_running 1", k.maxLeaf)
	}
	chain, err := d.Start(Request{Tool: "chain", Principal: "ed", Args: json.RawMessage(`{"n":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	if last := wait(t, chain); last.Type != "result" || string(last.Result) != "0" {
		t.Fatalf("the chain ended with %+v", last)
	}
	if n := d.Going("ed"); n != 0 {
		t.Errorf("after every run ended, ed holds %d places", n)
	}
}

// TestANestedCallOfARevokedCallerIsRefused: a run of a token removed
// since goes on, but may not call tools.
func TestANestedCallOfARevokedCallerIsRefused(t *testing.T) {
	d, k := nestDispatcher(t, 4)
	close(k.gate)
	going, err := d.Start(Request{Tool: "block", Principal: "gone"})
	if err == nil {
		going.Cancel()
		t.Fatal("a top-level call of a removed token was taken")
	}
	d.SetCallers(func(string) Caller { return Caller{MaxRunning: 4} })
	parent, err := d.Start(Request{Tool: "block", Principal: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	d.SetCallers(func(p string) Caller {
		return Caller{Refused: fmt.Sprintf("the token %q was removed from the config", p)}
	})
	res, err := d.CallTool(context.Background(), sdk.ToolCall{ParentRunID: parent.ID, Tool: "leaf"})
	if err != nil || res.Error == nil || res.Error.Code != "forbidden" || !strings.Contains(res.Error.Message, `"gone" was removed`) {
		t.Fatalf("a nested call of a removed token: %+v, %v", res, err)
	}
}
