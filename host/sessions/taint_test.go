package sessions

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestTaintSurvivesAReopenForTheSessionsLife: a session's taint is read
// back after the store is closed and opened again (a host's restart),
// keeps its first why, and goes when the session is deleted; another
// principal's session of the same name is not tainted.
func TestTaintSurvivesAReopenForTheSessionsLife(t *testing.T) {
	eachDB(t, testTaintSurvivesAReopenForTheSessionsLife)
}

func testTaintSurvivesAReopenForTheSessionsLife(t *testing.T, db testDB) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := db.open(migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "web", now); err != nil {
		t.Fatal(err)
	}
	if err := st.Taint(ctx, "ann", "c1", "get_page's error", now); err != nil {
		t.Fatal(err)
	}
	if err := st.Taint(ctx, "ann", "c1", "a later read", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = db.mustOpen(t)
	// Long after: a session the store keeps stays tainted.
	later := now.Add(365 * 24 * time.Hour)
	if why, err := st.Tainted(ctx, "ann", "c1", later); err != nil || why != "get_page's error" {
		t.Fatalf("after a reopen: %q, %v", why, err)
	}
	if why, _ := st.Tainted(ctx, "bob", "c1", now); why != "" {
		t.Errorf("bob's c1: %q", why)
	}
	if err := st.ForgetTaint(ctx, later, later); err != nil {
		t.Fatal(err)
	}
	if why, _ := st.Tainted(ctx, "ann", "c1", later); why == "" {
		t.Fatal("ForgetTaint forgot a session's taint while the session lives")
	}
	if err := st.Delete(ctx, "ann", "c1"); err != nil {
		t.Fatal(err)
	}
	if why, _ := st.Tainted(ctx, "ann", "c1", now); why != "" {
		t.Fatalf("a deleted session is still tainted: %q", why)
	}
	// The same name made again is a new conversation.
	if _, _, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "off", now); err != nil {
		t.Fatal(err)
	}
	if why, _ := st.Tainted(ctx, "ann", "c1", now); why != "" {
		t.Fatalf("the session made again is tainted: %q", why)
	}
}

// TestTaintWithNoSessionLastsFromItsLastRead: a conversation the store
// keeps no session for (calls in no session, or a name that never had a
// sandbox) is tainted while its last outside read is at or after since,
// and ForgetTaint removes it after.
func TestTaintWithNoSessionLastsFromItsLastRead(t *testing.T) {
	eachDB(t, testTaintWithNoSessionLastsFromItsLastRead)
}

func testTaintWithNoSessionLastsFromItsLastRead(t *testing.T, db testDB) {
	ctx := context.Background()
	st := db.mustOpen(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range []string{"", "chat"} {
		if err := st.Taint(ctx, "ann", s, "fetch's answer", now); err != nil {
			t.Fatal(err)
		}
		if why, _ := st.Tainted(ctx, "ann", s, now); why != "fetch's answer" {
			t.Errorf("%q at its read: %q", s, why)
		}
		if why, _ := st.Tainted(ctx, "ann", s, now.Add(time.Millisecond)); why != "" {
			t.Errorf("%q after its keep: %q", s, why)
		}
	}
	if err := st.ForgetTaint(ctx, now.Add(time.Second), now); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM taint`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows left, %v; want the named one", n, err)
	}
}

// BenchmarkTaintAndRead is the store's cost per run of an outside kind
// (one Taint) and per change call (one Tainted).
func BenchmarkTaintAndRead(b *testing.B) {
	ctx := context.Background()
	st, err := OpenStore(ctx, filepath.Join(b.TempDir(), DBFile))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	b.Run("taint", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := st.Taint(ctx, "ann", "c1", "fetch's answer", now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tainted", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := st.Tainted(ctx, "ann", "c1", now.Add(-time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
