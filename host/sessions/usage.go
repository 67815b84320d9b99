package sessions

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/toolhost/toolhost/host/runs"
)

// The store is the dispatcher's ledger of budgets and idempotency keys
// (runs.Ledger): what it keeps outlives a restart of the host.
var _ runs.Ledger = (*Store)(nil)

const startUsageSQL = `INSERT INTO usage (run_id, principal, tool, parent, started, sandbox, seconds)
	VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (run_id) DO NOTHING`

// StartUsage records the start of a run, top-level or nested, for its
// principal's budgets (a run recorded twice keeps its first record).
func (s *Store) StartUsage(ctx context.Context, e runs.UsageEntry) error {
	_, err := s.exec(ctx, startUsageSQL, e.Run, e.Principal, e.Tool, e.Parent, e.Started.UnixMilli(), boolInt(e.Sandbox))
	if err != nil {
		return s.dbError("recording the start of a run", err)
	}
	return nil
}

// ChargeUsage records the start of a run if its principal's use since
// lim.Since leaves room under lim, counting and recording in one
// transaction. On PostgreSQL the transaction holds the principal's
// advisory lock (lockBudgets), so hosts sharing the database charge one
// principal one at a time and two can't both spend the last run; SQLite's
// one connection does the same for one host.
func (s *Store) ChargeUsage(ctx context.Context, e runs.UsageEntry, lim runs.Limits) (use runs.Use, charged bool, err error) {
	if !lim.Counted() {
		return runs.Use{}, true, s.StartUsage(ctx, e)
	}
	const what = "charging a run to its budgets"
	tx, err := s.begin(ctx)
	if err != nil {
		return runs.Use{}, false, s.dbError(what, err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	if q := s.d.lockFor(lockBudgets); q != "" {
		if _, err := tx.ExecContext(ctx, s.d.sql(q, false), e.Principal); err != nil {
			return runs.Use{}, false, s.dbError(what, err)
		}
	}
	use, err = s.usage(ctx, tx, e.Principal, lim.Since)
	if err != nil {
		return runs.Use{}, false, err
	}
	if !lim.Allows(use, e.Sandbox) {
		return use, false, nil
	}
	if _, err := tx.ExecContext(ctx, s.d.sql(startUsageSQL, false),
		e.Run, e.Principal, e.Tool, e.Parent, e.Started.UnixMilli(), boolInt(e.Sandbox)); err != nil {
		return runs.Use{}, false, s.dbError(what, err)
	}
	if err := tx.Commit(); err != nil {
		return runs.Use{}, false, s.dbError(what, err)
	}
	return use, true, nil
}

// EndUsage records the seconds a run took.
func (s *Store) EndUsage(ctx context.Context, run string, seconds float64) error {
	if _, err := s.exec(ctx, `UPDATE usage SET seconds = ? WHERE run_id = ?`, seconds, run); err != nil {
		return s.dbError("recording the end of a run", err)
	}
	return nil
}

// DropUsage removes a run's usage: it was refused after all.
func (s *Store) DropUsage(ctx context.Context, run string) error {
	if _, err := s.exec(ctx, `DELETE FROM usage WHERE run_id = ?`, run); err != nil {
		return s.dbError("forgetting a refused run", err)
	}
	return nil
}

// Usage sums what principal's runs used since a time.
func (s *Store) Usage(ctx context.Context, principal string, since time.Time) (runs.Use, error) {
	if err := s.ready(ctx); err != nil {
		return runs.Use{}, s.dbError("reading the usage of runs", err)
	}
	return s.usage(ctx, s.db, principal, since)
}

// rowQuerier is a database or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func (s *Store) usage(ctx context.Context, db rowQuerier, principal string, since time.Time) (runs.Use, error) {
	var n int
	var secs float64
	var oldest, oldestBox sql.NullInt64
	err := db.QueryRowContext(ctx, s.d.sql(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN sandbox <> 0 THEN seconds ELSE 0 END), 0),
		MIN(started), MIN(CASE WHEN sandbox <> 0 THEN started END) FROM usage WHERE principal = ? AND started > ?`, false),
		principal, since.UnixMilli()).Scan(&n, &secs, &oldest, &oldestBox)
	if err != nil {
		return runs.Use{}, s.dbError("reading the usage of runs", err)
	}
	u := runs.Use{Runs: n, SandboxSeconds: secs}
	if oldest.Valid {
		u.OldestRun = time.UnixMilli(oldest.Int64).UTC()
	}
	if oldestBox.Valid {
		u.OldestSandbox = time.UnixMilli(oldestBox.Int64).UTC()
	}
	return u, nil
}

// Key returns an idempotency key's entry, with the claiming host's
// address and whether its lease is live, by the database's clock.
func (s *Store) Key(ctx context.Context, principal, key string) (runs.KeyEntry, bool, error) {
	e := runs.KeyEntry{Principal: principal, Key: key}
	var created, done, interrupted, live int64
	var outcome string
	err := s.queryRow(ctx, `SELECT k.tool, k.args_hash, k.run_id, k.created, k.done, k.outcome, k.host_id, k.host_instance, k.interrupted,
		COALESCE(h.address, ''), CASE WHEN h.lease_until > `+s.d.nowMS+` THEN 1 ELSE 0 END
		FROM idempotency_keys k LEFT JOIN hosts h ON h.host_id = k.host_id AND h.instance = k.host_instance
		WHERE k.principal = ? AND k.key = ?`,
		principal, key).Scan(&e.Tool, &e.ArgsHash, &e.Run, &created, &done, &outcome, &e.Host, &e.Instance, &interrupted, &e.HostAddress, &live)
	if errors.Is(err, sql.ErrNoRows) {
		return runs.KeyEntry{}, false, nil
	}
	if err != nil {
		return runs.KeyEntry{}, false, s.dbError("reading an idempotency key", err)
	}
	e.Created, e.Done, e.Interrupted = time.UnixMilli(created).UTC(), done != 0, interrupted != 0
	e.HostLive = live != 0 && !e.Interrupted
	if outcome != "" {
		e.Outcome = []byte(outcome)
	}
	return e, true, nil
}

// ClaimKey records an idempotency key, the run it is about to start and
// the host claiming it (e.Host, e.Instance), unless the key has an entry
// made at or after fresh, which it returns instead (with its host's
// lease, as Key reads it). One statement inserts the key or replaces an older entry, so of
// the claims of one key at once, on one host or several sharing the
// database, one is claimed: the others wait for it and see its entry.
func (s *Store) ClaimKey(ctx context.Context, e runs.KeyEntry, fresh time.Time) (runs.KeyEntry, bool, error) {
	for {
		res, err := s.exec(ctx, `INSERT INTO idempotency_keys (principal, key, tool, args_hash, run_id, created, done, outcome, host_id, host_instance, interrupted)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT (principal, key) DO UPDATE SET
			tool = excluded.tool, args_hash = excluded.args_hash, run_id = excluded.run_id, created = excluded.created,
			done = excluded.done, outcome = excluded.outcome, host_id = excluded.host_id,
			host_instance = excluded.host_instance, interrupted = 0
			WHERE idempotency_keys.created < ?`,
			e.Principal, e.Key, e.Tool, e.ArgsHash, e.Run, e.Created.UnixMilli(), boolInt(e.Done), string(e.Outcome),
			e.Host, e.Instance, fresh.UnixMilli())
		if err != nil {
			return runs.KeyEntry{}, false, s.dbError("recording an idempotency key", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return runs.KeyEntry{}, false, s.dbError("recording an idempotency key", err)
		}
		if n > 0 {
			return runs.KeyEntry{}, true, nil
		}
		prev, found, err := s.Key(ctx, e.Principal, e.Key)
		if err != nil || found {
			return prev, false, err
		}
		// Its claim was dropped (its call refused) since: claim it again.
	}
}

// DropKey removes an idempotency key's entry if it names run.
func (s *Store) DropKey(ctx context.Context, principal, key, run string) error {
	if _, err := s.exec(ctx, `DELETE FROM idempotency_keys WHERE principal = ? AND key = ? AND run_id = ?`, principal, key, run); err != nil {
		return s.dbError("forgetting a refused call's idempotency key", err)
	}
	return nil
}

// EndKey records the outcome of a key's run.
func (s *Store) EndKey(ctx context.Context, principal, key, run string, outcome []byte) error {
	if _, err := s.exec(ctx, `UPDATE idempotency_keys SET done = 1, outcome = ? WHERE principal = ? AND key = ? AND run_id = ?`,
		string(outcome), principal, key, run); err != nil {
		return s.dbError("recording the outcome of an idempotency key's run", err)
	}
	return nil
}

// Forget removes the usage of runs started before usageBefore and the
// idempotency keys made before keysBefore.
func (s *Store) Forget(ctx context.Context, usageBefore, keysBefore time.Time) error {
	if _, err := s.exec(ctx, `DELETE FROM usage WHERE started < ?`, usageBefore.UnixMilli()); err != nil {
		return s.dbError("forgetting old usage", err)
	}
	if _, err := s.exec(ctx, `DELETE FROM idempotency_keys WHERE created < ?`, keysBefore.UnixMilli()); err != nil {
		return s.dbError("forgetting old idempotency keys", err)
	}
	return nil
}
