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

// StartUsage records the start of a run, top-level or nested, for its
// principal's budgets (a run recorded twice keeps its first record).
func (s *Store) StartUsage(ctx context.Context, e runs.UsageEntry) error {
	_, err := s.exec(ctx, `INSERT INTO usage (run_id, principal, tool, parent, started, sandbox, seconds)
		VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (run_id) DO NOTHING`,
		e.Run, e.Principal, e.Tool, e.Parent, e.Started.UnixMilli(), boolInt(e.Sandbox))
	if err != nil {
		return s.dbError("recording the start of a run", err)
	}
	return nil
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
	var n int
	var secs float64
	var oldest, oldestBox sql.NullInt64
	err := s.queryRow(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN sandbox <> 0 THEN seconds ELSE 0 END), 0),
		MIN(started), MIN(CASE WHEN sandbox <> 0 THEN started END) FROM usage WHERE principal = ? AND started > ?`,
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

// Key returns an idempotency key's entry.
func (s *Store) Key(ctx context.Context, principal, key string) (runs.KeyEntry, bool, error) {
	e := runs.KeyEntry{Principal: principal, Key: key}
	var created, done int64
	var outcome string
	err := s.queryRow(ctx, `SELECT tool, args_hash, run_id, created, done, outcome FROM idempotency_keys WHERE principal = ? AND key = ?`,
		principal, key).Scan(&e.Tool, &e.ArgsHash, &e.Run, &created, &done, &outcome)
	if errors.Is(err, sql.ErrNoRows) {
		return runs.KeyEntry{}, false, nil
	}
	if err != nil {
		return runs.KeyEntry{}, false, s.dbError("reading an idempotency key", err)
	}
	e.Created, e.Done = time.UnixMilli(created).UTC(), done != 0
	if outcome != "" {
		e.Outcome = []byte(outcome)
	}
	return e, true, nil
}

// PutKey records an idempotency key and the run it started, replacing an
// older entry of the same key.
func (s *Store) PutKey(ctx context.Context, e runs.KeyEntry) error {
	_, err := s.exec(ctx, `INSERT INTO idempotency_keys (principal, key, tool, args_hash, run_id, created, done, outcome)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (principal, key) DO UPDATE SET
		tool = excluded.tool, args_hash = excluded.args_hash, run_id = excluded.run_id, created = excluded.created,
		done = excluded.done, outcome = excluded.outcome`,
		e.Principal, e.Key, e.Tool, e.ArgsHash, e.Run, e.Created.UnixMilli(), boolInt(e.Done), string(e.Outcome))
	if err != nil {
		return s.dbError("recording an idempotency key", err)
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
