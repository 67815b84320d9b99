package sessions

import (
	"context"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/runs"
)

// TestUsageAndKeysOutliveTheStore: what the dispatcher's ledger keeps in
// the store is there after it is closed and opened again; usage counts
// the hour after since only, seconds of sandboxed runs only; Forget drops
// the old.
func TestUsageAndKeysOutliveTheStore(t *testing.T) { eachDB(t, testUsageAndKeysOutliveTheStore) }

func testUsageAndKeysOutliveTheStore(t *testing.T, db testDB) {
	ctx := context.Background()
	st := db.mustOpen(t)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, e := range []runs.UsageEntry{
		{Run: "r1", Principal: "ed", Tool: "hit", Started: t0},
		{Run: "r2", Principal: "ed", Tool: "run_python", Started: t0.Add(10 * time.Minute), Sandbox: true},
		{Run: "r3", Principal: "ed", Tool: "run_python", Parent: "r2", Started: t0.Add(20 * time.Minute), Sandbox: true},
		{Run: "r4", Principal: "eve", Tool: "hit", Started: t0.Add(30 * time.Minute)},
	} {
		if err := st.StartUsage(ctx, e); err != nil {
			t.Fatal(i, err)
		}
	}
	_ = st.EndUsage(ctx, "r2", 4.5)
	_ = st.EndUsage(ctx, "r3", 1.5)
	_ = st.EndUsage(ctx, "r1", 100) // not sandboxed: not counted
	if _, claimed, err := st.ClaimKey(ctx, runs.KeyEntry{Principal: "ed", Key: "k", Tool: "hit", ArgsHash: "h", Run: "r1", Created: t0}, t0.Add(-time.Hour)); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	if err := st.EndKey(ctx, "ed", "k", "r1", []byte(`{"result":1}`)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = db.mustOpen(t)
	u, err := st.Usage(ctx, "ed", t0.Add(-time.Minute))
	if err != nil || u.Runs != 3 || u.SandboxSeconds != 6 || !u.OldestRun.Equal(t0) || !u.OldestSandbox.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("usage = %+v, %v", u, err)
	}
	if u, _ := st.Usage(ctx, "ed", t0); u.Runs != 2 {
		t.Errorf("a run started at since is counted: %+v", u)
	}
	k, ok, err := st.Key(ctx, "ed", "k")
	if err != nil || !ok || !k.Done || string(k.Outcome) != `{"result":1}` || k.Run != "r1" || !k.Created.Equal(t0) {
		t.Errorf("key = %+v, %v, %v", k, ok, err)
	}
	if _, ok, _ := st.Key(ctx, "eve", "k"); ok {
		t.Errorf("another principal's key was found")
	}
	if err := st.DropUsage(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(ctx, t0.Add(5*time.Minute), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if u, _ := st.Usage(ctx, "ed", t0.Add(-time.Hour)); u.Runs != 1 || u.SandboxSeconds != 4.5 {
		t.Errorf("after DropUsage and Forget: %+v", u)
	}
	if _, ok, _ := st.Key(ctx, "ed", "k"); ok {
		t.Errorf("Forget kept an old key")
	}
}

// TestClaimKey: a key is claimed once while its entry is fresh, and the
// claim that loses gets the entry; an entry older than fresh is replaced;
// DropKey frees a key only for the run that claimed it.
func TestClaimKey(t *testing.T) { eachDB(t, testClaimKey) }

func testClaimKey(t *testing.T, db testDB) {
	ctx := context.Background()
	st := db.mustOpen(t)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := runs.KeyEntry{Principal: "ed", Key: "k", Tool: "hit", ArgsHash: "h", Run: "r1", Created: t0}
	if _, claimed, err := st.ClaimKey(ctx, e, t0.Add(-time.Hour)); err != nil || !claimed {
		t.Fatalf("first claim: %v, %v", claimed, err)
	}
	e2 := e
	e2.Run, e2.Created = "r2", t0.Add(time.Minute)
	prev, claimed, err := st.ClaimKey(ctx, e2, t0)
	if err != nil || claimed || prev.Run != "r1" || !prev.Created.Equal(t0) || prev.ArgsHash != "h" {
		t.Fatalf("a claim of a fresh key: %+v, %v, %v", prev, claimed, err)
	}
	if _, ok, _ := st.Key(ctx, "eve", "k"); ok {
		t.Fatal("another principal's key was found")
	}
	if err := st.DropKey(ctx, "ed", "k", "r2"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Key(ctx, "ed", "k"); !ok {
		t.Fatal("DropKey of another run dropped the key")
	}
	// Past its keep time (fresh after its creation) the key is claimed anew.
	if _, claimed, err := st.ClaimKey(ctx, e2, t0.Add(time.Second)); err != nil || !claimed {
		t.Fatalf("a claim of a stale key: %v, %v", claimed, err)
	}
	if k, _, _ := st.Key(ctx, "ed", "k"); k.Run != "r2" || k.Done {
		t.Fatalf("the stale key was not replaced: %+v", k)
	}
	if err := st.DropKey(ctx, "ed", "k", "r2"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Key(ctx, "ed", "k"); ok {
		t.Fatal("DropKey kept the key")
	}
}
