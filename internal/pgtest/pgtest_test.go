package pgtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestMissingProgramsSayToInstall: with no initdb anywhere, the error says
// to install postgresql, so a test of the store fails saying what to do.
func TestMissingProgramsSayToInstall(t *testing.T) {
	none := func(string) (string, error) { return "", errors.New("not found") }
	_, err := findBin(filepath.Join(t.TempDir(), "*/bin/initdb"), none)
	if err == nil || !strings.Contains(err.Error(), "install postgresql (`apt-get install postgresql`; `make test` installs it)") {
		t.Fatalf("got %v", err)
	}
}

// TestServerOnItsSocketOnly: the server takes connections on the socket in
// its folder, listens on no TCP port, makes databases of their own, and
// leaves nothing when removed.
func TestServerOnItsSocketOnly(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	url, err := s.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var listen, db string
	if err := conn.QueryRow(ctx, "SELECT current_setting('listen_addresses'), current_database()").Scan(&listen, &db); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if listen != "" || db != "test1" {
		t.Errorf("listen_addresses %q, database %q", listen, db)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server's folder is left: %v", err)
	}
}
