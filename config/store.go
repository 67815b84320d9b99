package config

import (
	"fmt"
	"net/url"
	"strings"
)

// StoreConfig is [store]: where the host keeps its sessions, run ledger,
// budgets, idempotency keys and taint. Without [store] (URL "") they are
// in an SQLite file in [server] state_dir; with a postgres:// URL, in that
// PostgreSQL database, which several hosts can share.
//
// The password is never in the config itself, mirroring [model]'s API key:
// PasswordEnv names an environment variable holding it, or PasswordFile a
// file holding it. Neither is read here; the store reads it when it opens.
type StoreConfig struct {
	// URL is the PostgreSQL database, "postgres://user@host:5432/db?sslmode=verify-full"
	// (or postgresql://); "" is SQLite in state_dir. It holds no password.
	URL string
	// PasswordEnv names the environment variable holding the database
	// user's password; "" for none.
	PasswordEnv string
	// PasswordFile is a file holding the password (surrounding whitespace
	// is trimmed). Absolute; "" for none. At most one of PasswordEnv and
	// PasswordFile is set; with neither, the server must not ask for one
	// (a unix socket with peer authentication, or a client certificate).
	PasswordFile string
}

// Postgres says whether the store is a PostgreSQL database.
func (s StoreConfig) Postgres() bool { return s.URL != "" }

// decodeStore reads [store] into s. dir is the config file's folder.
func (d *decoder) decodeStore(v any, s *StoreConfig, dir string) {
	t := d.table("store", v)
	var raw string
	if t.str("url", &raw) {
		if msg := checkStoreURL(raw); msg != "" {
			d.addf(t.at("url"), "%s", msg)
		} else {
			s.URL = raw
		}
	}
	d.secret(t, dir, secretKeys{key: "password", noun: "password", the: "the database's password", exampleEnv: "TOOLHOST_DB_PASSWORD"},
		&s.PasswordEnv, &s.PasswordFile)
	if s.URL == "" && (s.PasswordEnv != "" || s.PasswordFile != "") && !d.hasErrorAt("store.url") {
		d.addf(t.at("url"), "a password is configured but no url: set url to the PostgreSQL database, "+
			"like \"postgres://toolhost@db.example:5432/toolhost\", or leave [store] out to keep the store in state_dir")
	}
	t.done()
}

// checkStoreURL checks [store] url, returning what is wrong with it or "".
func checkStoreURL(s string) string {
	const like = `like "postgres://toolhost@db.example:5432/toolhost?sslmode=verify-full"`
	if s == "" {
		return "must not be empty: leave [store] out to keep the store in [server] state_dir"
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Opaque != "" {
		// Not quoted: it may hold a password.
		return "must be a postgres:// URL, " + like
	}
	if _, ok := u.User.Password(); ok {
		return "must not hold a password: put it in an environment variable and name that in password_env, " +
			"or in a file only the host's user can read and name that in password_file"
	}
	if q := u.Query(); q.Has("password") {
		return "must not hold a password (its query has password=): put it in an environment variable and name that in password_env, " +
			"or in a file only the host's user can read and name that in password_file"
	}
	if strings.Trim(u.Path, "/") == "" {
		return fmt.Sprintf("must name the database after the host, %s", like)
	}
	return ""
}
