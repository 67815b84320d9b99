package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const hexA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const hexB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want string // the whole error, one problem a line
	}{
		{"syntax", "[server]\nlisten = \n", `toolhost.toml:2: this is not valid TOML: unexpected character U+000A at start of value`},
		{"key twice", "[http]\ntimeout_seconds = 1\ntimeout_seconds = 2\n", `toolhost.toml:3: this is not valid TOML: key timeout_seconds is already defined`},
		{"unknown top key", "\nlisten = \"x\"\n", `toolhost.toml:2: unknown key "listen"; the keys allowed here are "server", "plugins", "tools_dir", "runs", "tokens", "log", "model", "sessions", "store", "cluster", "approvals", "kinds", "tool"`},
		{"unknown top key suggested", "\nlogs = \"x\"\n", `toolhost.toml:2: unknown key "logs" (did you mean "log"?)`},
		{"kind table bad name", "[Sever]\nx = 1\n", `toolhost.toml:1: Sever: [Sever] is neither one of the host's tables nor a kind's: a kind name must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores (did you mean [server]?)`},
		{"kinds twice", "[weather]\nx = 1\n[kinds.weather]\nx = 2\n", `toolhost.toml:3: kinds.weather: the weather kind's settings are given twice, in [weather] and in [kinds.weather]: keep one`},
		{"misspelt key", "[server]\nlisen = \"a:1\"\n", `toolhost.toml:2: server: unknown key "lisen" (did you mean "listen"?)`},
		{"unknown in dotted key", "log.levl = \"info\"\n", `toolhost.toml:1: log: unknown key "levl" (did you mean "level"?)`},
		{"wrong type string", "[server]\nlisten = 8080\n", `toolhost.toml:2: server.listen: must be a string, not a whole number`},
		{"date", "[server]\nlisten = 1979-05-27\n", `toolhost.toml:2: server.listen: must be a string, not a date or time`},
		{"table not value", "server = \"x\"\n", `toolhost.toml:1: server: must be a table, not a string`},
		{"listen no port", "[server]\nlisten = \"localhost\"\n", `toolhost.toml:2: server.listen: must be host:port, like "127.0.0.1:8080", not "localhost"`},
		{"listen bad port", "[server]\nlisten = \"127.0.0.1:http\"\n", `toolhost.toml:2: server.listen: the port must be a number from 0 to 65535, not "http"`},
		{"listen big port", "[server]\nlisten = \"127.0.0.1:70000\"\n", `toolhost.toml:2: server.listen: the port must be a number from 0 to 65535, not "70000"`},
		{"listen bad host", "[server]\nlisten = \"a b:80\"\n", `toolhost.toml:2: server.listen: "a b" is not an IP address or host name`},
		{"origin", "[server]\nallowed_origins = [\n  \"https://ok.example.com\",\n  \"https://x.example.com/path\",\n]\n",
			`toolhost.toml:4: server.allowed_origins[1]: must be an origin like "https://chat.example.com" (scheme, host and port only), not "https://x.example.com/path"`},
		{"origin star", "[server]\nallowed_origins = [\"*\"]\n", `toolhost.toml:2: server.allowed_origins[0]: must be an origin like "https://chat.example.com" (scheme, host and port only), not "*"`},
		{"list elements", "[server]\nallowed_origins = [\"https://a.example\", 3]\n", `toolhost.toml:2: server.allowed_origins[1]: must be a string, not a whole number`},
		{"not a list", "[server]\nallowed_origins = \"https://a.example\"\n", `toolhost.toml:2: server.allowed_origins: must be a list, not a string`},
		{"pin short", "[plugins.sha256]\nhttp = \"abc\"\n", `toolhost.toml:2: plugins.sha256.http: must be a SHA-256 in hex: 64 digits 0-9 and a-f, not "abc"`},
		{"pin upper", "[plugins.sha256]\nhttp = \"" + strings.ToUpper(hexA) + "\"\n", `toolhost.toml:2: plugins.sha256.http: must be written in lowercase hex digits`},
		{"pin kind", "[plugins.sha256]\n\"Http\" = \"" + hexA + "\"\n", `toolhost.toml:2: plugins.sha256.Http: "Http" is not a kind name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores`},
		{"pin type", "[plugins]\nsha256 = { http = 1 }\n", `toolhost.toml:2: plugins.sha256.http: must be a string, not a whole number`},
		{"drain too long", "[server]\ndrain_seconds = 61\n", `toolhost.toml:2: server.drain_seconds: must be from 0 to 60, not 61`},
		{"drain negative", "[server]\ndrain_seconds = -1\n", `toolhost.toml:2: server.drain_seconds: must be from 0 to 60, not -1`},
		{"drain as text", "[server]\ndrain_seconds = \"5s\"\n", `toolhost.toml:2: server.drain_seconds: must be a whole number, not a string`},
		{"start timeout", "[plugins]\nstart_timeout_seconds = 0\n", `toolhost.toml:2: plugins.start_timeout_seconds: must be from 1 to 300, not 0`},
		{"runs", "[runs]\nkeep_minutes = 0\n", `toolhost.toml:2: runs.keep_minutes: must be from 1 to 10080, not 0`},
		{"runs per token", "[runs]\nmax_running_per_token = 0\n", `toolhost.toml:2: runs.max_running_per_token: must be from 1 to 1024, not 0`},
		{"state dir empty", "[server]\nstate_dir = \"\"\n", `toolhost.toml:2: server.state_dir: must not be empty: leave state_dir out to use the default, "/var/lib/toolhost"`},
		{"state dir type", "[server]\nstate_dir = 1\n", `toolhost.toml:2: server.state_dir: must be a string, not a whole number`},
		{"token max running", "[[tokens]]\nname = \"a\"\nsha256 = \"" + hexA + "\"\nrole = \"editor\"\nmax_running = 0\n", `toolhost.toml:5: tokens[0].max_running: must be from 1 to 1024, not 0`},
		{"token max running type", "[[tokens]]\nname = \"a\"\nsha256 = \"" + hexA + "\"\nrole = \"editor\"\nmax_running = \"8\"\n", `toolhost.toml:5: tokens[0].max_running: must be a whole number, not a string`},
		{"log level", "[log]\nlevel = \"verbose\"\n", `toolhost.toml:2: log.level: must be one of "trace", "debug", "info", "warn", "error", not "verbose"`},
		{"log format", "[log]\nformat = \"xml\"\n", `toolhost.toml:2: log.format: must be one of "text", "json", not "xml"`},
		{"tokens as table", "[tokens]\nname = \"a\"\n", `toolhost.toml:1: tokens: must be a list of tables: write [[tokens]], with two brackets, once for each`},
		{"token missing keys", "[[tokens]]\n", "toolhost.toml:1: tokens[0]: the token has no name: add name = \"...\" saying who holds it\n" +
			"toolhost.toml:1: tokens[0]: the token has no sha256: add the SHA-256 of the token, e.g. from `printf %s TOKEN | sha256sum`\n" +
			"toolhost.toml:1: tokens[0]: the token has no role: add role = \"viewer\" (or \"editor\", \"admin\")"},
		{"token bad", "[[tokens]]\nname = \"a\"\nsha256 = \"x\"\nrole = \"root\"\n", "toolhost.toml:3: tokens[0].sha256: must be a SHA-256 in hex: 64 digits 0-9 and a-f, not \"x\"\n" +
			"toolhost.toml:4: tokens[0].role: must be one of \"admin\", \"editor\", \"viewer\", not \"root\""},
		{"token dup", "[[tokens]]\nname = \"a\"\nsha256 = \"" + hexA + "\"\nrole = \"admin\"\n[[tokens]]\nname = \"a\"\nsha256 = \"" + hexA + "\"\nrole = \"viewer\"\n",
			"toolhost.toml:6: tokens[1].name: \"a\" is already the name of tokens[0]\n" +
				"toolhost.toml:7: tokens[1].sha256: the same token is already given to tokens[0]"},
		{"token unknown", "[[tokens]]\nname = \"a\"\nsha256 = \"" + hexA + "\"\nrole = \"admin\"\ntoken = \"s3cret\"\n", `toolhost.toml:5: tokens[0]: unknown key "token"; the keys allowed here are "name", "sha256", "role", "max_running", "runs_per_hour", "sandbox_cpu_seconds_per_hour", "approver"`},
		{"kinds bad name", "[kinds.Weather]\nx = 1\n", `toolhost.toml:1: kinds.Weather: "Weather" is not a kind name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores`},
		{"kinds not table", "[kinds]\nweather = 1\n", `toolhost.toml:2: kinds.weather: must be a table, not a whole number`},
		{"tool dup", "[[tool]]\nname = \"a\"\ndescription = \"A.\"\n[tool.run]\ntype = \"http\"\n\n[[tool]]\nname = \"a\"\ndescription = \"B.\"\nrun = { type = \"http\" }\n",
			`toolhost.toml:8: tool[1].name: a tool named "a" is already defined at line 1`},
		{"tool errors", "[http]\n[[tool]]\nname = \"A\"\ndescription = \"x\"\n[tool.run]\ntype = \"http\"\nurl = 1\n[[tool.params]]\nname = \"p\"\nkind = \"str\"\n",
			"toolhost.toml:3: tool[0].name: \"A\" is not a good tool name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores\n" +
				"toolhost.toml:10: tool[0].params[0].kind: must be one of text, number, integer, bool, json, list, not \"str\""},
		{"tool params as table", "[[tool]]\nname = \"a\"\ndescription = \"x\"\nrun = {type = \"http\"}\n[tool.params]\nname = \"p\"\n",
			`toolhost.toml:5: tool[0].params: must be a list of tables: write [[tool.params]], with two brackets, once for each`},
		{"pins file type", "[plugins]\nsha256_file = 1\n", `toolhost.toml:2: plugins.sha256_file: must be a string, not a whole number`},
		{"tool not tables", "tool = 3\n", `toolhost.toml:1: tool: must be a list of tables ([[tool]]), not a whole number`},
		{"tool element", "tool = [\n  1,\n]\n", `toolhost.toml:2: tool[0]: must be a table, not a whole number`},
		{"token element", "tokens = [\"x\"]\n", `toolhost.toml:1: tokens[0]: must be a table, not a string`},
		{"param element", "[[tool]]\nname = \"a\"\ndescription = \"x\"\nrun = {type = \"http\"}\nparams = [true]\n", `toolhost.toml:5: tool[0].params[0]: must be a table, not true or false`},
		{"quoted key", "[kinds.\"my kind\"]\nx = 1\n", `toolhost.toml:1: kinds."my kind": "my kind" is not a kind name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores`},
		{"list for string", "[log]\nlevel = [\"info\"]\n", `toolhost.toml:2: log.level: must be a string, not a list`},
		{"decimal for string", "[log]\nlevel = 1.5\n", `toolhost.toml:2: log.level: must be a string, not a decimal number`},
		{"many at once", "[server]\nlisten = 1\n[runs]\nkeep_minutes = -1\nkeep_minute = 3\n",
			"toolhost.toml:2: server.listen: must be a string, not a whole number\n" +
				"toolhost.toml:4: runs.keep_minutes: must be from 1 to 10080, not -1\n" +
				"toolhost.toml:5: runs: unknown key \"keep_minute\" (did you mean \"keep_minutes\"?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("toolhost.toml", []byte(tt.toml))
			assertErrors(t, err, tt.want)
		})
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse("/etc/toolhost/toolhost.toml", []byte("# nothing set\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.File = "/etc/toolhost/toolhost.toml"
	want.doc = c.doc
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	d := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", d.Server.Listen, "127.0.0.1:8080"},
		{"state dir", d.Server.StateDir, "/var/lib/toolhost"},
		{"drain", d.Server.DrainSeconds, 5},
		{"max running per token", d.Runs.MaxRunningPerToken, 8},
		{"plugins dir", d.Plugins.Dir, "/usr/lib/toolhost/plugins"},
		{"start timeout", d.Plugins.StartTimeoutSeconds, 10},
		{"tools dir", d.ToolsDir, ""},
		{"keep", d.Runs.KeepMinutes, 60},
		{"level", d.Log.Level, "info"},
		{"format", d.Log.Format, "text"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestEverySetting(t *testing.T) {
	src := `tools_dir = "tools"
[server]
listen = ":9000"
allowed_origins = ["https://chat.example.com", "http://localhost:3000"]
state_dir = "state"
drain_seconds = 12
[plugins]
dir = "/opt/plugins"
start_timeout_seconds = 5
[plugins.sha256]
http = "` + hexA + `"
[http]
allow_private = true
timeout_seconds = 5
max_bytes = 1024
[python]
runsc = "bin/runsc"
rootfs = "../rootfs"
state_dir = "/var/run/x"
platform = "ptrace"
sandbox_prefix = "th-"
packages = ["python3-numpy"]
max_memory_mb = 512
max_output_bytes = 2048
extra_allowed_cidrs = ["203.0.113.0/24", "2001:db8::/32"]
pids = 32
tmp_mb = 8
work_mb = 16
pool = { size = 0, max = 4, max_idle_minutes = 3, preload = ["numpy", "xml.etree"] }
[runs]
keep_minutes = 5
max_running_per_token = 3
[[tokens]]
name = "alice"
sha256 = "` + hexB + `"
role = "admin"
max_running = 20
[[tokens]]
name = "bob"
sha256 = "` + hexA + `"
role = "editor"
[log]
level = "debug"
format = "json"
[kinds.weather]
api_url = "https://api.example.com"
retries = 3
`
	c, err := Parse("/srv/th/conf/toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File:     "/srv/th/conf/toolhost.toml",
		Server:   ServerConfig{Listen: ":9000", AllowedOrigins: []string{"https://chat.example.com", "http://localhost:3000"}, StateDir: "/srv/th/conf/state", DrainSeconds: 12},
		Plugins:  PluginsConfig{Dir: "/opt/plugins", SHA256: map[string]string{"http": hexA}, StartTimeoutSeconds: 5},
		ToolsDir: "/srv/th/conf/tools",
		Runs:     RunsConfig{KeepMinutes: 5, MaxRunningPerToken: 3},
		Tokens: []Token{
			{Name: "alice", SHA256: hexB, Role: "admin", MaxRunning: 20, Line: 33},
			{Name: "bob", SHA256: hexA, Role: "editor", Line: 38},
		},
		Log:       LogConfig{Level: "debug", Format: "json"},
		Model:     Default().Model,
		Sessions:  Default().Sessions,
		Approvals: Default().Approvals,
		Kinds: map[string]map[string]any{
			"weather": {"api_url": "https://api.example.com", "retries": int64(3)},
			"http":    {"allow_private": true, "timeout_seconds": int64(5), "max_bytes": int64(1024)},
			"python": {"runsc": "bin/runsc", "rootfs": "../rootfs", "state_dir": "/var/run/x", "platform": "ptrace",
				"sandbox_prefix": "th-", "packages": []any{"python3-numpy"}, "max_memory_mb": int64(512),
				"max_output_bytes": int64(2048), "extra_allowed_cidrs": []any{"203.0.113.0/24", "2001:db8::/32"},
				"pids": int64(32), "tmp_mb": int64(8), "work_mb": int64(16),
				"pool": map[string]any{"size": int64(0), "max": int64(4), "max_idle_minutes": int64(3), "preload": []any{"numpy", "xml.etree"}}},
		},
		kindAt: map[string]string{"weather": "kinds.weather", "http": "http", "python": "python"},
		doc:    c.doc,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}

	if a, b := c.MaxRunningOf(c.Tokens[0]), c.MaxRunningOf(c.Tokens[1]); a != 20 || b != 3 {
		t.Errorf("max running of alice and bob = %d, %d; want 20 (her own) and 3 ([runs] max_running_per_token)", a, b)
	}
}

func TestRelativePathsFollowTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "etc")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sub, "toolhost.toml")
	src := "tools_dir = \"./tools/../tools\"\n[plugins]\ndir = \"../bin/plugins\"\n[python]\nrootfs = \"/abs/rootfs/\"\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // somewhere else: paths must not follow the working directory
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"File", c.File, file},
		{"ToolsDir", c.ToolsDir, filepath.Join(sub, "tools")},
		{"Plugins.Dir", c.Plugins.Dir, filepath.Join(dir, "bin", "plugins")},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("no/such/toolhost.toml")
	if want := "can't read the config file no/such/toolhost.toml: no such file or directory"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(err, fs.ErrNotExist) is false for %v", err)
	}
}

func TestPinsFile(t *testing.T) {
	tests := []struct {
		name  string
		pins  string // "" = no pins file
		main  string // after [plugins]
		want  map[string]string
		error string // with DIR for the temp dir
	}{
		{name: "merged", pins: "http = \"" + hexA + "\"\nprompt = \"" + hexB + "\"\n",
			main: "sha256 = { weather = \"" + hexB + "\", http = \"" + hexA + "\" }\n",
			want: map[string]string{"http": hexA, "prompt": hexB, "weather": hexB}},
		{name: "missing", main: "",
			error: "DIR/toolhost.toml:3: plugins.sha256_file: can't read DIR/pins.toml: it does not exist; run `make build` to write the pins of the built-in plugins, or remove sha256_file"},
		{name: "conflict", pins: "# written by make build\nhttp = \"" + hexA + "\"\n", main: "[plugins.sha256]\nhttp = \"" + hexB + "\"\n",
			error: "DIR/pins.toml:2: http: the http plugin is pinned to a different hash in DIR/toolhost.toml line 5 ([plugins.sha256]); keep one of the two"},
		{name: "bad pin", pins: "http = \"nope\"\n",
			error: "DIR/pins.toml:1: http: must be a SHA-256 in hex: 64 digits 0-9 and a-f, not \"nope\""},
		{name: "bad toml", pins: "http = \n",
			error: "DIR/pins.toml:1: this is not valid TOML: unexpected character U+000A at start of value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.pins != "" {
				if err := os.WriteFile(filepath.Join(dir, "pins.toml"), []byte(tt.pins), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(dir, "toolhost.toml")
			src := "[plugins]\ndir = \".\"\nsha256_file = \"pins.toml\"\n" + tt.main
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Load(file)
			if tt.error != "" {
				want := strings.ReplaceAll(tt.error, "DIR", dir)
				if err == nil || err.Error() != want {
					t.Fatalf("got %v\nwant %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Plugins.SHA256, tt.want) {
				t.Errorf("pins = %v, want %v", c.Plugins.SHA256, tt.want)
			}
			if c.Plugins.SHA256File != filepath.Join(dir, "pins.toml") {
				t.Errorf("SHA256File = %q", c.Plugins.SHA256File)
			}
		})
	}
}

func TestConfigTools(t *testing.T) {
	src := `[http]
allow_private = true

[[tool]]
name = "get_json"
description = "Fetch a JSON document."
[[tool.params]]
name = "path"
kind = "text"
required = true
[tool.run]
type = "http"
url = "http://127.0.0.1:9999/{{path}}"

[[tool]]
name = "echo"
description = "Say it back."
effect = "change"
run = { type = "python", code = "def run(x): return x" }
`
	c, err := Parse("toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools) != 2 {
		t.Fatalf("got %d tools, want 2", len(c.Tools))
	}
	a, b := c.Tools[0], c.Tools[1]
	if a.Source != "toolhost.toml:4" || a.Line != 4 || a.RunLine != 11 || a.File != "toolhost.toml" {
		t.Errorf("first tool at %s line %d, run at %d", a.Source, a.Line, a.RunLine)
	}
	if a.FieldLines["run.url"] != 13 || a.FieldLines["params[0].kind"] != 9 || a.LineOf("run.url") != 13 || a.LineOf("run.headers.x") != 11 {
		t.Errorf("field lines: %v", a.FieldLines)
	}
	if got := a.ErrorAt("run.url", "must have a scheme").Error(); got != "toolhost.toml:13: run.url: must have a scheme" {
		t.Errorf("ErrorAt: %s", got)
	}
	if b.Source != "toolhost.toml:15" || b.RunLine != 19 || b.Effect != "change" || b.Kind() != "python" || a.Effect != "read" {
		t.Errorf("second tool: %+v", b)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "a.toml", Line: 3, Column: 7, Field: "x.y", Message: "bad"}, "a.toml:3: x.y: bad"},
		{Error{File: "a.toml", Field: "x", Message: "bad"}, "a.toml: x: bad"},
		{Error{File: "a.toml", Line: 2, Message: "bad"}, "a.toml:2: bad"},
		{Error{Message: "bad"}, "bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	es := Errors{{File: "a", Line: 1, Message: "x"}, {File: "a", Line: 2, Message: "y"}}
	if got := es.Error(); got != "a:1: x\na:2: y" {
		t.Errorf("Errors: %q", got)
	}
}

// assertErrors checks err is Errors reading exactly want.
func assertErrors(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want\n%s", want)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, not Errors: %v", err, err)
	}
	if got := err.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestKindTablesAreKeptAsWritten(t *testing.T) {
	src := "[http]\ntimeout_seconds = 5\n[python]\nrunsc = \"bin/runsc\"\nrootfs = \"/abs/rootfs/\"\npackages = [\"a\"]\n[python.pool]\nsize = 1\n[kinds.weather]\ndirs = [\"x\", \"/y\"]\n"
	c, err := Parse("/srv/th/conf/toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"runsc":{"type":"string","format":"path"},
		"rootfs":{"type":"string","format":"path"},"packages":{"type":"array","items":{"type":"string"}},
		"pool":{"type":"object","properties":{"size":{"type":"integer"}}}}}`)
	got, err := c.KindTable("python", schema)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"packages":["a"],"pool":{"size":1},"rootfs":"/abs/rootfs","runsc":"/srv/th/conf/bin/runsc"}`
	if string(got) != want {
		t.Errorf("KindTable(python) = %s, want %s", got, want)
	}
	// A kind without a schema gets its table as written.
	if got, _ := c.KindTable("python", nil); !strings.Contains(string(got), `"runsc":"bin/runsc"`) {
		t.Errorf("KindTable(python, no schema) = %s", got)
	}
	got, _ = c.KindTable("weather", json.RawMessage(`{"properties":{"dirs":{"type":"array","items":{"type":"string","format":"path"}}}}`))
	if string(got) != `{"dirs":["/srv/th/conf/x","/y"]}` {
		t.Errorf("KindTable(weather) = %s", got)
	}
	if got, _ := c.KindTable("prompt", nil); string(got) != "{}" {
		t.Errorf("KindTable(prompt) = %s, want {}", got)
	}
}

func TestKindErrorsAreAtTheirLine(t *testing.T) {
	src := "[http]\ntimeout_seconds = 5\n\n[python]\nmax_memory_mb = 8\n[python.pool]\npreload = [\n  \"a\",\n  \"b c\",\n]\n[kinds.weather]\nretries = -1\n"
	c, err := Parse("toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ kind, path, want string }{
		{"python", "python.max_memory_mb", "toolhost.toml:5: python.max_memory_mb: bad"},
		{"python", "max_memory_mb", "toolhost.toml:5: python.max_memory_mb: bad"},
		{"python", "python.pool.preload[1]", "toolhost.toml:9: python.pool.preload[1]: bad"},
		{"python", "python.pids", "toolhost.toml:4: python.pids: bad"}, // not set: at its table
		{"http", "http.timeout_seconds", "toolhost.toml:2: http.timeout_seconds: bad"},
		{"weather", "weather.retries", "toolhost.toml:12: kinds.weather.retries: bad"},
		{"weather", "retries", "toolhost.toml:12: kinds.weather.retries: bad"},
		{"prompt", "prompt.model", "toolhost.toml: prompt.model: bad"},
	} {
		if got := c.KindError(tc.kind, tc.path, "bad").Error(); got != tc.want {
			t.Errorf("KindError(%s, %s) = %q, want %q", tc.kind, tc.path, got, tc.want)
		}
	}
}

func TestStrayKindTables(t *testing.T) {
	src := "[plugins]\ndir = \"/p\"\n[http]\nx = 1\n[pyhton]\nx = 1\n[python]\nx = 1\n[kinds.weather]\nx = 1\n"
	c, err := Parse("toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := c.StrayKindTables([]string{"http"}, []string{"python"}).Error()
	want := "toolhost.toml:5: pyhton: [pyhton] names no kind of this host: the kinds are http, python (did you mean [python]?)\n" +
		"toolhost.toml:9: kinds.weather: [kinds.weather] names no kind of this host: the kinds are http, python; remove the table, or add the kind's plugin to /p"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
