package runs

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
)

// TestTheSameKeyRunsOnce: a call sent again with its key (its arguments
// written otherwise: other key order, spaces) runs once, and the retry
// gets the first run with its output and result.
func TestTheSameKeyRunsOnce(t *testing.T) {
	d, k, _ := acctDispatcher(t, NewMemoryLedger(), Budget{})
	first, err := d.Start(Request{Tool: "count", Args: json.RawMessage(`{"n":1,"s":"x"}`), Principal: "ed", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, first)
	again, err := d.Start(Request{Tool: "count", Args: json.RawMessage(` { "s" : "x", "n" : 1 } `), Principal: "ed", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if last := wait(t, again); again.ID != first.ID || last.Result == nil {
		t.Errorf("the retry got run %s (%+v); want %s", again.ID, last, first.ID)
	}
	if n := k.count("count"); n != 1 {
		t.Errorf("the tool ran %d times; want 1", n)
	}
	// The same key from another principal is another call.
	other, err := d.Start(Request{Tool: "count", Args: json.RawMessage(`{"n":1,"s":"x"}`), Principal: "eve", IdempotencyKey: "k1"})
	if err != nil || other.ID == first.ID {
		t.Fatalf("another principal's key: %v, run %v", err, other)
	}
	wait(t, other)
}

// TestConcurrentCallsWithOneKeyStartOneRun: ten identical calls at once
// start one run, which all of them get, while it runs.
func TestConcurrentCallsWithOneKeyStartOneRun(t *testing.T) {
	d, k, _ := acctDispatcher(t, NewMemoryLedger(), Budget{})
	var wg sync.WaitGroup
	ids := make([]string, 10)
	for i := range ids {
		wg.Go(func() {
			run, err := d.Start(Request{Tool: "hold", Args: json.RawMessage(`{"n":7}`), Principal: "ed", IdempotencyKey: "same"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = run.ID
		})
	}
	wg.Wait()
	close(k.gate)
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("the calls got runs %q; want one", ids)
		}
	}
	run, _ := d.Get(ids[0])
	wait(t, run)
	if n := k.count("hold"); n != 1 {
		t.Errorf("the tool ran %d times; want 1", n)
	}
}

// TestTheSameKeyForAnotherCallIsAConflict: other arguments, another tool
// or another session under a key already used are refused, naming the
// key; after keep_minutes the key is free again.
func TestTheSameKeyForAnotherCallIsAConflict(t *testing.T) {
	d, k, clock := acctDispatcher(t, NewMemoryLedger(), Budget{})
	d.SetKeyKeep(10 * time.Minute)
	run, err := d.Start(Request{Tool: "count", Args: json.RawMessage(`{"n":1}`), Principal: "ed", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, run)
	for _, req := range []Request{
		{Tool: "count", Args: json.RawMessage(`{"n":2}`)},
		{Tool: "box", Args: json.RawMessage(`{"n":1}`)},
		{Tool: "count", Args: json.RawMessage(`{"n":1}`), Session: "s1"},
	} {
		req.Principal, req.IdempotencyKey = "ed", "k"
		_, err := d.Start(req)
		refusedWith(t, err, wire.CodeIdempotencyConflict, `the idempotency key "k" was already used`, "send a new key")
	}
	_, err = d.Start(Request{Tool: "count", Principal: "ed", IdempotencyKey: strings.Repeat("k", MaxKeyLength+1)})
	refusedWith(t, err, wire.CodeBadArgs, "at most 255")
	clock.advance(11 * time.Minute)
	run, err = d.Start(Request{Tool: "count", Args: json.RawMessage(`{"n":2}`), Principal: "ed", IdempotencyKey: "k"})
	if err != nil {
		t.Fatalf("after keep_minutes: %v", err)
	}
	wait(t, run)
	if n := k.count("count"); n != 2 {
		t.Errorf("count ran %d times; want 2", n)
	}
}

// TestAKeyOutlivesTheDispatcher: a host started again on the same ledger
// answers a retry with the recorded outcome (output, result, run id)
// without running it; a key whose run was cut off by the stop is refused
// as interrupted rather than run twice.
func TestAKeyOutlivesTheDispatcher(t *testing.T) {
	ledger := NewMemoryLedger()
	d1, _, _ := acctDispatcher(t, ledger, Budget{})
	first, err := d1.Start(Request{Tool: "count", Args: json.RawMessage(`{"n":3}`), Principal: "ed", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	firstEnd := wait(t, first)
	held, err := d1.Start(Request{Tool: "hold", Principal: "ed", IdempotencyKey: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	d1.Close() // the host stops with "hold" still going

	d2, k2, _ := acctDispatcher(t, ledger, Budget{})
	again, err := d2.Start(Request{Tool: "count", Args: json.RawMessage(`{"n":3}`), Principal: "ed", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	last := wait(t, again)
	stdout, _, _ := again.Printed()
	if again.ID != first.ID || string(last.Result) != string(firstEnd.Result) || stdout != "counted\n" {
		t.Errorf("the retry got run %s, result %s, output %q; want %s, %s, \"counted\\n\"", again.ID, last.Result, stdout, first.ID, firstEnd.Result)
	}
	if k2.count("count") != 0 {
		t.Errorf("the retry ran the tool again")
	}
	if _, ok := d2.Get(first.ID); !ok {
		t.Errorf("the replayed run can't be read back by its id")
	}
	_, err = d2.Start(Request{Tool: "hold", Principal: "ed", IdempotencyKey: "cut"})
	refusedWith(t, err, wire.CodeInterrupted, held.ID, "whether it acted is unknown")
	if k2.count("hold") != 0 {
		t.Errorf("the interrupted call ran again")
	}
}

// TestAKeySentToHostsSharingALedgerRunsOnce: the same call with one key
// sent at once to three dispatchers sharing a ledger (three hosts on one
// store) runs once: the host whose claim won runs it, and a retry there
// gets that run; another host, while it goes on, answers interrupted
// (protocol.md: what a key whose run is not on this host gets), and once
// it ended gets its recorded outcome under the same run id.
func TestAKeySentToHostsSharingALedgerRunsOnce(t *testing.T) {
	ledger := NewMemoryLedger()
	var ds []*Dispatcher
	var ks []*acctKind
	for range 3 {
		d, k, _ := acctDispatcher(t, ledger, Budget{})
		ds, ks = append(ds, d), append(ks, k)
	}
	req := Request{Tool: "hold", Args: json.RawMessage(`{"n":7}`), Principal: "ed", IdempotencyKey: "same"}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			run, err := ds[i%3].Start(req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got[run.ID]++
			case strings.Contains(err.Error(), "running when the host stopped"):
				got["interrupted"]++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(got) != 2 || got["interrupted"] == 0 {
		t.Fatalf("the calls got %v; want one run, and interrupted from the other hosts", got)
	}
	var winner *Run
	var host int
	for i, d := range ds {
		for id := range got {
			if run, ok := d.Get(id); ok {
				winner, host = run, i
			}
		}
	}
	if winner == nil {
		t.Fatalf("no host holds the run of %v", got)
	}
	for _, k := range ks {
		close(k.gate)
	}
	wait(t, winner)
	ran := 0
	for _, k := range ks {
		ran += k.count("hold")
	}
	if ran != 1 {
		t.Errorf("the tool ran %d times; want 1", ran)
	}
	other := ds[(host+1)%3]
	again, err := other.Start(req)
	if err != nil {
		t.Fatal(err)
	}
	if last := wait(t, again); again.ID != winner.ID || last.Type != wire.TypeResult {
		t.Errorf("a retry on another host after the end got run %s (%+v); want %s's result", again.ID, last, winner.ID)
	}
}

// TestACallRefusedLeavesItsKeyUnused: a keyed call refused for its budget
// leaves its key free: the same key runs once the budget allows.
func TestACallRefusedLeavesItsKeyUnused(t *testing.T) {
	d, _, clock := acctDispatcher(t, NewMemoryLedger(), Budget{RunsPerHour: 1})
	first, err := d.Start(Request{Tool: "count", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, first)
	req := Request{Tool: "count", Args: json.RawMessage(`{"n":1}`), Principal: "ed", IdempotencyKey: "k"}
	_, err = d.Start(req)
	refusedWith(t, err, wire.CodeBudget, "runs_per_hour")
	clock.advance(61 * time.Minute)
	run, err := d.Start(req)
	if err != nil {
		t.Fatalf("the key after its call was refused: %v", err)
	}
	if last := wait(t, run); last.Type != wire.TypeResult {
		t.Errorf("the keyed run ended with %+v", last)
	}
}
