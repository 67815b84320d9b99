package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Approvals shared by hosts: two dispatchers, each with a store of its own
// on one PostgreSQL database (two hosts), keep their approvals in the
// store (SetApprovalStore, as the host does when [store] is PostgreSQL).

var ed = runs.Decider{Name: "ed"}

// sharedHosts returns two dispatchers sharing one PostgreSQL store's
// approvals, and the count of the change tool's runs of each.
func sharedHosts(t *testing.T) (a, b *runs.Dispatcher, sentA, sentB func() int32) {
	t.Helper()
	ctx := context.Background()
	url, err := pgtest.Start(t).NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds := make([]*runs.Dispatcher, 2)
	sent := make([]func() int32, 2)
	for i := range ds {
		st, err := sessions.OpenPostgres(ctx, url, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ds[i], sent[i] = runs.ChangeDispatcher(t)
		ds[i].SetApprovalStore(st.Approvals(), st.Clock())
	}
	return ds[0], ds[1], sent[0], sent[1]
}

// TestARunWaitingOnOneHostIsApprovedOnAnother: host B lists the approval
// of a run waiting on host A and approves it; the run on A runs and ends
// with its result; a second decision, on either host, is already decided.
func TestARunWaitingOnOneHostIsApprovedOnAnother(t *testing.T) {
	a, b, sentA, sentB := sharedHosts(t)
	run, err := a.Start(runs.Request{Tool: "send", Args: json.RawMessage(`{"to":"x@example.org"}`), Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	ev := runs.WaitAsked(t, run)
	list := b.Approvals(ed)
	if len(list) != 1 || list[0].ID != ev.Approval || list[0].Run != run.ID || string(list[0].Args) != `{"to":"x@example.org"}` {
		t.Fatalf("host B lists %+v", list)
	}
	if len(b.Approvals(runs.Decider{Name: "eve"})) != 0 {
		t.Error("another principal sees ed's approval")
	}
	if _, err := b.Decide(ev.Approval, runs.Decider{Name: "eve"}, "approve"); errcode.Code(err) != wire.CodeNotFound {
		t.Errorf("another principal decides on host B: %v", err)
	}
	if _, err := b.Decide(ev.Approval, ed, "approve"); err != nil {
		t.Fatal(err)
	}
	if last := runs.End(t, run); last.Type != "result" || string(last.Result) != `{"to":"x@example.org"}` || sentA() != 1 || sentB() != 0 {
		t.Fatalf("ended %+v; sent %d on A, %d on B", last, sentA(), sentB())
	}
	for _, d := range []*runs.Dispatcher{a, b} {
		if _, err := d.Decide(ev.Approval, ed, "decline"); errcode.Code(err) != wire.CodeAlreadyDecided || !strings.Contains(err.Error(), "already decided (approved)") {
			t.Errorf("a second decision: %v", err)
		}
		if len(d.Approvals(ed)) != 0 {
			t.Error("a decided approval is still listed")
		}
	}
}

// TestARunWaitingOnOneHostIsDeclinedOnAnother: declined on host B, the
// run on A ends declined without running.
func TestARunWaitingOnOneHostIsDeclinedOnAnother(t *testing.T) {
	a, b, sentA, _ := sharedHosts(t)
	run, err := a.Start(runs.Request{Tool: "send", Args: json.RawMessage(`{}`), Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	ev := runs.WaitAsked(t, run)
	if _, err := b.Decide(ev.Approval, ed, "decline"); err != nil {
		t.Fatal(err)
	}
	if last := runs.End(t, run); last.Error == nil || last.Error.Code != wire.CodeDeclined || sentA() != 0 {
		t.Fatalf("ended %+v, sent %d", last, sentA())
	}
	if _, err := a.Decide(ev.Approval, runs.Decider{Name: "root", Admin: true}, "approve"); errcode.Code(err) != wire.CodeAlreadyDecided {
		t.Errorf("approve on A after decline on B: %v", err)
	}
}

// TestDecisionsOnTwoHostsAtOnceDecideOnce: many decisions at once, half on
// each host: one wins, and the tool runs once.
func TestDecisionsOnTwoHostsAtOnceDecideOnce(t *testing.T) {
	a, b, sentA, sentB := sharedHosts(t)
	run, err := a.Start(runs.Request{Tool: "send", Args: json.RawMessage(`{}`), Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	ev := runs.WaitAsked(t, run)
	var wins, already atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		d := []*runs.Dispatcher{a, b}[i%2]
		wg.Go(func() {
			_, err := d.Decide(ev.Approval, ed, "approve")
			switch {
			case err == nil:
				wins.Add(1)
			case errcode.Code(err) == wire.CodeAlreadyDecided:
				already.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	runs.End(t, run)
	if wins.Load() != 1 || already.Load() != 15 || sentA() != 1 || sentB() != 0 {
		t.Errorf("%d decisions won, %d already decided; sent %d on A, %d on B", wins.Load(), already.Load(), sentA(), sentB())
	}
}

// TestAnApprovalExpiresOnEveryHostAtOnce: once the approvals' clock passes
// an approval's expiry, host B no longer lists it and its approval comes
// too late (already decided: it expired), and the run waiting on A ends
// expired though A's own timer has not fired.
func TestAnApprovalExpiresOnEveryHostAtOnce(t *testing.T) {
	a, b, sentA, _ := sharedHosts(t)
	start := time.Now().UTC()
	clockA, clockB := runs.NewFakeClock(start), runs.NewFakeClock(start)
	a.SetApprovalClock(clockA)
	b.SetApprovalClock(clockB)
	a.SetApprovals(runs.ApprovalPolicy{Expire: 3 * time.Minute})
	b.SetApprovals(runs.ApprovalPolicy{Expire: 3 * time.Minute})
	run, err := a.Start(runs.Request{Tool: "send", Args: json.RawMessage(`{}`), Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	ev := runs.WaitAsked(t, run)
	clockB.Advance(2 * time.Minute)
	if len(b.Approvals(ed)) != 1 {
		t.Fatal("host B does not list the approval before it expired")
	}
	clockB.Advance(time.Minute)
	if len(b.Approvals(ed)) != 0 {
		t.Error("host B lists an expired approval")
	}
	if _, err := b.Decide(ev.Approval, ed, "approve"); errcode.Code(err) != wire.CodeAlreadyDecided || !strings.Contains(err.Error(), "expired") {
		t.Errorf("approve on B after the expiry: %v", err)
	}
	if last := runs.End(t, run); last.Error == nil || last.Error.Code != wire.CodeApprovalExpired || !strings.Contains(last.Error.Message, "in 3m0s") || sentA() != 0 {
		t.Fatalf("ended %+v, sent %d", last, sentA())
	}
}
