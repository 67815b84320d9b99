package sessionstest

import (
	"context"
	"testing"

	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/internal/pgtest"
)

// Postgres starts a real PostgreSQL server for t (internal/pgtest), makes a
// database on it and opens a store there, closed at t's end. The server is
// returned so that a test can stop it and start it again.
func Postgres(t testing.TB) (*sessions.Store, *pgtest.Server) {
	t.Helper()
	ctx := context.Background()
	srv := pgtest.Start(t)
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sessions.OpenPostgres(ctx, url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, srv
}
