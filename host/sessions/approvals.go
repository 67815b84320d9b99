package sessions

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolhost/toolhost/host/runs"
)

// The store's approvals (runs.ApprovalStore): the change calls waiting for
// a person's decision, kept where every host sharing the store sees them,
// so that an approval asked on one host is listed and decided on any.
//
// An approval is decided once: Decide is one conditional UPDATE (…WHERE
// decision = ''), which of any number of decisions at once records one.
// The host whose run waits hears the decision at once: on PostgreSQL, the
// deciding transaction sends a notification (pg_notify) that each host
// hears on a connection of its own kept for LISTEN, made again when it
// drops; on SQLite, the store of one host, the decision reaches its
// watchers in process. A slow poll of the approvals watched (approvalPoll)
// catches a notification missed all the same.

var _ runs.ApprovalStore = (*Approvals)(nil)

// DefaultApprovalPoll is how often a store looks up the decisions of the
// approvals its host waits for, in case a notification was missed.
const DefaultApprovalPoll = 15 * time.Second

// Approvals are the store's approvals: s.Approvals().
type Approvals struct {
	s *Store
	// poll is how often the watched approvals are looked up
	// (DefaultApprovalPoll; tests set it before the first Watch).
	poll time.Duration

	mu       sync.Mutex
	watchers map[string][]chan string
	// started says the watching goroutines run; stop ends them, and done
	// is closed when they have.
	started bool
	closed  bool
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// Approvals returns the store's approvals, which hosts sharing the store
// list and decide together.
func (s *Store) Approvals() *Approvals {
	s.apprOnce.Do(func() {
		s.appr = &Approvals{s: s, poll: DefaultApprovalPoll, watchers: map[string][]chan string{}}
	})
	return s.appr
}

const approvalCols = `id, run_id, tool, args, why, principal, session, asked, expires, decision`

func scanApproval(row interface{ Scan(...any) error }) (runs.Approval, error) {
	var a runs.Approval
	var args string
	var asked, expires int64
	if err := row.Scan(&a.ID, &a.Run, &a.Tool, &args, &a.Why, &a.Principal, &a.Session, &asked, &expires, &a.Decision); err != nil {
		return runs.Approval{}, err
	}
	if args != "" {
		a.Args = []byte(args)
	}
	a.Asked, a.Expires = time.UnixMilli(asked).UTC(), time.UnixMilli(expires).UTC()
	return a, nil
}

// Put records a waiting approval.
func (ap *Approvals) Put(ctx context.Context, a runs.Approval) error {
	s := ap.s
	if _, err := s.exec(ctx, `INSERT INTO approvals (`+approvalCols+`, decided_by, decided) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', 0)`,
		a.ID, a.Run, a.Tool, string(a.Args), a.Why, a.Principal, a.Session, a.Asked.UnixMilli(), a.Expires.UnixMilli()); err != nil {
		return s.dbError("recording an approval", err)
	}
	return nil
}

// Get returns an approval, waiting or decided.
func (ap *Approvals) Get(ctx context.Context, id string) (runs.Approval, bool, error) {
	if err := ap.s.ready(ctx); err != nil {
		return runs.Approval{}, false, ap.s.dbError("reading an approval", err)
	}
	return ap.get(ctx, ap.s.db, id)
}

func (ap *Approvals) get(ctx context.Context, db rowQuerier, id string) (runs.Approval, bool, error) {
	s := ap.s
	a, err := scanApproval(db.QueryRowContext(ctx, s.d.sql(`SELECT `+approvalCols+` FROM approvals WHERE id = ?`, false), id))
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Approval{}, false, nil
	}
	if err != nil {
		return runs.Approval{}, false, s.dbError("reading an approval", err)
	}
	return a, true, nil
}

// Pending lists the approvals waiting at now, of every host, oldest first.
func (ap *Approvals) Pending(ctx context.Context, now time.Time) ([]runs.Approval, error) {
	s := ap.s
	rows, err := s.query(ctx, `SELECT `+approvalCols+` FROM approvals WHERE decision = '' AND expires > ? ORDER BY asked, id`, now.UnixMilli())
	if err != nil {
		return nil, s.dbError("listing the approvals waiting", err)
	}
	defer rows.Close()
	out := []runs.Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, s.dbError("listing the approvals waiting", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbError("listing the approvals waiting", err)
	}
	return out, nil
}

// Decide records decision for an approval still waiting, in one
// conditional UPDATE: of decisions at once, on any hosts, one is
// recorded; one at or after the approval expires records "expired". On
// PostgreSQL the same transaction notifies the hosts listening.
func (ap *Approvals) Decide(ctx context.Context, id, decision, by string, now time.Time) (runs.Approval, bool, error) {
	s := ap.s
	const what = "deciding an approval"
	tx, err := s.begin(ctx)
	if err != nil {
		return runs.Approval{}, false, s.dbError(what, err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	res, err := tx.ExecContext(ctx, s.d.sql(`UPDATE approvals SET decision = CASE WHEN expires > ? THEN ? ELSE 'expired' END,
		decided_by = ?, decided = ? WHERE id = ? AND decision = ''`, false), now.UnixMilli(), decision, by, now.UnixMilli(), id)
	if err != nil {
		return runs.Approval{}, false, s.dbError(what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return runs.Approval{}, false, s.dbError(what, err)
	}
	a, found, err := ap.get(ctx, tx, id)
	if err != nil || !found {
		return runs.Approval{}, false, err
	}
	if n > 0 {
		if q := s.d.notifyApproval(); q != "" {
			if _, err := tx.ExecContext(ctx, s.d.sql(q, false), a.ID+" "+a.Decision); err != nil {
				return runs.Approval{}, false, s.dbError(what, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return runs.Approval{}, false, s.dbError(what, err)
	}
	if n > 0 {
		ap.deliver(a.ID, a.Decision)
	}
	return a, n > 0 && a.Decision == decision, nil
}

// Forget removes the approvals that expired before before, decided or
// not (a waiting one whose host went away).
func (ap *Approvals) Forget(ctx context.Context, before time.Time) error {
	if _, err := ap.s.exec(ctx, `DELETE FROM approvals WHERE expires < ?`, before.UnixMilli()); err != nil {
		return ap.s.dbError("forgetting old approvals", err)
	}
	return nil
}

// Watch returns a channel that gets the approval's decision, made on any
// host, and stop.
func (ap *Approvals) Watch(id string) (<-chan string, func()) {
	ch := make(chan string, 1)
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.watchers[id] = append(ap.watchers[id], ch)
	ap.startLocked()
	return ch, func() {
		ap.mu.Lock()
		defer ap.mu.Unlock()
		list := ap.watchers[id]
		for i, c := range list {
			if c == ch {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(ap.watchers, id)
		} else {
			ap.watchers[id] = list
		}
	}
}

// deliver gives the decision of an approval to its watchers, once.
func (ap *Approvals) deliver(id, decision string) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for _, ch := range ap.watchers[id] {
		ch <- decision
	}
	delete(ap.watchers, id)
}

// startLocked starts, at the first watch, the poll and (on PostgreSQL) the
// listener. Called with mu held.
func (ap *Approvals) startLocked() {
	if ap.started || ap.closed {
		return
	}
	ap.started = true
	ctx, cancel := context.WithCancel(context.Background())
	ap.stop = cancel
	ap.done.Go(func() { ap.pollLoop(ctx) })
	if ap.s.pg != nil {
		ap.done.Go(func() { ap.listen(ctx) })
	}
}

// close ends the watching goroutines (Store.Close).
func (ap *Approvals) close() {
	ap.mu.Lock()
	ap.closed = true
	stop := ap.stop
	ap.mu.Unlock()
	if stop != nil {
		stop()
	}
	ap.done.Wait()
}

// pollLoop looks up the watched approvals every poll: the safety net for
// a notification missed.
func (ap *Approvals) pollLoop(ctx context.Context) {
	t := time.NewTicker(ap.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ap.pollOnce(ctx)
		}
	}
}

// pollOnce looks up the decisions of the watched approvals and delivers
// those made.
func (ap *Approvals) pollOnce(ctx context.Context) {
	ap.mu.Lock()
	ids := make([]string, 0, len(ap.watchers))
	for id := range ap.watchers {
		ids = append(ids, id)
	}
	ap.mu.Unlock()
	for _, id := range ids {
		a, ok, err := ap.Get(ctx, id)
		if err != nil {
			return // the database is away: the next poll tries again
		}
		if ok && a.Decision != "" {
			ap.deliver(id, a.Decision)
		}
	}
}

// listenName is the application_name of the connection that listens, as
// pg_stat_activity shows it.
const listenName = "toolhost approvals"

// listen holds a connection of its own that LISTENs for decisions and
// delivers them, making it again (after a pause that grows to
// maxListenPause) when it drops; on each new connection it looks up the
// watched approvals, whose notifications may have come while there was
// none (catchUp).
func (ap *Approvals) listen(ctx context.Context) {
	const minPause, maxListenPause = 250 * time.Millisecond, 15 * time.Second
	pause := minPause
	for ctx.Err() == nil {
		if err := ap.s.ready(ctx); err != nil {
			// Not migrated yet (the database was down at open): wait.
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, maxListenPause)
			continue
		}
		cc := ap.s.pg.Copy()
		if cc.RuntimeParams == nil {
			cc.RuntimeParams = map[string]string{}
		}
		cc.RuntimeParams["application_name"] = listenName
		if conn, err := pgx.ConnectConfig(ctx, cc); err == nil {
			if _, err := conn.Exec(ctx, listenApprovals); err == nil {
				if err := ap.catchUp(ctx, conn); err == nil {
					pause = minPause
					_ = ap.hear(ctx, conn) // it dropped, or the store closes
				}
			}
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, maxListenPause)
	}
}

// catchUp delivers the decisions of the watched approvals made while
// there was no connection listening, looked up on conn, which listens
// already: a decision made since comes as a notification.
func (ap *Approvals) catchUp(ctx context.Context, conn *pgx.Conn) error {
	ap.mu.Lock()
	ids := make([]string, 0, len(ap.watchers))
	for id := range ap.watchers {
		ids = append(ids, id)
	}
	ap.mu.Unlock()
	rows, err := conn.Query(ctx, decidedApprovals, ids)
	if err != nil {
		return err
	}
	type decided struct{ id, decision string }
	var found []decided
	for rows.Next() {
		var d decided
		if err := rows.Scan(&d.id, &d.decision); err != nil {
			rows.Close()
			return err
		}
		found = append(found, d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, d := range found {
		ap.deliver(d.id, d.decision)
	}
	return nil
}

// hear delivers the notifications conn gets, until it fails.
func (ap *Approvals) hear(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		id, decision, ok := strings.Cut(n.Payload, " ")
		if ok && n.Channel == approvalsChannel {
			ap.deliver(id, decision)
		}
	}
}
