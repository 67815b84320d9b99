package sessions

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/toolhost/toolhost/config"
)

// Open opens the store the config names: the PostgreSQL database of
// [store] url, with its password from password_env or password_file, or
// without [store] the SQLite file in stateDir.
func Open(ctx context.Context, cfg config.StoreConfig, stateDir string) (*Store, error) {
	if !cfg.Postgres() {
		return OpenStore(ctx, filepath.Join(stateDir, DBFile))
	}
	password, err := storePassword(cfg)
	if err != nil {
		return nil, err
	}
	return OpenPostgres(ctx, cfg.URL, password)
}

// storePassword reads [store]'s password from where the config says.
func storePassword(cfg config.StoreConfig) (string, error) {
	return config.ReadSecret(cfg.PasswordEnv, cfg.PasswordFile, "[store] password")
}

// OpenPostgres opens the store in the PostgreSQL database at dsn (a
// postgres:// URL, or key=value words, without a password), logging in
// with password ("" for none), and brings its schema up to date under an
// advisory lock. The database is shared: several hosts may open it at
// once. While the server can't be reached, the store's calls fail with
// errors wrapping ErrUnavailable, and work again once it is back.
//
// A server that can't be reached at open is no error either: the store
// is returned, its calls (and Ping) fail with ErrUnavailable, and the
// first call once the server is back brings the schema up to date (under
// the same lock) before it runs, so a host started while its database is
// down picks it up without a restart. What the server refuses (a wrong
// password, a database a newer toolhost updated) fails the open.
func OpenPostgres(ctx context.Context, dsn, password string) (*Store, error) {
	return openPostgres(ctx, dsn, password, migrations)
}

func openPostgres(ctx context.Context, dsn, password string, steps []migration) (*Store, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		// Not quoted or wrapped: pgx's message may hold the URL.
		return nil, errors.New("the store's [store] url can't be read as a PostgreSQL URL: write it like postgres://toolhost@db.example:5432/toolhost")
	}
	if password != "" {
		cc.Password = password
	}
	where := (&url.URL{Scheme: "postgres", User: url.User(cc.User), Host: fmt.Sprintf("%s:%d", cc.Host, cc.Port), Path: "/" + cc.Database}).String()
	if strings.HasPrefix(cc.Host, "/") {
		where = fmt.Sprintf("%s (PostgreSQL, user %s, socket in %s)", cc.Database, cc.User, cc.Host)
	}
	db := stdlib.OpenDB(*cc)
	// A few connections per host: its writes are small, and the server's
	// connections are shared by every host.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, d: pgDialect, path: where, steps: steps, pg: cc}
	if err := s.migrate(ctx, steps); err != nil {
		if errors.Is(err, ErrUnavailable) {
			s.lastTry, s.lastErr = time.Now(), err
			return s, nil
		}
		db.Close()
		return nil, err
	}
	s.migrated.Store(true)
	return s, nil
}

// Clock is the clock the store's times are counted by: time.Now for
// SQLite, and the database's own clock (its now()) for PostgreSQL, so that
// hosts whose clocks differ share one: a budget's hour, an idempotency
// key's age, taint's age and when a session was last used (so when it
// expires) start and end at the same instant for every host. The
// dispatcher's budgets, keys and taint (host/budgets.go: SetLedger,
// SetTaintStore) and the sessions service (storeNow) count by it; the run
// ledger's start times (Record) stay the host's; approvals shared on
// PostgreSQL (Store.Approvals) are asked and expire by it too. Each reading asks the database; while it can't be
// reached, the host's clock moved by the difference last read stands in
// (the calls that then write fail anyway).
func (s *Store) Clock() func() time.Time {
	if s.d != pgDialect {
		return time.Now
	}
	return func() time.Time {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		t, err := s.Now(ctx)
		if err != nil {
			s.clockMu.Lock()
			defer s.clockMu.Unlock()
			return time.Now().Add(s.offset).UTC()
		}
		return t
	}
}

// Now reads the database's clock: now() on PostgreSQL; the host's clock
// for SQLite, whose database is on this host.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if s.d != pgDialect {
		return time.Now(), nil
	}
	var ms int64
	before := time.Now()
	if err := s.queryRow(ctx, `SELECT CAST(FLOOR(EXTRACT(EPOCH FROM now()) * 1000) AS BIGINT)`).Scan(&ms); err != nil {
		return time.Time{}, s.dbError("reading the database's clock", err)
	}
	t := time.UnixMilli(ms).UTC()
	s.clockMu.Lock()
	s.offset = t.Sub(before)
	s.clockMu.Unlock()
	return t, nil
}
