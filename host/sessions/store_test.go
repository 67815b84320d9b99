package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openTestStore(t *testing.T, path string) *Store {
	t.Helper()
	st, err := OpenStore(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestStoreOpensPrivateWithWALAndMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", DBFile)
	st := openTestStore(t, path)
	if v, err := st.Version(ctx); err != nil || v != len(migrations) {
		t.Fatalf("version = %d, %v; want %d", v, err, len(migrations))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the database's mode is %v, want 0600", fi.Mode().Perm())
	}
	if _, _, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "off", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: others may read it", f, fi.Mode().Perm())
		}
	}
	var mode string
	if err := st.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q, %v; want wal", mode, err)
	}
	var timeout int
	if err := st.db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil || timeout < 1000 {
		t.Errorf("busy timeout %d, %v", timeout, err)
	}
}

// TestStoreReopenKeepsEverything: a new Store on the same database (the
// host restarted) has the sessions and the ledger, and applies no
// migration again.
func TestStoreReopenKeepsEverything(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		st, err := db.open(migrations)
		if err != nil {
			t.Fatal(err)
		}
		now := time.UnixMilli(1_700_000_000_000)
		if _, _, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "web", now); err != nil {
			t.Fatal(err)
		}
		exit := 3
		if err := st.Record(ctx, RunEntry{Run: "r1", Session: "c1", Principal: "ann", Tool: "run_python", Language: "python",
			Started: now, DurationMS: 12, ExitCode: &exit, BytesIn: 10, BytesOut: 20}); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st = db.mustOpen(t)
		se, ok, err := st.Get(ctx, "ann", "c1")
		if err != nil || !ok {
			t.Fatalf("after reopening: %v, %v", ok, err)
		}
		if se.Network != "web" || !se.Created.Equal(now) || se.Backend != BackendID("ann", "c1") {
			t.Errorf("after reopening: %+v", se)
		}
		runs, err := st.Runs(ctx, RunFilter{})
		if err != nil || len(runs) != 1 || runs[0].Run != "r1" || *runs[0].ExitCode != 3 || runs[0].BytesOut != 20 {
			t.Fatalf("after reopening: %+v, %v", runs, err)
		}
		var applied int
		if err := st.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM migrations").Scan(&applied); err != nil || applied != len(migrations) {
			t.Errorf("%d migrations recorded, %v; want %d", applied, err, len(migrations))
		}
	})
}

// TestStoreSessionsTouchListCountAndDelete: the sessions' calls, with the
// later of two uses kept (greatest in both dialects).
func TestStoreSessionsTouchListCountAndDelete(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		st := db.mustOpen(t)
		t0 := time.UnixMilli(1_700_000_000_000).UTC()
		if _, made, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "off", t0); err != nil || !made {
			t.Fatalf("first touch: %v, %v", made, err)
		}
		if se, made, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "web", t0.Add(time.Hour)); err != nil || made || se.Network != "off" || !se.LastUsed.Equal(t0.Add(time.Hour)) {
			t.Fatalf("second touch: %+v, %v, %v", se, made, err)
		}
		if err := st.MarkUsed(ctx, "ann", "c1", t0); err != nil {
			t.Fatal(err)
		}
		if se, _, _ := st.Get(ctx, "ann", "c1"); !se.LastUsed.Equal(t0.Add(time.Hour)) {
			t.Errorf("an earlier use moved last_used back: %+v", se)
		}
		if _, _, err := st.Touch(ctx, "bob", "c2", BackendID("bob", "c2"), "off", t0); err != nil {
			t.Fatal(err)
		}
		if mine, all, err := st.Count(ctx, "ann"); err != nil || mine != 1 || all != 2 {
			t.Errorf("count = %d, %d, %v", mine, all, err)
		}
		if ok, err := st.SetNetwork(ctx, "ann", "c1", "packages"); err != nil || !ok {
			t.Errorf("set network: %v, %v", ok, err)
		}
		if se, ok, err := st.ByBackend(ctx, BackendID("ann", "c1")); err != nil || !ok || se.Network != "packages" {
			t.Errorf("by backend: %+v, %v, %v", se, ok, err)
		}
		old, err := st.Unused(ctx, t0.Add(time.Minute), "")
		if err != nil || len(old) != 1 || old[0].Principal != "bob" {
			t.Errorf("unused = %+v, %v", old, err)
		}
		if l, err := st.List(ctx, ""); err != nil || len(l) != 2 || l[0].Principal != "ann" {
			t.Errorf("list = %+v, %v", l, err)
		}
		if err := st.Delete(ctx, "ann", "c1"); err != nil {
			t.Fatal(err)
		}
		if ids, err := st.BackendIDs(ctx); err != nil || len(ids) != 1 || ids[0] != BackendID("bob", "c2") {
			t.Errorf("backend ids after delete = %v, %v", ids, err)
		}
	})
}

// TestStoreMigratesStepByStep: a database of an older schema gets the
// steps it lacks, each once, and keeps its rows.
func TestStoreMigratesStepByStep(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		st, err := db.open(migrations[:1])
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "off", time.Now()); err != nil {
			t.Fatal(err)
		}
		st.Close()
		next := append(append([]migration{}, migrations...), migration{
			`ALTER TABLE sessions ADD COLUMN note TEXT NOT NULL DEFAULT ''`,
			`UPDATE sessions SET note = 'migrated'`,
		})
		st, err = db.open(next)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if v, _ := st.Version(ctx); v != len(next) {
			t.Errorf("version %d, want %d", v, len(next))
		}
		var note string
		if err := st.db.QueryRowContext(ctx, "SELECT note FROM sessions WHERE session = 'c1'").Scan(&note); err != nil || note != "migrated" {
			t.Errorf("note %q, %v", note, err)
		}
	})
}

// TestStoreFailedMigrationChangesNothing: a step that fails leaves the
// schema as it was (its statements ran in one transaction).
func TestStoreFailedMigrationChangesNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		bad := append(append([]migration{}, migrations...), migration{
			`CREATE TABLE half (x INTEGER)`,
			`THIS IS NOT SQL`,
		})
		if _, err := db.open(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("to version %d failed", len(migrations)+1)) {
			t.Fatalf("got %v", err)
		}
		st := db.mustOpen(t)
		if _, err := st.db.ExecContext(ctx, "SELECT COUNT(*) FROM half"); err == nil {
			t.Errorf("the failed step's table is there")
		}
		if v, err := st.Version(ctx); err != nil || v != len(migrations) {
			t.Errorf("version %d, %v; want %d", v, err, len(migrations))
		}
	})
}

// TestStoreRefusesNewerSchema: a database a newer toolhost wrote is
// refused, saying what to do, and is left as it is.
func TestStoreRefusesNewerSchema(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		st := db.mustOpen(t)
		if _, err := st.db.ExecContext(ctx, "INSERT INTO migrations (version, applied) VALUES (7, 0)"); err != nil {
			t.Fatal(err)
		}
		st.Close()
		_, err := db.open(migrations)
		want := "the sessions database " + st.Path() + " was written by a newer toolhost (its schema is version 7; this toolhost knows up to " + fmt.Sprint(len(migrations)) + "): run that newer toolhost, or "
		if db.name == "sqlite" {
			want += "move the file away"
		} else {
			want += "name another database in [store] url"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v\nwant %s", err, want)
		}
	})
}

func TestStoreRefusesALinkAndASecondHost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere.db")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, DBFile)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(ctx, link); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("a link: %v", err)
	}

	path := filepath.Join(t.TempDir(), DBFile)
	openTestStore(t, path)
	if _, err := OpenStore(ctx, path); err == nil || !strings.Contains(err.Error(), "in use by another toolhost on the same state folder") {
		t.Errorf("a second open: %v", err)
	}
}

func TestStoreMakesAReadableFilePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), DBFile)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	openTestStore(t, path)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestStoreRunsFilters(t *testing.T) { eachDB(t, testStoreRunsFilters) }

func testStoreRunsFilters(t *testing.T, db testDB) {
	ctx := context.Background()
	st := db.mustOpen(t)
	base := time.UnixMilli(1_700_000_000_000).UTC()
	add := func(run, principal, session, tool string, at int) {
		t.Helper()
		if err := st.Record(ctx, RunEntry{Run: run, Session: session, Principal: principal, Tool: tool, Language: "python",
			Started: base.Add(time.Duration(at) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	add("r1", "ann", "c1", "run_python", 1)
	add("r2", "ann", "c1", "run_bash", 2)
	add("r3", "ann", "c2", "run_python", 3)
	add("r4", "bob", "c1", "run_python", 4)
	add("r1", "ann", "c1", "run_python", 9) // recorded twice: the first stays
	ids := func(f RunFilter) string {
		t.Helper()
		rs, err := st.Runs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Run)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		f    RunFilter
		want string
	}{
		{RunFilter{}, "r4,r3,r2,r1"},
		{RunFilter{Principal: "ann"}, "r3,r2,r1"},
		{RunFilter{Principal: "ann", Session: "c1"}, "r2,r1"},
		{RunFilter{Session: "c1"}, "r4,r2,r1"},
		{RunFilter{Principal: "ann", Tool: "run_python"}, "r3,r1"},
		{RunFilter{Since: base.Add(2 * time.Minute)}, "r4,r3,r2"},
		{RunFilter{Principal: "ann", Limit: 2}, "r3,r2"},
		{RunFilter{Principal: "carl"}, ""},
	} {
		if got := ids(tc.f); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.f, got, tc.want)
		}
	}
}
