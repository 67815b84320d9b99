// Package pgtest starts a real PostgreSQL server for tests: initdb in a
// temporary folder, listening on a unix socket in that folder only (no
// TCP port, so tests running side by side never meet), run as the postgres
// user (PostgreSQL refuses to run as root, and the tests run as root), and
// stopped and removed when the test ends.
//
// The binaries are the Debian package's (postgresql: /usr/lib/postgresql/
// <version>/bin) or initdb and pg_ctl on $PATH. Without them, Start fails
// the test saying to install postgresql (`make test` installs it): a test
// of the PostgreSQL store is never skipped.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one PostgreSQL server of a test.
type Server struct {
	// Dir is the server's folder, owned by the postgres user: its data in
	// Dir/data, its socket in Dir.
	Dir string
	bin string
	uid int
	gid int
	// dbs numbers the databases NewDatabase makes.
	dbs atomic.Int64
}

// Start starts a server for t, stopped and removed at t's end.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Remove(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Bin finds the folder of PostgreSQL's server programs, or says to install
// them.
func Bin() (string, error) { return findBin("/usr/lib/postgresql/*/bin/initdb", exec.LookPath) }

// findBin looks for initdb beside pg_ctl: the newest of glob's, or on
// $PATH through lookPath.
func findBin(glob string, lookPath func(string) (string, error)) (string, error) {
	found, _ := filepath.Glob(glob)
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	for _, f := range found {
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), "pg_ctl")); err == nil {
			return filepath.Dir(f), nil
		}
	}
	if p, err := lookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "pg_ctl")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	return "", errors.New("PostgreSQL's server programs (initdb, pg_ctl) are not installed (looked in /usr/lib/postgresql/*/bin and $PATH): " +
		"install postgresql (`apt-get install postgresql`; `make test` installs it)")
}

// version is the major version in /usr/lib/postgresql/<version>/bin/initdb.
func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// New makes and starts a server; Remove stops and removes it.
func New(ctx context.Context) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the postgres user the test server runs as is missing (%v): install postgresql (`apt-get install postgresql`; `make test` installs it)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// In /tmp, not t.TempDir(): the postgres user must reach the folder,
	// and a test's temporary folder is root's own.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("the test server's folder can't be made: %w", err)
	}
	s := &Server{Dir: dir, bin: bin, uid: uid, gid: gid}
	if err := os.Chown(dir, uid, gid); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the test server's folder %s can't be given to the postgres user: %w", dir, err)
	}
	if err := s.run(ctx, "initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Restart(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// run runs one of PostgreSQL's programs as the postgres user.
func (s *Server) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(s.bin, prog)}, args...)...)
	cmd.Dir = s.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s as the postgres user failed: %w\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

// Restart starts the server (again, after Stop), on its socket only, and
// waits until it takes connections.
func (s *Server) Restart(ctx context.Context) error {
	opts := fmt.Sprintf("-c listen_addresses='' -k %s -c fsync=off -c full_page_writes=off -c synchronous_commit=off", s.Dir)
	return s.run(ctx, "pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.Dir, "log"), "-w", "-t", "120", "start")
}

// Stop stops the server, cutting its connections (a "fast" shutdown: what
// was committed is kept), leaving its data for Restart.
func (s *Server) Stop(ctx context.Context) error {
	return s.run(ctx, "pg_ctl", "-D", s.data(), "-m", "fast", "-w", "-t", "120", "stop")
}

// Remove stops the server and removes its folder.
func (s *Server) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if _, serr := os.Stat(filepath.Join(s.data(), "postmaster.pid")); serr == nil {
		err = s.Stop(ctx)
	}
	if rerr := os.RemoveAll(s.Dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// URL is the URL of database db on the server, as the postgres user.
func (s *Server) URL(db string) string {
	return "postgres:///" + db + "?host=" + s.Dir + "&user=postgres&sslmode=disable"
}

// NewDatabase makes an empty database and returns its URL: a test of its
// own on a server shared by many.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("test%d", s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("the test server in %s can't be reached: %w", s.Dir, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("the test database %s can't be made: %w", name, err)
	}
	return s.URL(name), nil
}
