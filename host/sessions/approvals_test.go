package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/internal/pgtest"
)

func testApproval(id string, now time.Time) runs.Approval {
	return runs.Approval{ID: id, Run: "r-" + id, Tool: "send", Args: json.RawMessage(`{"to":"x@example.org"}`), Why: "send changes things",
		Principal: "ed", Session: "c1", Asked: now, Expires: now.Add(10 * time.Minute)}
}

// TestApprovalsDecidedOnceAcrossHosts: an approval put on one host is
// listed on the other; 2×N decisions at once, half on each host and half
// of them declines, record one, which every loser then reads; it is no
// longer listed anywhere.
func TestApprovalsDecidedOnceAcrossHosts(t *testing.T) {
	eachDB(t, testApprovalsDecidedOnceAcrossHosts)
}

func testApprovalsDecidedOnceAcrossHosts(t *testing.T, db testDB) {
	const n, rounds = 12, 4
	ctx := context.Background()
	stores := hostStores(t, db, 2)
	a, b := stores[0].Approvals(), stores[1].Approvals()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for r := range rounds {
		p := testApproval(fmt.Sprintf("a%d", r), now)
		if err := a.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
		list, err := b.Pending(ctx, now)
		if err != nil || len(list) != 1 || list[0].ID != p.ID || string(list[0].Args) != string(p.Args) || !list[0].Expires.Equal(p.Expires) || list[0].Session != "c1" {
			t.Fatalf("the other host lists %+v, %v", list, err)
		}
		var wins atomic.Int32
		var won string
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := make(chan error, 2*n)
		seen := map[string]int{}
		for i := range 2 * n {
			ap := []*Approvals{a, b}[i%2]
			decision := []string{"approve", "decline"}[(i/2)%2]
			wg.Go(func() {
				got, ok, err := ap.Decide(ctx, p.ID, decision, fmt.Sprintf("d%d", i), now)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				seen[got.Decision]++
				if ok {
					wins.Add(1)
					won = decision
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if wins.Load() != 1 || len(seen) != 1 || seen[won] != 2*n {
			t.Fatalf("round %d: %d decisions won; decisions read %v", r, wins.Load(), seen)
		}
		for _, ap := range []*Approvals{a, b} {
			if got, ok, err := ap.Get(ctx, p.ID); err != nil || !ok || got.Decision != won {
				t.Errorf("round %d: read %+v, %v, %v; want decided %s", r, got, ok, err, won)
			}
			if list, err := ap.Pending(ctx, now); err != nil || len(list) != 0 {
				t.Errorf("round %d: a decided approval is listed: %+v, %v", r, list, err)
			}
		}
	}
	if _, ok, err := b.Decide(ctx, "nope", "approve", "ed", now); ok || err != nil {
		t.Errorf("deciding an approval there is not: %v, %v", ok, err)
	}
}

// TestApprovalsExpireByTheClockGiven: an approval is not listed from its
// expiry on, and a decision then records "expired", not itself; Forget
// removes it once it expired before the time given.
func TestApprovalsExpireByTheClockGiven(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		ap := db.mustOpen(t).Approvals()
		now := time.Now().UTC().Truncate(time.Millisecond)
		p := testApproval("a1", now)
		if err := ap.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
		if list, err := ap.Pending(ctx, p.Expires.Add(-time.Millisecond)); err != nil || len(list) != 1 {
			t.Fatalf("before its expiry: %+v, %v", list, err)
		}
		if list, err := ap.Pending(ctx, p.Expires); err != nil || len(list) != 0 {
			t.Fatalf("at its expiry: %+v, %v", list, err)
		}
		got, ok, err := ap.Decide(ctx, p.ID, "approve", "ed", p.Expires)
		if err != nil || ok || got.Decision != wire.DecisionExpired {
			t.Fatalf("approved at its expiry: %+v, %v, %v", got, ok, err)
		}
		if err := ap.Forget(ctx, p.Expires); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := ap.Get(ctx, p.ID); !ok {
			t.Fatal("forgotten before it expired before the time given")
		}
		if err := ap.Forget(ctx, p.Expires.Add(time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := ap.Get(ctx, p.ID); ok {
			t.Fatal("not forgotten")
		}
	})
}

// waitDecided waits for a watch's decision; the timeout only keeps a
// broken watch from hanging the test.
func waitDecided(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(time.Minute):
		t.Fatal("the watcher never heard the decision")
		return ""
	}
}

// TestADecisionReachesTheOtherHostsWatcher: a host watching an approval
// hears the decision another host makes, with its safety poll set to an
// hour: on PostgreSQL by the notification, on SQLite (one host) in
// process.
func TestADecisionReachesTheOtherHostsWatcher(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		stores := hostStores(t, db, 2)
		holder, other := stores[0].Approvals(), stores[1].Approvals()
		holder.poll = time.Hour
		now := time.Now().UTC()
		for i, decision := range []string{"approve", "decline"} {
			p := testApproval(fmt.Sprintf("a%d", i), now)
			ch, stop := holder.Watch(p.ID)
			defer stop()
			if err := holder.Put(ctx, p); err != nil {
				t.Fatal(err)
			}
			if db.name == "postgres" {
				waitListening(t, stores[0], 1)
			}
			if _, ok, err := other.Decide(ctx, p.ID, decision, "root", now); err != nil || !ok {
				t.Fatalf("decide: %v, %v", ok, err)
			}
			if got := waitDecided(t, ch); got != decision {
				t.Errorf("heard %q; want %q", got, decision)
			}
		}
	})
}

// waitListening waits until n connections listen for approvals' decisions
// on st's database: their last statement was LISTEN, or the look-up
// after it.
func waitListening(t *testing.T, st *Store, n int) {
	t.Helper()
	for range 600 {
		var got int
		if err := st.db.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
			AND query IN ($2, $3)`, listenName, listenApprovals, decidedApprovals).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %d connections listen for approvals", n)
}

// TestTheListenerComesBackAfterItsConnectionDrops: the listening
// connection is ended by the server (pg_terminate_backend); a decision
// made then still reaches the watcher, with its safety poll set to an
// hour: the listener connects again and looks up what it may have missed.
func TestTheListenerComesBackAfterItsConnectionDrops(t *testing.T) {
	ctx := context.Background()
	url, err := sharedPG(t).NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stores := openHosts(t, url, 2)
	holder, other := stores[0].Approvals(), stores[1].Approvals()
	holder.poll = time.Hour
	now := time.Now().UTC()
	for i := range 2 {
		p := testApproval(fmt.Sprintf("a%d", i), now)
		ch, stop := holder.Watch(p.ID)
		defer stop()
		if err := holder.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitListening(t, stores[0], 1)
		var ended int
		if err := stores[1].db.QueryRow(`SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND datname = current_database()) t`, listenName).Scan(&ended); err != nil || ended < 1 {
			t.Fatalf("ended %d listeners, %v", ended, err)
		}
		if _, ok, err := other.Decide(ctx, p.ID, "approve", "root", now); err != nil || !ok {
			t.Fatalf("decide: %v, %v", ok, err)
		}
		if got := waitDecided(t, ch); got != "approve" {
			t.Errorf("heard %q", got)
		}
	}
}

// TestApprovalsWhileTheServerIsDown: with the server stopped a decision
// fails saying the database can't be reached (ErrUnavailable); once it is
// back the decision is made, and the watcher, whose listening connection
// the stop ended, hears it (its safety poll set to an hour).
func TestApprovalsWhileTheServerIsDown(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stores := openHosts(t, url, 2)
	holder, other := stores[0].Approvals(), stores[1].Approvals()
	holder.poll = time.Hour
	now := time.Now().UTC()
	p := testApproval("a1", now)
	ch, stop := holder.Watch(p.ID)
	defer stop()
	if err := holder.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitListening(t, stores[0], 1)
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Decide(ctx, p.ID, "approve", "root", now); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "deciding an approval failed") {
		t.Fatalf("deciding with the server stopped: %v", err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := other.Decide(ctx, p.ID, "decline", "root", now); err != nil || !ok {
		t.Fatalf("deciding once it is back: %v, %v", ok, err)
	}
	if got := waitDecided(t, ch); got != "decline" {
		t.Errorf("heard %q", got)
	}
}

// BenchmarkADecisionHeardOnAnotherHost: an approval asked on one host
// (Put), decided on another and heard by the first's watcher through
// LISTEN/NOTIFY (its safety poll set to an hour), per op.
func BenchmarkADecisionHeardOnAnotherHost(b *testing.B) {
	ctx := context.Background()
	url, err := sharedPG(b).NewDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	stores := openHosts(b, url, 2)
	holder, other := stores[0].Approvals(), stores[1].Approvals()
	holder.poll = time.Hour
	now := time.Now().UTC()
	// The listener is up before the clock starts.
	ch, stop := holder.Watch("warm")
	defer stop()
	if err := holder.Put(ctx, testApproval("warm", now)); err != nil {
		b.Fatal(err)
	}
	if _, _, err := other.Decide(ctx, "warm", "approve", "root", now); err != nil {
		b.Fatal(err)
	}
	<-ch
	b.ResetTimer()
	for i := range b.N {
		p := testApproval(fmt.Sprintf("b%d", i), now)
		ch, stop := holder.Watch(p.ID)
		if err := holder.Put(ctx, p); err != nil {
			b.Fatal(err)
		}
		if _, ok, err := other.Decide(ctx, p.ID, "approve", "root", now); err != nil || !ok {
			b.Fatal(ok, err)
		}
		<-ch
		stop()
	}
}
