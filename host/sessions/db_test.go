package sessions

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// The store's tests run against both its databases: SQLite, and a real
// PostgreSQL server this package's tests start (internal/pgtest), one for
// all of them, each test in a database of its own.

var shared struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// sharedPG is the package's PostgreSQL server, started at the first test
// that needs it and removed by TestMain; it fails t when it can't start.
func sharedPG(t testing.TB) *pgtest.Server {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = pgtest.New(context.Background()) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Remove(); err != nil {
			os.Stderr.WriteString("the test PostgreSQL server: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// testDB is one database a test's stores open: the same one at every open.
type testDB struct {
	// name is "sqlite" or "postgres".
	name string
	// open opens the database with steps as the store's migrations.
	open func(steps []migration) (*Store, error)
}

// mustOpen opens the database with the store's migrations, closed at the
// test's end.
func (db testDB) mustOpen(t *testing.T) *Store {
	t.Helper()
	st, err := db.open(migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// eachDB runs f once on a new SQLite file and once on a new PostgreSQL
// database, as subtests named by the database.
func eachDB(t *testing.T, f func(t *testing.T, db testDB)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), DBFile)
		f(t, testDB{name: "sqlite", open: func(steps []migration) (*Store, error) {
			return openStore(context.Background(), path, steps)
		}})
	})
	t.Run("postgres", func(t *testing.T) {
		url, err := sharedPG(t).NewDatabase(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		f(t, testDB{name: "postgres", open: func(steps []migration) (*Store, error) {
			return openPostgres(context.Background(), url, "", steps)
		}})
	})
}
