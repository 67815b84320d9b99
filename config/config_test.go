package config

import (
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
		{"unknown top key", "\nlisten = \"x\"\n", `toolhost.toml:2: unknown key "listen"; the keys allowed here are "server", "plugins", "tools_dir", "http", "python", "runs", "tokens", "log", "kinds", "tool"`},
		{"unknown key suggested", "[http]\n\ntimeout = 3\n", `toolhost.toml:3: http: unknown key "timeout" (did you mean "timeout_seconds"?)`},
		{"misspelt key", "[server]\nlisen = \"a:1\"\n", `toolhost.toml:2: server: unknown key "lisen" (did you mean "listen"?)`},
		{"unknown in dotted key", "http.alow_private = true\n", `toolhost.toml:1: http: unknown key "alow_private" (did you mean "allow_private"?)`},
		{"wrong type int", "[http]\ntimeout_seconds = \"30\"\n", `toolhost.toml:2: http.timeout_seconds: must be a whole number, not a string`},
		{"float for int", "[http]\ntimeout_seconds = 30.0\n", `toolhost.toml:2: http.timeout_seconds: must be a whole number, not a decimal number (write 30, without the ".0")`},
		{"fraction for int", "[http]\ntimeout_seconds = 2.5\n", `toolhost.toml:2: http.timeout_seconds: must be a whole number, not a decimal number`},
		{"range", "[http]\ntimeout_seconds = 0\n", `toolhost.toml:2: http.timeout_seconds: must be from 1 to 600, not 0`},
		{"range max_bytes", "[http]\nmax_bytes = 2147483648\n", `toolhost.toml:2: http.max_bytes: must be from 1 to 1073741824, not 2147483648`},
		{"wrong type bool", "[http]\nallow_private = \"yes\"\n", `toolhost.toml:2: http.allow_private: must be true or false, not a string`},
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
		{"start timeout", "[plugins]\nstart_timeout_seconds = 0\n", `toolhost.toml:2: plugins.start_timeout_seconds: must be from 1 to 300, not 0`},
		{"python platform", "[python]\nplatform = \"kvm2\"\n", `toolhost.toml:2: python.platform: must be one of "systrap", "ptrace", "kvm", not "kvm2"`},
		{"python prefix", "[python]\nsandbox_prefix = \"Tool host\"\n", `toolhost.toml:2: python.sandbox_prefix: "Tool host" is not a good prefix: use 1 to 18 lowercase letters, digits, '-' or '_', starting with a letter`},
		{"pool preload", "[python.pool]\npreload = [\"numpy\", \"not-a-module\"]\n", `toolhost.toml:2: python.pool.preload[1]: "not-a-module" is not a Python module name (like "numpy" or "xml.etree")`},
		{"python package", "[python]\npackages = [\"numpy\", \"Py Thing\"]\n", `toolhost.toml:2: python.packages[1]: "Py Thing" is not a Debian package name (like "python3-numpy")`},
		{"python cidr", "[python]\nextra_allowed_cidrs = [\"10.0.0.0/8\", \"nope\"]\n", `toolhost.toml:2: python.extra_allowed_cidrs[1]: "nope" is not an address range like "203.0.113.0/24"`},
		{"python cidr host bits", "[python]\nextra_allowed_cidrs = [\"203.0.113.7/24\"]\n", `toolhost.toml:2: python.extra_allowed_cidrs[0]: "203.0.113.7/24" has bits set past its prefix length; write "203.0.113.0/24"`},
		{"python memory", "[python]\nmax_memory_mb = 8\n", `toolhost.toml:2: python.max_memory_mb: must be from 16 to 65536, not 8`},
		{"python output", "[python]\nmax_output_bytes = 10\n", `toolhost.toml:2: python.max_output_bytes: must be from 1024 to 1073741824, not 10`},
		{"python pids", "[python]\npids = 1\n", `toolhost.toml:2: python.pids: must be from 8 to 4096, not 1`},
		{"python tmp", "[python]\ntmp_mb = 0\n", `toolhost.toml:2: python.tmp_mb: must be from 1 to 65536, not 0`},
		{"python work", "[python]\nwork_mb = 0\n", `toolhost.toml:2: python.work_mb: must be from 1 to 1048576, not 0`},
		{"pool size over max", "[python.pool]\nmax = 2\nsize = 3\n", `toolhost.toml:3: python.pool.size: must be at most python.pool.max (2), not 3`},
		{"pool max under default size", "[python.pool]\nmax = 1\n", `toolhost.toml:2: python.pool.max: must be at least python.pool.size (2, the default), not 1`},
		{"pool idle", "[python.pool]\nmax_idle_minutes = 0\n", `toolhost.toml:2: python.pool.max_idle_minutes: must be from 1 to 1440, not 0`},
		{"pool unknown", "[python.pool]\nmin = 1\n", `toolhost.toml:2: python.pool: unknown key "min" (did you mean "max"?)`},
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
		{"token unknown", "[[tokens]]\nname = \"a\"\nsha256 = \"" + hexA + "\"\nrole = \"admin\"\ntoken = \"s3cret\"\n", `toolhost.toml:5: tokens[0]: unknown key "token"; the keys allowed here are "name", "sha256", "role", "max_running"`},
		{"kinds reserved", "[kinds.http]\nx = 1\n", `toolhost.toml:1: kinds.http: the http kind's settings go in [http], not [kinds.http]`},
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
		{"table for bool", "[http]\nallow_private = { x = 1 }\n", `toolhost.toml:2: http.allow_private: must be true or false, not a table`},
		{"decimal for string", "[log]\nlevel = 1.5\n", `toolhost.toml:2: log.level: must be a string, not a decimal number`},
		{"empty path", "[python]\nrunsc = \"\"\n", `toolhost.toml:2: python.runsc: must not be empty: leave runsc out to use the default, "/usr/local/bin/runsc"`},
		{"many at once", "[server]\nlisten = 1\n[http]\ntimeout_seconds = -1\nmax_byte = 3\n",
			"toolhost.toml:2: server.listen: must be a string, not a whole number\n" +
				"toolhost.toml:4: http.timeout_seconds: must be from 1 to 600, not -1\n" +
				"toolhost.toml:5: http: unknown key \"max_byte\" (did you mean \"max_bytes\"?)"},
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
		{"max running per token", d.Runs.MaxRunningPerToken, 8},
		{"plugins dir", d.Plugins.Dir, "/usr/lib/toolhost/plugins"},
		{"start timeout", d.Plugins.StartTimeoutSeconds, 10},
		{"tools dir", d.ToolsDir, ""},
		{"allow private", d.HTTP.AllowPrivate, false},
		{"http timeout", d.HTTP.TimeoutSeconds, 30},
		{"max bytes", d.HTTP.MaxBytes, int64(10 << 20)},
		{"platform", d.Python.Platform, "systrap"},
		{"prefix", d.Python.SandboxPrefix, "toolhost-"},
		{"memory", d.Python.MaxMemoryMB, 1024},
		{"output", d.Python.MaxOutputBytes, int64(1 << 20)},
		{"pids", d.Python.Pids, 64},
		{"tmp", d.Python.TmpMB, 64},
		{"work", d.Python.WorkMB, 256},
		{"pool", d.Python.Pool, PoolConfig{Size: 2, Max: 16, MaxIdleMinutes: 10}},
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
		Server:   ServerConfig{Listen: ":9000", AllowedOrigins: []string{"https://chat.example.com", "http://localhost:3000"}, StateDir: "/srv/th/conf/state"},
		Plugins:  PluginsConfig{Dir: "/opt/plugins", SHA256: map[string]string{"http": hexA}, StartTimeoutSeconds: 5},
		ToolsDir: "/srv/th/conf/tools",
		HTTP:     HTTPConfig{AllowPrivate: true, TimeoutSeconds: 5, MaxBytes: 1024},
		Python: PythonConfig{
			Runsc: "/srv/th/conf/bin/runsc", Rootfs: "/srv/th/rootfs", StateDir: "/var/run/x",
			Platform: "ptrace", SandboxPrefix: "th-", Packages: []string{"python3-numpy"},
			MaxMemoryMB: 512, MaxOutputBytes: 2048, ExtraAllowedCIDRs: []string{"203.0.113.0/24", "2001:db8::/32"},
			Pids: 32, TmpMB: 8, WorkMB: 16, Pool: PoolConfig{Size: 0, Max: 4, MaxIdleMinutes: 3, Preload: []string{"numpy", "xml.etree"}},
		},
		Runs: RunsConfig{KeepMinutes: 5, MaxRunningPerToken: 3},
		Tokens: []Token{
			{Name: "alice", SHA256: hexB, Role: "admin", MaxRunning: 20, Line: 32},
			{Name: "bob", SHA256: hexA, Role: "editor", Line: 37},
		},
		Log:   LogConfig{Level: "debug", Format: "json"},
		Kinds: map[string]map[string]any{"weather": {"api_url": "https://api.example.com", "retries": int64(3)}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}

	wantHTTP := map[string]any{"allow_private": true, "timeout_seconds": int64(5), "max_bytes": int64(1024)}
	if got := c.KindConfig("http"); !reflect.DeepEqual(got, wantHTTP) {
		t.Errorf("KindConfig(http) = %v, want %v", got, wantHTTP)
	}
	py := c.KindConfig("python")
	if py["runsc"] != "/srv/th/conf/bin/runsc" || py["max_memory_mb"] != int64(512) ||
		!reflect.DeepEqual(py["packages"], []any{"python3-numpy"}) ||
		!reflect.DeepEqual(py["pool"], map[string]any{"size": int64(0), "max": int64(4), "max_idle_minutes": int64(3), "preload": []any{"numpy", "xml.etree"}}) {
		t.Errorf("KindConfig(python) = %v", py)
	}
	if len(py) != 13 {
		t.Errorf("KindConfig(python) has %d keys, want 13 (one for each key of [python])", len(py))
	}
	if a, b := c.MaxRunningOf(c.Tokens[0]), c.MaxRunningOf(c.Tokens[1]); a != 20 || b != 3 {
		t.Errorf("max running of alice and bob = %d, %d; want 20 (her own) and 3 ([runs] max_running_per_token)", a, b)
	}
	if got := c.KindConfig("weather"); !reflect.DeepEqual(got, want.Kinds["weather"]) {
		t.Errorf("KindConfig(weather) = %v", got)
	}
	if got := c.KindConfig("prompt"); got != nil {
		t.Errorf("KindConfig(prompt) = %v, want nil", got)
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
		{"Python.Rootfs", c.Python.Rootfs, "/abs/rootfs"},
		{"Python.Runsc (default)", c.Python.Runsc, "/usr/local/bin/runsc"},
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
	if b.Source != "toolhost.toml:15" || b.RunLine != 19 || b.Effect != "change" || b.Type() != "python" || a.Effect != "read" {
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
