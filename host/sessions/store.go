package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	// The pure-Go SQLite driver: the build has CGO_ENABLED=0.
	_ "modernc.org/sqlite"
)

// DBFile is the name of the host's database in [server] state_dir.
const DBFile = "toolhost.db"

// Store keeps the sessions (who owns which, their network, when they were
// made and last used) and the ledger of the runs in them, in one SQLite
// file that outlives the host process. The file is 0600 and held under an
// exclusive lock while the store is open, so a second host on the same
// state folder does not serve the same sessions; its schema is brought up
// to date at open by numbered migrations, each in a transaction, and a file
// a newer toolhost wrote is refused.
//
// The same store runs on PostgreSQL instead (OpenPostgres), for several
// hosts sharing one database: the statements and migrations are the same,
// turned into PostgreSQL's by the store's dialect (dialect.go); the
// migrations run under an advisory lock, by whichever host starts first.
type Store struct {
	db *sql.DB
	d  *dialect
	// path is the SQLite file, or where the PostgreSQL database is (its
	// URL without a password), for messages.
	path string
	lock *os.File
	// clockMu guards offset: the database's clock less the host's, as last
	// read (PostgreSQL only; see Clock).
	clockMu sync.Mutex
	offset  time.Duration
	// migrated says the schema is up to date: at open, or, for a
	// PostgreSQL store opened while its server could not be reached, at the
	// first call after it is back (ready).
	migrated atomic.Bool
	// migrateMu makes the calls waiting for the database take turns at
	// migrating; it guards steps, lastTry and lastErr.
	migrateMu sync.Mutex
	// steps are the migrations to apply once the database is reached.
	steps []migration
	// lastTry and lastErr are when ready last tried to migrate and why it
	// failed: calls within a second of it fail with that error at once,
	// rather than each trying (and waiting) again.
	lastTry time.Time
	lastErr error
	// pg is the PostgreSQL connection's config, for the connection that
	// listens for approvals' decisions (approvals.go); nil for SQLite.
	pg *pgx.ConnConfig
	// apprOnce makes appr, the store's approvals, at their first use.
	apprOnce sync.Once
	appr     *Approvals
}

// Session is one conversation's session.
type Session struct {
	// Principal owns the session: the token's name.
	Principal string `json:"principal"`
	// ID is the caller's name for the session.
	ID string `json:"session"`
	// Backend is the session's id behind the plugin boundary (BackendID).
	Backend string `json:"backend"`
	// Network is "off", "web" or "packages".
	Network  string    `json:"network"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
}

// RunEntry is one run in a session, as the ledger keeps it.
type RunEntry struct {
	Run       string `json:"run"`
	Session   string `json:"session"`
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	// Language is what the tool does in the sandbox: "python", "bash",
	// "files" or "file".
	Language   string    `json:"language"`
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	// ExitCode is the process's exit code; nil when there was none (the
	// run failed before or around it, or the tool runs no process).
	ExitCode *int `json:"exit_code"`
	// Stopped says why the run stopped before its end: "" when it ran to
	// its end; "timeout", "memory", "pids" or "disk" from the sandbox; or
	// the code of the error the run ended with ("cancelled",
	// "plugin_crashed" …).
	Stopped string `json:"stopped"`
	// BytesIn is the size of the call's arguments; BytesOut of what the
	// run printed (stdout and stderr) and its result.
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
}

// RunFilter selects runs of the ledger. Empty fields select all.
type RunFilter struct {
	Principal string
	Session   string
	Tool      string
	Since     time.Time
	// Limit is the most runs returned, newest first; 0 is DefaultRunLimit.
	Limit int
}

// DefaultRunLimit and MaxRunLimit bound the runs one read of the ledger
// returns.
const (
	DefaultRunLimit = 100
	MaxRunLimit     = 1000
)

// migration is one step of the schema: its statements run in one
// transaction, and its number (its place in the list, from 1) is recorded.
type migration []string

// migrations are the schema's steps, in order. Never change one that was
// released: add the next.
var migrations = []migration{
	// 1: sessions and the run ledger.
	{
		`CREATE TABLE sessions (
			principal  TEXT NOT NULL,
			session    TEXT NOT NULL,
			backend_id TEXT NOT NULL UNIQUE,
			network    TEXT NOT NULL,
			created    INTEGER NOT NULL,
			last_used  INTEGER NOT NULL,
			PRIMARY KEY (principal, session)
		)`,
		`CREATE INDEX sessions_last_used ON sessions (last_used)`,
		`CREATE TABLE runs (
			run_id      TEXT PRIMARY KEY,
			session     TEXT NOT NULL,
			principal   TEXT NOT NULL,
			tool        TEXT NOT NULL,
			language    TEXT NOT NULL,
			started     INTEGER NOT NULL,
			duration_ms INTEGER NOT NULL,
			exit_code   INTEGER,
			stopped     TEXT NOT NULL,
			bytes_in    INTEGER NOT NULL,
			bytes_out   INTEGER NOT NULL
		)`,
		`CREATE INDEX runs_principal_started ON runs (principal, started)`,
		`CREATE INDEX runs_session_started ON runs (session, started)`,
	},
	// 2: the usage of every run, for budgets, and the idempotency keys of
	// calls with their recorded outcome (usage.go).
	{
		`CREATE TABLE usage (
			run_id    TEXT PRIMARY KEY,
			principal TEXT NOT NULL,
			tool      TEXT NOT NULL,
			parent    TEXT NOT NULL,
			started   INTEGER NOT NULL,
			sandbox   INTEGER NOT NULL,
			seconds   REAL NOT NULL
		)`,
		`CREATE INDEX usage_principal_started ON usage (principal, started)`,
		`CREATE TABLE idempotency_keys (
			principal TEXT NOT NULL,
			key       TEXT NOT NULL,
			tool      TEXT NOT NULL,
			args_hash TEXT NOT NULL,
			run_id    TEXT NOT NULL,
			created   INTEGER NOT NULL,
			done      INTEGER NOT NULL,
			outcome   TEXT NOT NULL,
			PRIMARY KEY (principal, key)
		)`,
		`CREATE INDEX idempotency_keys_created ON idempotency_keys (created)`,
	},
	// 3: the conversations that read outside text (taint.go).
	{
		`CREATE TABLE taint (
			principal TEXT NOT NULL,
			session   TEXT NOT NULL,
			why       TEXT NOT NULL,
			at        INTEGER NOT NULL,
			PRIMARY KEY (principal, session)
		)`,
		`CREATE INDEX taint_at ON taint (at)`,
	},
	// 4: the approvals of change calls, waiting and decided, shared by
	// the hosts on the store (approvals.go).
	{
		`CREATE TABLE approvals (
			id         TEXT PRIMARY KEY,
			run_id     TEXT NOT NULL,
			tool       TEXT NOT NULL,
			args       TEXT NOT NULL,
			why        TEXT NOT NULL,
			principal  TEXT NOT NULL,
			session    TEXT NOT NULL,
			asked      INTEGER NOT NULL,
			expires    INTEGER NOT NULL,
			decision   TEXT NOT NULL,
			decided_by TEXT NOT NULL,
			decided    INTEGER NOT NULL
		)`,
		`CREATE INDEX approvals_decision_asked ON approvals (decision, asked)`,
		`CREATE INDEX approvals_expires ON approvals (expires)`,
	},
	// 5: the hosts sharing the store and their leases, and which host
	// (and which process of it) claimed each idempotency key (lease.go).
	{
		`CREATE TABLE hosts (
			host_id     TEXT PRIMARY KEY,
			address     TEXT NOT NULL,
			instance    TEXT NOT NULL,
			lease_until INTEGER NOT NULL
		)`,
		`ALTER TABLE idempotency_keys ADD COLUMN host_id TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE idempotency_keys ADD COLUMN host_instance TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE idempotency_keys ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0`,
		// The keys InterruptLapsed looks at, at every renewal of every host.
		`CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (host_id, host_instance) WHERE done = 0 AND interrupted = 0`,
	},
	// 6: which host holds each conversation's sandbox and files
	// (placement.go).
	{
		`CREATE TABLE placements (
			principal TEXT NOT NULL,
			session   TEXT NOT NULL,
			host_id   TEXT NOT NULL,
			PRIMARY KEY (principal, session)
		)`,
	},
}

// OpenStore opens (making it if needed) the store at path, a file in the
// host's state folder, and brings its schema up to date.
func OpenStore(ctx context.Context, path string) (*Store, error) {
	return openStore(ctx, path, migrations)
}

func openStore(ctx context.Context, path string, steps []migration) (*Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("the sessions database can't be at %s: its path may not hold '?' or '#'; name another [server] state_dir", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("the folder of the sessions database %s can't be made: %w", path, err)
	}
	lock, err := openPrivate(path)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("the sessions database %s is in use by another toolhost on the same state folder: stop it, or give this host another [server] state_dir", path)
		}
		return nil, fmt.Errorf("the sessions database %s can't be locked: %w", path, err)
	}
	dsn := path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("the sessions database %s can't be opened: %w", path, err)
	}
	// One connection: the host's writes are few and small, and one
	// connection never meets itself holding a lock.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, d: sqliteDialect, path: path, lock: lock}
	if err := s.migrate(ctx, steps); err != nil {
		s.Close()
		return nil, err
	}
	s.migrated.Store(true)
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		s.Close()
		return nil, fmt.Errorf("the sessions database %s can't use its write-ahead log (journal mode %q): %v", path, mode, err)
	}
	// The write-ahead log and its index are made by SQLite with the
	// database's own mode; make sure of it.
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if err := os.Chmod(f, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("the sessions database's file %s can't be made private: %w", f, err)
		}
	}
	return s, nil
}

// openPrivate opens the database file, making it 0600, never through a
// symbolic link, and refuses one that is not a regular file of the host's
// user (or root); a file others may read is made private.
func openPrivate(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("the sessions database %s is a symbolic link; the host makes that file itself: remove the link", path)
		}
		return nil, fmt.Errorf("the sessions database %s can't be opened: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("the sessions database %s can't be read: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("the sessions database %s is not a regular file: remove what is there", path)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		f.Close()
		return nil, fmt.Errorf("the sessions database %s belongs to user %d, not to the host's user (%d): give it to the host's user (chown)", path, st.Uid, uid)
	}
	if st.Mode&0o077 != 0 {
		if err := unix.Fchmod(fd, 0o600); err != nil {
			f.Close()
			return nil, fmt.Errorf("the sessions database %s can be read by others and can't be made private: %w", path, err)
		}
	}
	return f, nil
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database and lets another host open it.
func (s *Store) Close() error {
	if s.appr != nil {
		s.appr.close()
	}
	err := s.db.Close()
	if s.lock != nil {
		s.lock.Close()
	}
	return err
}

// Ping says whether the store's database can be reached and its schema
// is up to date, cheaply (one round trip, once migrated): nil, or an error
// wrapping ErrUnavailable while it can't be reached. /healthz asks it.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return s.dbError("reaching the database", err)
	}
	if err := s.db.PingContext(ctx); err != nil {
		return s.dbError("reaching the database", err)
	}
	return nil
}

// ready brings the schema up to date if that waits for the database (a
// PostgreSQL store opened while its server could not be reached): the
// first call once the server is back migrates, under the advisory lock as
// at open, and the calls until then fail as the database can't be reached.
// Every call of the store asks it first; once migrated it costs an atomic
// load.
func (s *Store) ready(ctx context.Context) error {
	if s.migrated.Load() {
		return nil
	}
	s.migrateMu.Lock()
	defer s.migrateMu.Unlock()
	if s.migrated.Load() {
		return nil
	}
	if s.lastErr != nil && time.Since(s.lastTry) < time.Second {
		return s.lastErr
	}
	s.lastTry = time.Now()
	s.lastErr = s.migrate(ctx, s.steps)
	if s.lastErr != nil {
		return s.lastErr
	}
	s.migrated.Store(true)
	return nil
}

// Version is the schema's version: the last migration applied.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	if err := s.queryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM migrations").Scan(&v); err != nil {
		return 0, s.dbError("reading the schema's version", err)
	}
	return v, nil
}

// migrate applies the steps not yet applied, each in a transaction of its
// own, and refuses a database whose schema is newer than this host knows.
// It runs on one connection: on PostgreSQL, under an advisory lock, so that
// of several hosts starting at once one migrates and the others wait and
// then find nothing left to do.
func (s *Store) migrate(ctx context.Context, steps []migration) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.openError(err)
	}
	defer conn.Close()
	if s.d == pgDialect {
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", int64(advisoryLockKey)); err != nil {
			return s.openError(err)
		}
		defer func() {
			// A new context: the caller's may be done, and the lock must go.
			uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, uerr := conn.ExecContext(uctx, "SELECT pg_advisory_unlock($1)", int64(advisoryLockKey)); uerr != nil && err == nil {
				err = s.openError(uerr)
			}
		}()
	}
	if _, err := conn.ExecContext(ctx, s.d.sql(`CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied INTEGER NOT NULL)`, true)); err != nil {
		if s.d.unreachable(err) {
			return s.openError(err)
		}
		return fmt.Errorf("the sessions database %s can't be read: %w (if it is not toolhost's, move it away)", s.path, err)
	}
	for {
		done, err := s.migrateOne(ctx, conn, steps)
		if err != nil || done {
			return err
		}
	}
}

// openError is the error of a database that can't be opened or reached at
// open.
func (s *Store) openError(err error) error {
	if s.d.unreachable(err) {
		return &unavailableError{err: err, msg: fmt.Sprintf("the sessions database %s can't be reached: %v; start it, or check [store] url", s.path, err)}
	}
	return fmt.Errorf("the sessions database %s can't be opened: %w", s.path, err)
}

// migrateOne applies the next step; done when there is none left.
func (s *Store) migrateOne(ctx context.Context, conn *sql.Conn, steps []migration) (done bool, err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("the sessions database %s can't be written: %w", s.path, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var v int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM migrations").Scan(&v); err != nil {
		return false, fmt.Errorf("the sessions database %s can't be read: %w", s.path, err)
	}
	if v > len(steps) {
		instead := "move the file away to start with no sessions (their files are then removed at start, and the run ledger is lost)"
		if s.d == pgDialect {
			instead = "name another database in [store] url (this one is shared: upgrade every host that uses it)"
		}
		return false, fmt.Errorf("the sessions database %s was written by a newer toolhost (its schema is version %d; this toolhost knows up to %d): "+
			"run that newer toolhost, or %s", s.path, v, len(steps), instead)
	}
	if v == len(steps) {
		return true, tx.Commit()
	}
	for _, stmt := range steps[v] {
		if _, err := tx.ExecContext(ctx, s.d.sql(stmt, true)); err != nil {
			return false, fmt.Errorf("updating the sessions database %s to version %d failed: %w", s.path, v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.d.sql("INSERT INTO migrations (version, applied) VALUES (?, ?)", false), v+1, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("updating the sessions database %s to version %d failed: %w", s.path, v+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("updating the sessions database %s to version %d failed: %w", s.path, v+1, err)
	}
	return false, nil
}

func (s *Store) dbError(what string, err error) error {
	var ue *unavailableError
	if errors.As(err, &ue) {
		// ready's: the database was not reached to migrate.
		return &unavailableError{err: ue.err, msg: what + " failed: " + ue.msg}
	}
	if s.d.unreachable(err) {
		return &unavailableError{err: err, msg: fmt.Sprintf("%s failed: the sessions database %s can't be reached: %v; "+
			"calls that need it fail until it is back", what, s.path, err)}
	}
	return fmt.Errorf("%s in the sessions database %s failed: %w", what, s.path, err)
}

// exec, query, queryRow and begin run a statement written for SQLite
// (store.go), turned into the store's dialect, or begin a transaction,
// once the schema is up to date (ready).
func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s.db.ExecContext(ctx, s.d.sql(q, false), args...)
}

func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s.db.QueryContext(ctx, s.d.sql(q, false), args...)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) row {
	if err := s.ready(ctx); err != nil {
		return row{err: err}
	}
	return row{row: s.db.QueryRowContext(ctx, s.d.sql(q, false), args...)}
}

func (s *Store) begin(ctx context.Context) (*sql.Tx, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s.db.BeginTx(ctx, nil)
}

// row is queryRow's answer: the row, or why the statement was not run.
type row struct {
	row *sql.Row
	err error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}

// boolInt is b as the 0 or 1 the store's columns keep.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

const sessionColumns = "principal, session, backend_id, network, created, last_used"

func scanSession(row interface{ Scan(...any) error }) (Session, error) {
	var se Session
	var created, used int64
	if err := row.Scan(&se.Principal, &se.ID, &se.Backend, &se.Network, &created, &used); err != nil {
		return Session{}, err
	}
	se.Created, se.LastUsed = time.UnixMilli(created).UTC(), time.UnixMilli(used).UTC()
	return se, nil
}

// Touch makes the session if it is not there (with network), or marks it
// used at now; it returns the session and whether it was made.
func (s *Store) Touch(ctx context.Context, principal, session, backend, network string, now time.Time) (Session, bool, error) {
	res, err := s.exec(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (principal, session) DO NOTHING`, principal, session, backend, network, now.UnixMilli(), now.UnixMilli())
	if err != nil {
		return Session{}, false, s.dbError("making a session", err)
	}
	made, _ := res.RowsAffected()
	if made == 0 {
		if err := s.MarkUsed(ctx, principal, session, now); err != nil {
			return Session{}, false, err
		}
	}
	se, ok, err := s.Get(ctx, principal, session)
	if err == nil && !ok {
		err = s.dbError("making a session", errors.New("the session is gone just after it was written"))
	}
	return se, made > 0, err
}

// MarkUsed marks a session used at now, if it is there (a session deleted
// meanwhile stays deleted).
func (s *Store) MarkUsed(ctx context.Context, principal, session string, now time.Time) error {
	if _, err := s.exec(ctx, `UPDATE sessions SET last_used = `+s.d.greatest("last_used", "?")+` WHERE principal = ? AND session = ?`,
		now.UnixMilli(), principal, session); err != nil {
		return s.dbError("marking a session used", err)
	}
	return nil
}

// Get returns the principal's session of that id.
func (s *Store) Get(ctx context.Context, principal, session string) (Session, bool, error) {
	se, err := scanSession(s.queryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE principal = ? AND session = ?`, principal, session))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, s.dbError("reading a session", err)
	}
	return se, true, nil
}

// ByBackend returns the session of a backend id.
func (s *Store) ByBackend(ctx context.Context, backend string) (Session, bool, error) {
	se, err := scanSession(s.queryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE backend_id = ?`, backend))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, s.dbError("reading a session", err)
	}
	return se, true, nil
}

// List returns the sessions of principal ("" for every principal's),
// most recently used first.
func (s *Store) List(ctx context.Context, principal string) ([]Session, error) {
	q := `SELECT ` + sessionColumns + ` FROM sessions`
	var args []any
	if principal != "" {
		q += ` WHERE principal = ?`
		args = append(args, principal)
	}
	return s.sessions(ctx, q+` ORDER BY last_used DESC, principal, session`, args...)
}

// Count returns how many sessions principal has, and how many there are
// in all.
func (s *Store) Count(ctx context.Context, principal string) (mine, all int, err error) {
	err = s.queryRow(ctx, `SELECT (SELECT COUNT(*) FROM sessions WHERE principal = ?), (SELECT COUNT(*) FROM sessions)`, principal).Scan(&mine, &all)
	if err != nil {
		return 0, 0, s.dbError("counting the sessions", err)
	}
	return mine, all, nil
}

// Unused returns the sessions last used before t, least recently used
// first; with a hostID, only those placed on that host or on none.
func (s *Store) Unused(ctx context.Context, t time.Time, hostID string) ([]Session, error) {
	if hostID == "" {
		return s.sessions(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE last_used < ? ORDER BY last_used`, t.UnixMilli())
	}
	return s.sessions(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE last_used < ? AND NOT EXISTS (
		SELECT 1 FROM placements p WHERE p.principal = sessions.principal AND p.session = sessions.session AND p.host_id <> ?)
		ORDER BY last_used`, t.UnixMilli(), hostID)
}

func (s *Store) sessions(ctx context.Context, q string, args ...any) ([]Session, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, s.dbError("reading the sessions", err)
	}
	defer rows.Close()
	out := []Session{}
	for rows.Next() {
		se, err := scanSession(rows)
		if err != nil {
			return nil, s.dbError("reading the sessions", err)
		}
		out = append(out, se)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbError("reading the sessions", err)
	}
	return out, nil
}

// BackendIDs are the backend ids of every session.
func (s *Store) BackendIDs(ctx context.Context) ([]string, error) {
	rows, err := s.query(ctx, `SELECT backend_id FROM sessions ORDER BY backend_id`)
	if err != nil {
		return nil, s.dbError("reading the sessions", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.dbError("reading the sessions", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbError("reading the sessions", err)
	}
	return out, nil
}

// SetNetwork sets a session's network; false when there is no such
// session.
func (s *Store) SetNetwork(ctx context.Context, principal, session, network string) (bool, error) {
	res, err := s.exec(ctx, `UPDATE sessions SET network = ? WHERE principal = ? AND session = ?`, network, principal, session)
	if err != nil {
		return false, s.dbError("changing a session's network", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Delete removes a session, its taint and its placement; the ledger of its
// runs stays.
func (s *Store) Delete(ctx context.Context, principal, session string) (err error) {
	tx, err := s.begin(ctx)
	if err != nil {
		return s.dbError("deleting a session", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	for _, q := range []string{`DELETE FROM sessions WHERE principal = ? AND session = ?`, `DELETE FROM taint WHERE principal = ? AND session = ?`,
		`DELETE FROM placements WHERE principal = ? AND session = ?`} {
		if _, err := tx.ExecContext(ctx, s.d.sql(q, false), principal, session); err != nil {
			return s.dbError("deleting a session", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.dbError("deleting a session", err)
	}
	return nil
}

// Record adds a run to the ledger (a run recorded twice keeps its first
// record).
func (s *Store) Record(ctx context.Context, e RunEntry) error {
	var exit any
	if e.ExitCode != nil {
		exit = *e.ExitCode
	}
	_, err := s.exec(ctx, `INSERT INTO runs (run_id, session, principal, tool, language, started, duration_ms, exit_code, stopped, bytes_in, bytes_out)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING`,
		e.Run, e.Session, e.Principal, e.Tool, e.Language, e.Started.UnixMilli(), e.DurationMS, exit, e.Stopped, e.BytesIn, e.BytesOut)
	if err != nil {
		return s.dbError("recording a run", err)
	}
	return nil
}

// Runs reads the ledger, newest first.
func (s *Store) Runs(ctx context.Context, f RunFilter) ([]RunEntry, error) {
	q := `SELECT run_id, session, principal, tool, language, started, duration_ms, exit_code, stopped, bytes_in, bytes_out FROM runs WHERE 1 = 1`
	var args []any
	for _, c := range []struct{ col, v string }{{"principal", f.Principal}, {"session", f.Session}, {"tool", f.Tool}} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ?`
			args = append(args, c.v)
		}
	}
	if !f.Since.IsZero() {
		q += ` AND started >= ?`
		args = append(args, f.Since.UnixMilli())
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultRunLimit
	}
	q += ` ORDER BY started DESC, run_id LIMIT ?`
	args = append(args, min(limit, MaxRunLimit))
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, s.dbError("reading the run ledger", err)
	}
	defer rows.Close()
	out := []RunEntry{}
	for rows.Next() {
		var e RunEntry
		var started int64
		var exit sql.NullInt64
		if err := rows.Scan(&e.Run, &e.Session, &e.Principal, &e.Tool, &e.Language, &started, &e.DurationMS, &exit, &e.Stopped, &e.BytesIn, &e.BytesOut); err != nil {
			return nil, s.dbError("reading the run ledger", err)
		}
		e.Started = time.UnixMilli(started).UTC()
		if exit.Valid {
			n := int(exit.Int64)
			e.ExitCode = &n
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbError("reading the run ledger", err)
	}
	return out, nil
}
