package sessions

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolhost/toolhost/client/wire"
)

// dialect is every difference between the SQL of SQLite and of PostgreSQL,
// in one place. The store's statements and migrations are written once, in
// SQLite's words with ? placeholders; the dialect turns them into its own.
type dialect struct {
	// name is "sqlite" or "postgres": the database/sql driver's name too.
	name string
	// placeholders: PostgreSQL numbers them ($1, $2 …); SQLite takes ?.
	numbered bool
	// types maps the migrations' column types to the dialect's: SQLite's
	// INTEGER is 64 bits, PostgreSQL's is 32 (the times are milliseconds
	// since 1970, so they need BIGINT); its REAL is 32 bits too.
	types map[string]string
	// greatestFn is the function of the larger of two values: SQLite's
	// two-argument MAX, PostgreSQL's GREATEST.
	greatestFn string
	// nowMS is the database's clock, in milliseconds since 1970: the
	// clock leases are counted by (lease.go). SQLite's is this host's.
	nowMS string
}

var (
	sqliteDialect = &dialect{name: "sqlite", greatestFn: "MAX",
		nowMS: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"}
	pgDialect = &dialect{name: "postgres", numbered: true, greatestFn: "GREATEST",
		types: map[string]string{"INTEGER": "BIGINT", "REAL": "DOUBLE PRECISION"},
		nowMS: "CAST(FLOOR(EXTRACT(EPOCH FROM now()) * 1000) AS BIGINT)"}
)

// typeRE finds the column types a migration names.
var typeRE = regexp.MustCompile(`\b(INTEGER|REAL)\b`)

// sql turns a statement written for SQLite into the dialect's: its
// placeholders, and for a migration (ddl) its column types. No statement
// of the store holds a ? or a type name inside a quoted string.
func (d *dialect) sql(q string, ddl bool) string {
	if ddl && d.types != nil {
		q = typeRE.ReplaceAllStringFunc(q, func(t string) string { return d.types[t] })
	}
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// greatest is the SQL of the larger of a and b.
func (d *dialect) greatest(a, b string) string { return d.greatestFn + "(" + a + ", " + b + ")" }

// approvalsChannel is the PostgreSQL notification channel on which a
// host that decides an approval tells the hosts sharing the store
// (approvals.go); its payload is the approval's id and decision.
const approvalsChannel = "toolhost_approvals"

// notifyApproval is the statement, in the deciding transaction, that tells
// every host listening that an approval (its one argument: id and
// decision) was decided; "" when the dialect has no hosts to tell: a
// SQLite store is one host's, which hears its own decisions in process.
func (d *dialect) notifyApproval() string {
	if d != pgDialect {
		return ""
	}
	return "SELECT pg_notify('" + approvalsChannel + "', ?)"
}

// listenApprovals is the statement a connection runs to hear
// notifyApproval's notifications (PostgreSQL only).
const listenApprovals = "LISTEN " + approvalsChannel

// decidedApprovals is the statement by which the listening connection,
// once listening, looks up which of the approvals watched (its one
// argument, their ids) were decided while it was not (PostgreSQL only).
const decidedApprovals = "SELECT id, decision FROM approvals WHERE id = ANY($1) AND decision <> ''"

// lockClass is a kind of thing the hosts sharing a PostgreSQL store take
// turns at, one of the same thing at a time: the first key of a
// transaction's advisory lock (lockFor), whose second is a hash of the
// thing's name. Locks of two keys never meet the one-key lock of
// migrations (advisoryLockKey).
type lockClass int32

const (
	// lockBudgets: a principal's budgets, counted and charged.
	lockBudgets lockClass = 1
)

// lockFor is the statement that waits for, then holds until its
// transaction ends, the lock of the thing named by its one argument, of
// class c; "" when the dialect needs none: SQLite's store has one
// connection, so its transactions already take turns.
func (d *dialect) lockFor(c lockClass) string {
	if d != pgDialect {
		return ""
	}
	return "SELECT pg_advisory_xact_lock(" + strconv.Itoa(int(c)) + ", hashtext(?))"
}

// advisoryLockKey is the key of the PostgreSQL advisory lock the hosts take
// while one of them migrates: "toolhost" in ASCII, as a number.
const advisoryLockKey = 0x746f6f6c686f7374

// ErrUnavailable is wrapped by the errors of a store whose database can't
// be reached (a PostgreSQL server that is down, restarting or out of the
// network): errors.Is(err, ErrUnavailable). The store comes back by itself
// once the database does: each call tries again.
//
// It is the protocol's error of code wire.CodeStoreUnavailable, and this
// is the one place a store's failure becomes that code: wherever the host
// turns an error into the protocol's (errors.As to *wire.Error: a run's
// end through errcode.FromRun, a refused call on the websocket, HTTP and
// MCP), a store error finds it in its chain, and the caller reads its
// message, not the database's address or the driver's words (those go to
// the log, in the error's own text).
var ErrUnavailable error = &wire.Error{Code: wire.CodeStoreUnavailable,
	Message: "the store's database can't be reached; try again shortly"}

// unavailableError is a call's error while the database can't be reached:
// it says so, and wraps both ErrUnavailable and the driver's error.
type unavailableError struct {
	msg string
	err error
}

func (e *unavailableError) Error() string { return e.msg }
func (e *unavailableError) Unwrap() []error {
	return []error{ErrUnavailable, e.err}
}

// unreachable says whether err means the database can't be reached, rather
// than that it refused a statement: only a PostgreSQL store has a server
// to lose. An error the server sent (pgconn.PgError), a row that isn't
// there, and the caller's own cancellation are not.
func (d *dialect) unreachable(err error) bool {
	if d != pgDialect || err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// The server is shutting down or starting up, or gone from
		// under the connection (class 57P: operator intervention; 08:
		// connection exception).
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed")
}
