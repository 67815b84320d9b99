package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/runs"
)

// Leases: each host holds one in the store, and the idempotency keys it
// claims name it, so another host tells a run going on there (live lease)
// from one cut off (the lease ran out, or the host restarted).

// claim claims key for host (id, instance) on st, returning the entry
// of an earlier claim.
func claim(t *testing.T, st *Store, key, run, id, instance string) (runs.KeyEntry, bool) {
	t.Helper()
	now := time.Now().UTC()
	e := runs.KeyEntry{Principal: "ed", Key: key, Tool: "send", ArgsHash: "h", Run: run, Created: now, Host: id, Instance: instance}
	prev, claimed, err := st.ClaimKey(context.Background(), e, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return prev, claimed
}

// TestLeaseLiveKeyNamesItsHost: a key claimed by a host whose lease is
// live reads, on another host, as claimed by it: its id, its address, and
// live.
func TestLeaseLiveKeyNamesItsHost(t *testing.T) { eachDB(t, testLeaseLiveKeyNamesItsHost) }

func testLeaseLiveKeyNamesItsHost(t *testing.T, db testDB) {
	ctx := context.Background()
	stores := hostStores(t, db, 2)
	a, b := stores[0], stores[1]
	if err := a.TakeLease(ctx, "web-1", "10.0.0.5:8080", "i1", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	if err := b.TakeLease(ctx, "web-2", "10.0.0.6:8080", "j1", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(t, a, "k", "r1", "web-1", "i1"); !ok {
		t.Fatal("the first claim was refused")
	}
	prev, ok := claim(t, b, "k", "r2", "web-2", "j1")
	if ok {
		t.Fatal("the second host claimed a key claimed already")
	}
	if prev.Run != "r1" || prev.Host != "web-1" || prev.Instance != "i1" || prev.HostAddress != "10.0.0.5:8080" || !prev.HostLive || prev.Interrupted || prev.Done {
		t.Errorf("the other host reads the claim as %+v; want run r1 of web-1 at 10.0.0.5:8080, live", prev)
	}
	hosts, err := b.Hosts(ctx)
	if err != nil || len(hosts) != 2 || hosts[0].ID != "web-1" || !hosts[0].Live || hosts[1].ID != "web-2" || !hosts[1].Live {
		t.Errorf("the hosts: %+v, %v; want web-1 and web-2, live", hosts, err)
	}
	// A key's run that ended is no host's business any more.
	if err := a.EndKey(ctx, "ed", "k", "r1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n, err := b.InterruptLapsed(ctx); err != nil || n != 0 {
		t.Errorf("with every lease live, %d keys were marked interrupted, %v", n, err)
	}
}

// TestLeaseRunOutInterrupts: once the claiming host's lease ran out (or
// the host restarted: another instance holds its id), its unfinished key
// reads as not live; the first host to notice marks it interrupted, and it
// stays so should the host's lease come back.
func TestLeaseRunOutInterrupts(t *testing.T) { eachDB(t, testLeaseRunOutInterrupts) }

func testLeaseRunOutInterrupts(t *testing.T, db testDB) {
	ctx := context.Background()
	stores := hostStores(t, db, 2)
	a, b := stores[0], stores[1]
	if err := a.TakeLease(ctx, "web-1", "10.0.0.5:8080", "i1", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	claim(t, a, "cut", "r1", "web-1", "i1")
	claim(t, a, "going", "r2", "web-1", "i1")
	if err := a.EndKey(ctx, "ed", "going", "r2", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	// Its renewals stop: the lease is past.
	if err := a.RenewLease(ctx, "web-1", "10.0.0.5:8080", "i1", -time.Second); err != nil {
		t.Fatal(err)
	}
	prev, _ := claim(t, b, "cut", "r3", "web-2", "j1")
	if prev.Run != "r1" || prev.HostLive || prev.Host != "web-1" {
		t.Fatalf("after the lease ran out the claim reads %+v; want run r1 of web-1, not live", prev)
	}
	if n, err := b.InterruptLapsed(ctx); err != nil || n != 1 {
		t.Fatalf("marking the keys of the lapsed lease: %d, %v; want 1 (the ended key stays as it is)", n, err)
	}
	if n, err := a.InterruptLapsed(ctx); err != nil || n != 0 {
		t.Errorf("marking them again: %d, %v; want 0", n, err)
	}
	// The host is back and renews: its cut-off key stays interrupted.
	if err := a.RenewLease(ctx, "web-1", "10.0.0.5:8080", "i1", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	prev, _ = claim(t, b, "cut", "r3", "web-2", "j1")
	if !prev.Interrupted || prev.HostLive {
		t.Errorf("after its host renewed, the marked key reads %+v; want interrupted", prev)
	}
	if e, ok, err := b.Key(ctx, "ed", "going"); err != nil || !ok || !e.Done || e.Interrupted {
		t.Errorf("the ended key: %+v, %v, %v; want done, not interrupted", e, ok, err)
	}
	// A restart is another instance: the keys of the one before are not live.
	claim(t, a, "before", "r4", "web-1", "i1")
	if err := a.TakeLease(ctx, "web-1", "10.0.0.5:8080", "i2", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	if prev, _ := claim(t, b, "before", "r5", "web-2", "j1"); prev.Run != "r4" || prev.HostLive {
		t.Errorf("the key of the instance before the restart reads %+v; want not live", prev)
	}
}

// TestLeaseRenewKeepsItLive: renewing moves the lease on from the
// database's clock; another instance can't renew a live lease of the same
// id (two hosts with one host_id), but takes it once it was given up.
func TestLeaseRenewKeepsItLive(t *testing.T) { eachDB(t, testLeaseRenewKeepsItLive) }

func testLeaseRenewKeepsItLive(t *testing.T, db testDB) {
	ctx := context.Background()
	stores := hostStores(t, db, 2)
	a, b := stores[0], stores[1]
	if err := a.TakeLease(ctx, "web-1", "10.0.0.5:8080", "i1", -time.Minute); err != nil {
		t.Fatal(err)
	}
	before := lease(t, b, "web-1")
	if before.Live {
		t.Fatalf("a lease taken for a minute ago is live: %+v", before)
	}
	if err := a.RenewLease(ctx, "web-1", "10.0.0.5:8080", "i1", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	after := lease(t, b, "web-1")
	if !after.Live || !after.LeaseUntil.After(before.LeaseUntil.Add(time.Minute)) {
		t.Errorf("after a renewal the lease is %+v; want live, until %s after the last", after, LeaseTTL)
	}
	claim(t, a, "k", "r1", "web-1", "i1")
	if err := a.RenewLease(ctx, "web-1", "10.0.0.5:8080", "i1", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	if prev, _ := claim(t, b, "k", "r2", "web-2", "j1"); !prev.HostLive {
		t.Errorf("after renewals the claim reads %+v; want live", prev)
	}
	var taken *HostTakenError
	err := b.RenewLease(ctx, "web-1", "10.0.0.9:8080", "x1", LeaseTTL)
	if !errors.As(err, &taken) || taken.Host.Address != "10.0.0.5:8080" {
		t.Fatalf("another instance renewing the live lease of web-1: %v; want it refused, naming 10.0.0.5:8080", err)
	}
	if err := a.ReleaseLease(ctx, "web-1", "i1"); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, b, "web-1"); l.Live {
		t.Errorf("a lease given up is live: %+v", l)
	}
	if prev, _ := claim(t, b, "k", "r2", "web-2", "j1"); prev.HostLive {
		t.Errorf("after its host stopped the claim reads %+v; want not live", prev)
	}
	if err := b.RenewLease(ctx, "web-1", "10.0.0.9:8080", "x1", LeaseTTL); err != nil {
		t.Errorf("taking a lease given up: %v", err)
	}
	if l := lease(t, a, "web-1"); !l.Live || l.Instance != "x1" || l.Address != "10.0.0.9:8080" {
		t.Errorf("the lease taken over is %+v", l)
	}
}

func lease(t *testing.T, st *Store, id string) Host {
	t.Helper()
	hosts, err := st.Hosts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.ID == id {
			return h
		}
	}
	t.Fatalf("no lease of %s in %+v", id, hosts)
	return Host{}
}

// TestLeaseKeysFromBeforeLeases: a key claimed, and not ended, before the
// store had leases (schema 4) names no host, reads as not live, and is
// marked interrupted by the first host to notice.
func TestLeaseKeysFromBeforeLeases(t *testing.T) { eachDB(t, testLeaseKeysFromBeforeLeases) }

func testLeaseKeysFromBeforeLeases(t *testing.T, db testDB) {
	ctx := context.Background()
	old, err := db.open(migrations[:4])
	if err != nil {
		t.Fatal(err)
	}
	_, err = old.exec(ctx, `INSERT INTO idempotency_keys (principal, key, tool, args_hash, run_id, created, done, outcome)
		VALUES ('ed', 'k', 'send', 'h', 'r0', ?, 0, '')`, time.Now().UnixMilli())
	old.Close()
	if err != nil {
		t.Fatal(err)
	}
	st := db.mustOpen(t)
	if err := st.TakeLease(ctx, "web-1", "10.0.0.5:8080", "i1", LeaseTTL); err != nil {
		t.Fatal(err)
	}
	if prev, _ := claim(t, st, "k", "r1", "web-1", "i1"); prev.Run != "r0" || prev.Host != "" || prev.HostLive {
		t.Errorf("the key from before leases reads %+v; want run r0 of no host, not live", prev)
	}
	if n, err := st.InterruptLapsed(ctx); err != nil || n != 1 {
		t.Errorf("marking it: %d, %v; want 1", n, err)
	}
}
