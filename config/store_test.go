package config

import (
	"strings"
	"testing"
)

func TestStoreDefaultIsSQLite(t *testing.T) {
	for _, src := range []string{"# nothing\n"} {
		c, err := Parse("/etc/toolhost/toolhost.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if c.Store != (StoreConfig{}) || c.Store.Postgres() {
			t.Errorf("%q: [store] = %+v, want none (SQLite in state_dir)", src, c.Store)
		}
	}
}

func TestStoreEverySetting(t *testing.T) {
	src := `[store]
url = "postgres://toolhost@db.example:5432/toolhost?sslmode=verify-full"
password_file = "secrets/db.password"
`
	c, err := Parse("/srv/th/conf/toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := StoreConfig{URL: "postgres://toolhost@db.example:5432/toolhost?sslmode=verify-full", PasswordFile: "/srv/th/conf/secrets/db.password"}
	if c.Store != want || !c.Store.Postgres() {
		t.Errorf("[store] = %+v, want %+v", c.Store, want)
	}
	c, err = Parse("/srv/th/conf/toolhost.toml", []byte("[store]\nurl = \"postgresql:///toolhost?host=/run/postgresql\"\npassword_env = \"DB_PASSWORD\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.PasswordEnv != "DB_PASSWORD" || c.Store.PasswordFile != "" || c.Store.URL != "postgresql:///toolhost?host=/run/postgresql" {
		t.Errorf("[store] = %+v", c.Store)
	}
}

func TestStoreErrors(t *testing.T) {
	const password = "hunter2-Secret"
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"password refused", "[store]\nurl = \"postgres://th@db/th\"\npassword = \"" + password + "\"\n",
			`toolhost.toml:3: store.password: the database's password must not be written in the config: put it in an environment variable and name that in password_env, or in a file only the host's user can read and name that in password_file`},
		{"password in the url", "[store]\n\nurl = \"postgres://th:" + password + "@db/th\"\n",
			`toolhost.toml:3: store.url: must not hold a password: put it in an environment variable and name that in password_env, or in a file only the host's user can read and name that in password_file`},
		{"password in the url's query", "[store]\nurl = \"postgres://th@db/th?password=" + password + "\"\n",
			`toolhost.toml:2: store.url: must not hold a password (its query has password=): put it in an environment variable and name that in password_env, or in a file only the host's user can read and name that in password_file`},
		{"password where its name goes", "[store]\nurl = \"postgres://th@db/th\"\npassword_env = \"" + password + "\"\n",
			`toolhost.toml:3: store.password_env: must be the name of an environment variable that holds the password (letters, digits and underscores, e.g. "TOOLHOST_DB_PASSWORD"), not the password itself`},
		{"env and file", "[store]\nurl = \"postgres://th@db/th\"\npassword_env = \"P\"\npassword_file = \"/p\"\n",
			`toolhost.toml:4: store.password_file: password_env and password_file are both set: keep one, so it is clear which password is sent`},
		{"not postgres", "[store]\nurl = \"mysql://th@db/th\"\n",
			`toolhost.toml:2: store.url: must be a postgres:// URL, like "postgres://toolhost@db.example:5432/toolhost?sslmode=verify-full"`},
		{"no database", "[store]\nurl = \"postgres://th@db:5432\"\n",
			`toolhost.toml:2: store.url: must name the database after the host, like "postgres://toolhost@db.example:5432/toolhost?sslmode=verify-full"`},
		{"empty url", "[store]\nurl = \"\"\n",
			`toolhost.toml:2: store.url: must not be empty: leave [store] out to keep the store in [server] state_dir`},
		{"password and no url", "[store]\npassword_env = \"P\"\n",
			`toolhost.toml:1: store.url: a password is configured but no url: set url to the PostgreSQL database, like "postgres://toolhost@db.example:5432/toolhost", or leave [store] out to keep the store in state_dir`},
		{"unknown key", "[store]\nurl = \"postgres://th@db/th\"\npassword_fil = \"/p\"\n", `toolhost.toml:3: store: unknown key "password_fil" (did you mean "password_file"?)`},
		{"not a table", "store = \"postgres://th@db/th\"\n", `toolhost.toml:1: store: must be a table, not a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("toolhost.toml", []byte(tt.toml))
			assertErrors(t, err, tt.want)
			if err != nil && strings.Contains(err.Error(), password) {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}
