package sessions

import (
	"context"
	"time"
)

// The store's half of taint (see package runs, taint.go): which
// conversations read outside text, so that a restart forgets none. A row
// is a (principal, session) pair, session "" for the calls made in no
// session; it holds why the conversation is tainted (the first outside
// text it read) and when it last read some. A row of a session the store
// keeps lives as long as the session: Delete removes both. A row with no
// session behind it (calls in no session, or in a session that never had
// a sandbox) counts only while it is younger than the caller says.

// Taint records that principal's session read outside text at now. A
// second taint keeps the first why and moves the time on.
func (s *Store) Taint(ctx context.Context, principal, session, why string, now time.Time) error {
	if _, err := s.exec(ctx, `INSERT INTO taint (principal, session, why, at) VALUES (?, ?, ?, ?)
		ON CONFLICT (principal, session) DO UPDATE SET at = `+s.d.greatest("taint.at", "excluded.at"), principal, session, why, now.UnixMilli()); err != nil {
		return s.dbError("recording a conversation's taint", err)
	}
	return nil
}

// Tainted says why principal's session is tainted, "" when it is not. A
// session the store keeps is tainted until it is deleted; a conversation
// with no session behind it only when it read outside text at or after
// since.
func (s *Store) Tainted(ctx context.Context, principal, session string, since time.Time) (string, error) {
	rows, err := s.query(ctx, `SELECT why FROM taint t WHERE principal = ? AND session = ? AND (at >= ?
		OR (session <> '' AND EXISTS (SELECT 1 FROM sessions s WHERE s.principal = t.principal AND s.session = t.session)))`,
		principal, session, since.UnixMilli())
	if err != nil {
		return "", s.dbError("reading a conversation's taint", err)
	}
	defer rows.Close()
	why := ""
	for rows.Next() {
		if err := rows.Scan(&why); err != nil {
			return "", s.dbError("reading a conversation's taint", err)
		}
	}
	if err := rows.Err(); err != nil {
		return "", s.dbError("reading a conversation's taint", err)
	}
	return why, nil
}

// ForgetTaint removes the taint of conversations with no session behind
// them that last read outside text before: noSessionBefore for the calls
// in no session, namedBefore for a named session the store does not keep.
func (s *Store) ForgetTaint(ctx context.Context, noSessionBefore, namedBefore time.Time) error {
	if _, err := s.exec(ctx, `DELETE FROM taint WHERE (session = '' AND at < ?) OR (session <> '' AND at < ?
		AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.principal = taint.principal AND s.session = taint.session))`,
		noSessionBefore.UnixMilli(), namedBefore.UnixMilli()); err != nil {
		return s.dbError("forgetting old taint", err)
	}
	return nil
}
