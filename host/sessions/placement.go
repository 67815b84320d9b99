package sessions

import (
	"context"
	"database/sql"
	"errors"
)

// A conversation (a principal's session) is placed on one host of those
// sharing the store: the host where it was first used holds its sandbox
// and its files (in its state_dir), and the others forward its runs,
// files and attaches there (host/cluster). A placement lasts until the
// session is deleted: a session never moves, so while its host is down
// it is unavailable, and its files come back with that host.

// Place places the principal's session on the host hostID unless a host
// holds it already, in one statement, and returns the id of the host that
// holds it: hostID, or the other host's.
func (s *Store) Place(ctx context.Context, principal, session, hostID string) (holder string, err error) {
	if err := s.queryRow(ctx, `INSERT INTO placements (principal, session, host_id) VALUES (?, ?, ?)
		ON CONFLICT (principal, session) DO UPDATE SET host_id = placements.host_id
		RETURNING host_id`, principal, session, hostID).Scan(&holder); err != nil {
		return "", s.dbError("placing a conversation on a host", err)
	}
	return holder, nil
}

// Holder returns the id of the host that holds the principal's session;
// ok is false when none does yet.
func (s *Store) Holder(ctx context.Context, principal, session string) (holder string, ok bool, err error) {
	err = s.queryRow(ctx, `SELECT host_id FROM placements WHERE principal = ? AND session = ?`, principal, session).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.dbError("finding a conversation's host", err)
	}
	return holder, true, nil
}
