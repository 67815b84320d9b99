package sessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// TestPostgresHostsStartingAtOnceMigrateOnce: stores opened at the same
// time on one empty database (hosts starting together) all open, and the
// schema's steps are applied once, under the advisory lock.
func TestPostgresHostsStartingAtOnceMigrateOnce(t *testing.T) {
	ctx := context.Background()
	url, err := sharedPG(t).NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const hosts = 4
	var wg sync.WaitGroup
	stores := make([]*Store, hosts)
	errs := make([]error, hosts)
	for i := range hosts {
		wg.Go(func() { stores[i], errs[i] = OpenPostgres(ctx, url, "") })
	}
	wg.Wait()
	for i := range hosts {
		if errs[i] != nil {
			t.Fatalf("host %d: %v", i, errs[i])
		}
		defer stores[i].Close()
	}
	var applied int
	if err := stores[0].db.QueryRowContext(ctx, "SELECT COUNT(*) FROM migrations").Scan(&applied); err != nil || applied != len(migrations) {
		t.Errorf("%d migrations recorded, %v; want %d, each once", applied, err, len(migrations))
	}
	// What one host writes, another reads.
	if _, _, err := stores[1].Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "off", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := stores[2].Get(ctx, "ann", "c1"); err != nil || !ok {
		t.Errorf("another host's session: %v, %v", ok, err)
	}
}

// TestPostgresUnavailableThenBack: while the server is stopped a call fails
// saying the database can't be reached (ErrUnavailable, wrapping the
// driver's error), and once it is started again the next call works.
func TestPostgresUnavailableThenBack(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenPostgres(ctx, url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	use := runs.UsageEntry{Run: "r1", Principal: "ed", Tool: "hit", Started: time.Now()}
	if err := st.StartUsage(ctx, use); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = st.Usage(ctx, "ed", time.Now().Add(-time.Hour))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "reading the usage of runs failed: the sessions database "+st.Path()+" can't be reached") {
		t.Fatalf("with the server stopped: %v", err)
	}
	t.Logf("with the server stopped: %v", err)
	var ue *unavailableError
	if !errors.As(err, &ue) || ue.err == nil || errors.Is(ue.err, ErrUnavailable) {
		t.Errorf("the driver's error is not wrapped: %#v", err)
	}
	if _, _, err := st.Get(ctx, "ann", "c1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a second call with the server stopped: %v", err)
	}
	// The protocol's code, in the error's chain: what the host answers.
	if errcode.Code(err) != wire.CodeStoreUnavailable {
		t.Errorf("the code of a call with the server stopped: %q", errcode.Code(err))
	}
	if err := st.Ping(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Ping with the server stopped: %v", err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Errorf("Ping after the server is back: %v", err)
	}
	u, err := st.Usage(ctx, "ed", time.Now().Add(-time.Hour))
	if err != nil || u.Runs != 1 {
		t.Fatalf("after the server is back: %+v, %v", u, err)
	}
}

// TestPostgresOpenWhileDownPicksItUpLater: a store whose server can't be
// reached at open opens all the same; its calls and Ping say the database
// can't be reached (ErrUnavailable, the protocol's store_unavailable), and
// once the server is started the next call brings the schema up to date
// and works: a host started while its database is down needs no restart.
func TestPostgresOpenWhileDownPicksItUpLater(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := OpenPostgres(ctx, url, "")
	if err != nil {
		t.Fatalf("opening while the server is down: %v", err)
	}
	defer st.Close()
	err = st.Ping(ctx)
	if !errors.Is(err, ErrUnavailable) || errcode.Code(err) != wire.CodeStoreUnavailable || !strings.Contains(err.Error(), "can't be reached") {
		t.Fatalf("Ping with the server down: %v (code %q)", err, errcode.Code(err))
	}
	t.Logf("Ping with the server down: %v", err)
	if _, _, err := st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "off", time.Now()); !errors.Is(err, ErrUnavailable) ||
		!strings.HasPrefix(err.Error(), "making a session failed: the sessions database "+st.Path()+" can't be reached") {
		t.Fatalf("a call with the server down: %v", err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The first call once it is back migrates (calls within a second of
	// a failed try fail at once: wait that out, as a caller would).
	var se Session
	for start := time.Now(); ; {
		se, _, err = st.Touch(ctx, "ann", "c1", BackendID("ann", "c1"), "off", time.Now())
		if err == nil || !errors.Is(err, ErrUnavailable) || time.Since(start) > 30*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || se.ID != "c1" {
		t.Fatalf("a call once the server is back: %+v, %v", se, err)
	}
	if v, err := st.Version(ctx); err != nil || v != len(migrations) {
		t.Errorf("the schema once the server is back: version %d, %v; want %d", v, err, len(migrations))
	}
	if err := st.Ping(ctx); err != nil {
		t.Errorf("Ping once the server is back: %v", err)
	}
}

// TestPostgresOpenRefusedSaysSo: what the server refuses at open (here a
// database that is not there) still fails the open, saying so.
func TestPostgresOpenRefusedSaysSo(t *testing.T) {
	_, err := OpenPostgres(context.Background(), sharedPG(t).URL("no_such_database"), "")
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "can't be opened") {
		t.Fatalf("got %v", err)
	}
}

// TestPostgresClockIsTheDatabases: on PostgreSQL the store's clock reads
// the server's now(); on SQLite it is the host's.
func TestPostgresClockIsTheDatabases(t *testing.T) {
	ctx := context.Background()
	url, err := sharedPG(t).NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenPostgres(ctx, url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A transaction's now() is when it began: one begun before the
	// clock is read has a now() no later than the clock's reading.
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var before time.Time
	if err := tx.QueryRowContext(ctx, "SELECT now()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	got := st.Clock()()
	if got.Before(before.Truncate(time.Millisecond)) {
		t.Errorf("the clock read %v, before the database's now() %v that preceded it", got, before)
	}
	if _, err := st.db.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

// TestOpenByConfig: without [store] the store is the SQLite file in the
// state folder; with a url, that PostgreSQL database, its password read
// from password_env or password_file; a password file every user may read,
// or an environment variable that is not set, is refused saying so.
func TestOpenByConfig(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	st, err := Open(ctx, config.StoreConfig{}, state)
	if err != nil {
		t.Fatal(err)
	}
	if st.Path() != filepath.Join(state, DBFile) || st.d != sqliteDialect {
		t.Errorf("without [store]: %s (%s)", st.Path(), st.d.name)
	}
	st.Close()

	url, err := sharedPG(t).NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_DB_PASSWORD", "not-asked-for")
	st, err = Open(ctx, config.StoreConfig{URL: url, PasswordEnv: "TEST_DB_PASSWORD"}, state)
	if err != nil {
		t.Fatal(err)
	}
	if st.d != pgDialect {
		t.Errorf("with a url: %s", st.d.name)
	}
	st.Close()

	file := filepath.Join(t.TempDir(), "db.password")
	if err := os.WriteFile(file, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, config.StoreConfig{URL: url, PasswordFile: file}, state); err == nil || !strings.Contains(err.Error(), "can be read by every user of this machine: run `chmod 600 "+file+"`") {
		t.Errorf("a password file others may read: %v", err)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if pw, err := storePassword(config.StoreConfig{URL: url, PasswordFile: file}); err != nil || pw != "secret" {
		t.Errorf("the password file read: %q, %v", pw, err)
	}
	if _, err := Open(ctx, config.StoreConfig{URL: url, PasswordEnv: "TEST_DB_PASSWORD_UNSET"}, state); err == nil || !strings.Contains(err.Error(), "names the environment variable TEST_DB_PASSWORD_UNSET, which is not set") {
		t.Errorf("an unset password_env: %v", err)
	}
}
