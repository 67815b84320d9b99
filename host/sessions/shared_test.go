package sessions

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/runs"
)

// The store shared by several hosts: each test opens a Store per host on
// one database (on SQLite, one store: one host) and races them.

// hostStores opens n stores on db: on PostgreSQL each is a host of its
// own; SQLite's file is held by one store, which every "host" shares.
func hostStores(t *testing.T, db testDB, n int) []*Store {
	t.Helper()
	stores := make([]*Store, n)
	for i := range stores {
		if db.name == "sqlite" && i > 0 {
			stores[i] = stores[0]
			continue
		}
		stores[i] = db.mustOpen(t)
	}
	return stores
}

// openHosts opens n stores on the PostgreSQL database at url, each a host
// of its own, closed at tb's end.
func openHosts(tb testing.TB, url string, n int) []*Store {
	tb.Helper()
	stores := make([]*Store, n)
	for i := range stores {
		st, err := OpenPostgres(context.Background(), url, "")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	return stores
}

// TestChargeUsageHostsSpendABudgetOnce: hosts charging one principal at
// once against a budget of K runs charge exactly K, and the refused see
// the budget used up; another principal's budget is its own.
func TestChargeUsageHostsSpendABudgetOnce(t *testing.T) {
	eachDB(t, testChargeUsageHostsSpendABudgetOnce)
}

func testChargeUsageHostsSpendABudgetOnce(t *testing.T, db testDB) {
	const hosts, each, budget = 4, 10, 7
	ctx := context.Background()
	stores := hostStores(t, db, hosts)
	now := time.Now().UTC()
	lim := runs.Limits{Since: now.Add(-time.Hour), Runs: budget}
	var charged, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, hosts*each)
	for h, st := range stores {
		for i := range each {
			wg.Go(func() {
				e := runs.UsageEntry{Run: fmt.Sprintf("r%d-%d", h, i), Principal: "ed", Tool: "hit", Started: now}
				use, ok, err := st.ChargeUsage(ctx, e, lim)
				switch {
				case err != nil:
					errs <- err
				case ok:
					charged.Add(1)
				case use.Runs < budget:
					errs <- fmt.Errorf("refused with %d runs of %d counted", use.Runs, budget)
				default:
					refused.Add(1)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if charged.Load() != budget || refused.Load() != hosts*each-budget {
		t.Fatalf("%d charged and %d refused of %d; want %d charged", charged.Load(), refused.Load(), hosts*each, budget)
	}
	if u, err := stores[hosts-1].Usage(ctx, "ed", lim.Since); err != nil || u.Runs != budget {
		t.Errorf("usage recorded: %+v, %v; want %d runs", u, err, budget)
	}
	// Another principal, and a charge with no budget, are not refused.
	if _, ok, err := stores[0].ChargeUsage(ctx, runs.UsageEntry{Run: "e1", Principal: "eve", Tool: "hit", Started: now}, lim); err != nil || !ok {
		t.Errorf("another principal's charge: %v, %v", ok, err)
	}
	if _, ok, err := stores[1].ChargeUsage(ctx, runs.UsageEntry{Run: "r-free", Principal: "ed", Tool: "hit", Started: now}, runs.Limits{}); err != nil || !ok {
		t.Errorf("a charge without a budget: %v, %v", ok, err)
	}
}

// TestChargeUsageSandboxSeconds: a sandboxed run is refused once the
// sandbox seconds counted reach the budget; a run that is not sandboxed
// is not held to it.
func TestChargeUsageSandboxSeconds(t *testing.T) { eachDB(t, testChargeUsageSandboxSeconds) }

func testChargeUsageSandboxSeconds(t *testing.T, db testDB) {
	ctx := context.Background()
	st := db.mustOpen(t)
	now := time.Now().UTC()
	lim := runs.Limits{Since: now.Add(-time.Hour), SandboxSeconds: 5}
	if _, ok, err := st.ChargeUsage(ctx, runs.UsageEntry{Run: "p1", Principal: "ed", Tool: "py", Started: now, Sandbox: true}, lim); err != nil || !ok {
		t.Fatalf("first sandboxed run: %v, %v", ok, err)
	}
	if err := st.EndUsage(ctx, "p1", 5.5); err != nil {
		t.Fatal(err)
	}
	use, ok, err := st.ChargeUsage(ctx, runs.UsageEntry{Run: "p2", Principal: "ed", Tool: "py", Started: now, Sandbox: true}, lim)
	if err != nil || ok || use.SandboxSeconds != 5.5 || use.Runs != 1 {
		t.Fatalf("a sandboxed run past the budget: %+v, %v, %v", use, ok, err)
	}
	if _, ok, err := st.ChargeUsage(ctx, runs.UsageEntry{Run: "h1", Principal: "ed", Tool: "hit", Started: now}, lim); err != nil || !ok {
		t.Fatalf("a run that is not sandboxed: %v, %v", ok, err)
	}
}

// TestClaimKeyHostsClaimOnce: hosts claiming one idempotency key at once
// (each for a run of its own) claim it once, and every other claim gets
// the winner's entry.
func TestClaimKeyHostsClaimOnce(t *testing.T) { eachDB(t, testClaimKeyHostsClaimOnce) }

func testClaimKeyHostsClaimOnce(t *testing.T, db testDB) {
	const hosts, each = 4, 5
	ctx := context.Background()
	stores := hostStores(t, db, hosts)
	now := time.Now().UTC()
	var mu sync.Mutex
	var winners []string
	seen := map[string]int{}
	var wg sync.WaitGroup
	for h, st := range stores {
		for i := range each {
			wg.Go(func() {
				e := runs.KeyEntry{Principal: "ed", Key: "msg-1", Tool: "send", ArgsHash: "h", Run: fmt.Sprintf("r%d-%d", h, i), Created: now}
				prev, claimed, err := st.ClaimKey(ctx, e, now.Add(-time.Hour))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case claimed:
					winners = append(winners, e.Run)
				default:
					seen[prev.Run]++
				}
			})
		}
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d claims won (%v); want 1", len(winners), winners)
	}
	if seen[winners[0]] != hosts*each-1 || len(seen) != 1 {
		t.Errorf("the losing claims saw %v; want %d of %s", seen, hosts*each-1, winners[0])
	}
	if k, ok, err := stores[hosts-1].Key(ctx, "ed", "msg-1"); err != nil || !ok || k.Run != winners[0] {
		t.Errorf("the key recorded: %+v, %v, %v; want run %s", k, ok, err, winners[0])
	}
}
