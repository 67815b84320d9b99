// Package config reads toolhost's configuration: the main toolhost.toml and
// the tool files, strictly (an unknown key, a wrong type or a bad value is an
// error at its file and line), with defaults filled in and paths resolved.
//
// It knows the host's own tables only ([server], [plugins], [runs], [log],
// [model], [sessions], [approvals], [[tokens]], [[tool]]). Every other table ([http],
// [python], [kinds.NAME]) belongs to a kind and is kept as written: the kind's plugin
// says what it takes (its config schema) and checks it (its Configure), and
// KindTable and KindError turn the one into the plugin's input and the other
// into file:line messages.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Config is a loaded toolhost.toml, checked, with defaults filled in and
// every path absolute.
type Config struct {
	File     string // absolute path of the file loaded; "" for Default()
	Server   ServerConfig
	Plugins  PluginsConfig
	ToolsDir string // absolute; "" when there is no tools folder
	Runs     RunsConfig
	Tokens   []Token
	Log      LogConfig
	Model    ModelConfig
	Sessions SessionsConfig
	// Store is [store] (store.go).
	Store StoreConfig
	// Approvals is [approvals] (approvals.go).
	Approvals ApprovalsConfig
	// Cluster is [cluster] (cluster.go).
	Cluster ClusterConfig
	// Kinds holds every kind's table as written, by kind: a top-level table
	// that is not the host's own ([http], [python]) or a [kinds.<name>]
	// table. Values are as decoded: string, int64, float64, bool, time
	// values, []any, map[string]any. See KindTable.
	Kinds map[string]map[string]any
	// Tools are the [[tool]] tables of the main config, checked like tool
	// files.
	Tools []Tool

	// kindAt is where each kind's table is in the file: "python" for
	// [python], "kinds.weather" for [kinds.weather].
	kindAt map[string]string
	// doc is the file as parsed, for the lines of a kind's errors; nil for
	// Default().
	doc *document
}

// ServerConfig is [server].
type ServerConfig struct {
	Listen string // host:port; default "127.0.0.1:8080"
	// AllowedOrigins are the browser origins ("https://chat.example.com")
	// allowed to open the websocket besides the host's own. Default none.
	AllowedOrigins []string
	// StateDir is the host's own folder for what it keeps on disk (the
	// output of runs, under runs/). Absolute; default "/var/lib/toolhost".
	StateDir string
	// DrainSeconds is how long a host told to stop (SIGTERM, systemctl
	// stop) keeps serving, calls going on and new ones alike, while its
	// /healthz answers 503 "draining", so that a load balancer in front
	// (examples/haproxy) takes it out of its pool before it stops taking
	// calls. Read when the stop comes, so a reload changes it. Default 5,
	// 0..60; 0 stops at once.
	DrainSeconds int
}

// MaxDrainSeconds bounds [server] drain_seconds: the systemd unit's
// TimeoutStopSec (examples/systemd/toolhost.service) leaves room for this
// much draining and the host's own stop after it.
const MaxDrainSeconds = 60

// PluginsConfig is [plugins].
type PluginsConfig struct {
	Dir string // absolute; default "/usr/lib/toolhost/plugins"
	// SHA256 pins each plugin binary: kind -> 64 lowercase hex digits. It
	// holds the pins of [plugins.sha256] and those of SHA256File.
	SHA256 map[string]string
	// SHA256File is an optional TOML file of more pins (kind = "hex"), so
	// that `make build` can pin the built-in plugins without editing the
	// main config. Absolute; "" for none. A kind pinned in both places with
	// different hashes is an error.
	SHA256File          string
	StartTimeoutSeconds int // default 10, 1..300
}

// RunsConfig is [runs].
type RunsConfig struct {
	KeepMinutes int // how long a finished run's output is kept for reconnects; default 60, 1..10080
	// MaxRunningPerToken is how many runs one caller may have going at
	// once: each token without a max_running of its own, and the "local"
	// caller of a host with no tokens. Default 8, 1..1024.
	MaxRunningPerToken int
	// RunsPerHourPerToken and SandboxCPUSecondsPerHourPerToken are the
	// budgets of each token without its own (and of the "local" caller),
	// over a sliding hour; 0 (the default) is no budget.
	RunsPerHourPerToken              int
	SandboxCPUSecondsPerHourPerToken int
}

// Token is one [[tokens]] entry: a bearer token, stored as its SHA-256.
type Token struct {
	Name   string
	SHA256 string // 64 lowercase hex digits
	Role   string // admin, editor or viewer
	// MaxRunning is how many runs the token may have going at once; 0
	// (not set) means [runs] max_running_per_token.
	MaxRunning int
	// RunsPerHour and SandboxCPUSecondsPerHour are the token's budgets
	// over a sliding hour; 0 (not set) means [runs]
	// runs_per_hour_per_token and sandbox_cpu_seconds_per_hour_per_token.
	RunsPerHour              int
	SandboxCPUSecondsPerHour int
	// Approver lets the token decide the approvals of other tokens' runs
	// (approver = true): with role = "viewer" it is an approver-only
	// token, one that can start no run and so never approves its own.
	// It never decides a run it started itself unless [approvals] by is
	// "caller".
	Approver bool
	Line     int // the [[tokens]] line
}

// MaxRunningOf is how many runs the token may have going at once.
func (c *Config) MaxRunningOf(tok Token) int {
	if tok.MaxRunning > 0 {
		return tok.MaxRunning
	}
	return c.Runs.MaxRunningPerToken
}

// LogConfig is [log].
type LogConfig struct {
	Level  string // trace, debug, info (default), warn or error
	Format string // text (default) or json
}

// Default returns the configuration used when a file sets nothing.
func Default() *Config {
	return &Config{
		Server:    ServerConfig{Listen: "127.0.0.1:8080", StateDir: "/var/lib/toolhost", DrainSeconds: 5},
		Plugins:   PluginsConfig{Dir: "/usr/lib/toolhost/plugins", SHA256: map[string]string{}, StartTimeoutSeconds: 10},
		Runs:      RunsConfig{KeepMinutes: 60, MaxRunningPerToken: 8},
		Log:       LogConfig{Level: "info", Format: "text"},
		Model:     defaultModel(),
		Sessions:  defaultSessions(),
		Approvals: defaultApprovals(),
		Kinds:     map[string]map[string]any{},
		kindAt:    map[string]string{},
	}
}

// Load reads and checks the config file at path. When the file has problems
// the error is Errors, listing all of them; when it can't be read the error
// says so and wraps the cause.
func Load(path string) (*Config, error) {
	abs, data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, abs, data, false)
}

// readFile reads the config file at path, returning its absolute path too.
func readFile(path string) (abs string, data []byte, err error) {
	abs, err = filepath.Abs(path)
	if err != nil {
		return "", nil, fmt.Errorf("can't find the config file %s: %w", path, err)
	}
	data, err = os.ReadFile(abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, below
		}
		return "", nil, fmt.Errorf("can't read the config file %s: %w", path, err)
	}
	return abs, data, nil
}

// Parse checks a config given as bytes. file names it in errors; relative
// paths in it are resolved against file's folder.
func Parse(file string, data []byte) (*Config, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("can't find the config file %s: %w", file, err)
	}
	return parse(file, abs, data, false)
}

// parse decodes a config file's data. With pinsFileMayBeMissing, a
// sha256_file that does not exist yet holds no pins instead of being an
// error (toolhost plugins pin may be the first to write it).
func parse(file, abs string, data []byte, pinsFileMayBeMissing bool) (*Config, error) {
	doc, errs := parseDocument(file, data)
	if errs != nil {
		return nil, errs
	}
	d := &decoder{doc: doc}
	c := Default()
	c.File = abs
	c.doc = doc
	dir := filepath.Dir(abs)
	d.decodeConfig(c, dir)
	if c.Plugins.SHA256File != "" && !d.hasErrorAt("plugins.sha256_file") {
		if _, err := os.Lstat(c.Plugins.SHA256File); !pinsFileMayBeMissing || !errors.Is(err, fs.ErrNotExist) {
			d.errs = append(d.errs, loadPins(d.doc, c)...)
		}
	}
	if err := errorsOrNil(d.errs); err != nil {
		return nil, err
	}
	return c, nil
}

func (d *decoder) hasErrorAt(field string) bool {
	return slices.ContainsFunc(d.errs, func(e Error) bool { return e.Field == field })
}

// decodeConfig reads the main file's top-level table into c, one section at
// a time, in the order the sections' errors are reported.
func (d *decoder) decodeConfig(c *Config, dir string) {
	top := d.table("", d.doc.root)
	if v, ok := top.get("server"); ok {
		d.decodeServer(v, &c.Server, dir)
	}
	if v, ok := top.get("plugins"); ok {
		d.decodePlugins(v, &c.Plugins, dir)
	}
	d.path(top, "tools_dir", dir, &c.ToolsDir, true)
	if v, ok := top.get("runs"); ok {
		d.decodeRuns(v, &c.Runs)
	}
	if l, ok := top.tables("tokens"); ok {
		d.decodeTokens(l, c)
	}
	if v, ok := top.get("log"); ok {
		d.decodeLog(v, &c.Log)
	}
	if v, ok := top.get("model"); ok {
		d.decodeModel(v, &c.Model, dir)
	}
	if v, ok := top.get("sessions"); ok {
		d.decodeSessions(v, &c.Sessions)
	}
	if v, ok := top.get("store"); ok {
		d.decodeStore(v, &c.Store, dir)
	}
	if v, ok := top.get("cluster"); ok {
		d.decodeCluster(v, &c.Cluster, dir)
	}
	if v, ok := top.get("approvals"); ok {
		d.decodeApprovals(v, &c.Approvals, c.Tokens)
	}
	d.decodeKindTables(top, c)
	if v, ok := top.get("kinds"); ok {
		d.decodeKinds(v, c)
	}
	if l, ok := top.tables("tool"); ok {
		d.decodeTools(l, c)
	}
	top.done()
}

// decodeServer reads [server] into s.
func (d *decoder) decodeServer(v any, s *ServerConfig, dir string) {
	t := d.table("server", v)
	if t.str("listen", &s.Listen) {
		if msg := checkListen(s.Listen); msg != "" {
			d.addf("server.listen", "%s", msg)
		}
	}
	if t.strings("allowed_origins", &s.AllowedOrigins) {
		for i, o := range s.AllowedOrigins {
			if msg := checkOrigin(o); msg != "" {
				d.addf(indexPath("server.allowed_origins", i), "%s", msg)
			}
		}
	}
	d.path(t, "state_dir", dir, &s.StateDir, false)
	t.int("drain_seconds", &s.DrainSeconds, 0, MaxDrainSeconds)
	t.done()
}

// decodePlugins reads [plugins], with its [plugins.sha256] pins, into p.
func (d *decoder) decodePlugins(v any, p *PluginsConfig, dir string) {
	t := d.table("plugins", v)
	d.path(t, "dir", dir, &p.Dir, false)
	if pv, ok := t.get("sha256"); ok {
		pt := d.table("plugins.sha256", pv)
		d.pins(pt, p.SHA256)
	}
	d.path(t, "sha256_file", dir, &p.SHA256File, true)
	t.int("start_timeout_seconds", &p.StartTimeoutSeconds, 1, 300)
	t.done()
}

// decodeRuns reads [runs] into r.
func (d *decoder) decodeRuns(v any, r *RunsConfig) {
	t := d.table("runs", v)
	t.int("keep_minutes", &r.KeepMinutes, 1, 10080)
	t.int("max_running_per_token", &r.MaxRunningPerToken, 1, 1024)
	t.int("runs_per_hour_per_token", &r.RunsPerHourPerToken, 0, 1000000)
	t.int("sandbox_cpu_seconds_per_hour_per_token", &r.SandboxCPUSecondsPerHourPerToken, 0, 1000000)
	t.done()
}

// decodeLog reads [log] into l.
func (d *decoder) decodeLog(v any, l *LogConfig) {
	t := d.table("log", v)
	if t.str("level", &l.Level) {
		d.oneOf("log.level", l.Level, "trace", "debug", "info", "warn", "error")
	}
	if t.str("format", &l.Format) {
		d.oneOf("log.format", l.Format, "text", "json")
	}
	t.done()
}

// decodeKindTables keeps every top-level table that is not the host's own as
// a kind's: [http], [python], or a third-party kind's [NAME]. A value that is
// not a table is an unknown key of the host's, reported by top.done with a
// suggestion.
func (d *decoder) decodeKindTables(top *table, c *Config) {
	for _, k := range slices.Sorted(maps.Keys(top.m)) {
		v := top.m[k]
		if slices.Contains(hostKeys, k) {
			continue
		}
		if _, ok := v.(map[string]any); !ok {
			continue
		}
		top.skip(k)
		if !nameRE.MatchString(k) {
			msg := fmt.Sprintf("[%s] is neither one of the host's tables nor a kind's: a kind name %s", k, nameRule)
			if s := suggest(k, hostKeys); s != "" {
				msg += fmt.Sprintf(" (did you mean [%s]?)", s)
			}
			d.addf(joinKey("", k), "%s", msg)
			continue
		}
		c.Kinds[k] = v.(map[string]any)
		c.kindAt[k] = k
	}
}

// decodeKinds keeps the [kinds.NAME] tables as the kinds' own, refusing a
// kind whose settings are also given in a top-level [NAME].
func (d *decoder) decodeKinds(v any, c *Config) {
	t := d.table("kinds", v)
	names := make([]string, 0, len(t.m))
	for k := range t.m {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		kv, _ := t.get(k)
		p := t.at(k)
		switch {
		case c.kindAt[k] != "":
			d.addf(p, "the %s kind's settings are given twice, in [%s] and in [kinds.%s]: keep one", k, k, k)
		case !nameRE.MatchString(k):
			d.addf(p, "%q is not a kind name: it %s", k, nameRule)
		default:
			m, ok := kv.(map[string]any)
			if !ok {
				d.addf(p, "must be a table, not %s", describe(kv))
				continue
			}
			c.Kinds[k] = m
			c.kindAt[k] = p
		}
	}
}

// decodeTools reads the main file's [[tool]] tables into c.Tools, refusing
// a second tool of the same name.
func (d *decoder) decodeTools(l []any, c *Config) {
	byName := map[string]Tool{}
	for i, v := range l {
		p := indexPath("tool", i)
		before := len(d.errs)
		t := d.tool(p, v)
		if len(d.errs) > before || t.Name == "" {
			continue
		}
		if prev, dup := byName[t.Name]; dup {
			d.addf(joinKey(p, "name"), "a tool named %q is already defined at line %d", t.Name, prev.Line)
			continue
		}
		byName[t.Name] = t
		c.Tools = append(c.Tools, t)
	}
}

func (d *decoder) decodeTokens(l []any, c *Config) {
	names := map[string]int{}
	hashes := map[string]int{}
	for i, v := range l {
		p := indexPath("tokens", i)
		if _, ok := v.(map[string]any); !ok {
			d.addf(p, "must be a table, not %s", describe(v))
			continue
		}
		t := d.table(p, v)
		tok := Token{Line: d.doc.lineAt(p)}
		if t.str("name", &tok.Name) {
			if strings.TrimSpace(tok.Name) == "" {
				d.addf(t.at("name"), "must not be empty: name who holds the token")
			} else if j, dup := names[tok.Name]; dup {
				d.addf(t.at("name"), "%q is already the name of tokens[%d]", tok.Name, j)
			} else {
				names[tok.Name] = i
			}
		} else if _, ok := t.m["name"]; !ok {
			d.addf(p, "the token has no name: add name = \"...\" saying who holds it")
		}
		if t.str("sha256", &tok.SHA256) {
			if msg := checkHex(tok.SHA256); msg != "" {
				d.addf(t.at("sha256"), "%s", msg)
			} else if j, dup := hashes[tok.SHA256]; dup {
				d.addf(t.at("sha256"), "the same token is already given to tokens[%d]", j)
			} else {
				hashes[tok.SHA256] = i
			}
		} else if _, ok := t.m["sha256"]; !ok {
			d.addf(p, "the token has no sha256: add the SHA-256 of the token, e.g. from `printf %%s TOKEN | sha256sum`")
		}
		if t.str("role", &tok.Role) {
			d.oneOf(t.at("role"), tok.Role, "admin", "editor", "viewer")
		} else if _, ok := t.m["role"]; !ok {
			d.addf(p, "the token has no role: add role = \"viewer\" (or \"editor\", \"admin\")")
		}
		t.int("max_running", &tok.MaxRunning, 1, 1024)
		t.int("runs_per_hour", &tok.RunsPerHour, 1, 1000000)
		t.int("sandbox_cpu_seconds_per_hour", &tok.SandboxCPUSecondsPerHour, 1, 1000000)
		t.boolean("approver", &tok.Approver)
		t.done()
		c.Tokens = append(c.Tokens, tok)
	}
}

// path reads a path and makes it absolute, relative to dir (the config file's
// folder). "" means none for the optional paths, and is an error for the
// others.
func (d *decoder) path(t *table, key, dir string, dst *string, optional bool) {
	var s string
	if !t.str(key, &s) {
		return
	}
	if s == "" {
		if !optional {
			d.addf(t.at(key), "must not be empty: leave %s out to use the default, %q", key, *dst)
			return
		}
		*dst = ""
		return
	}
	*dst = resolve(dir, s)
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

func (d *decoder) oneOf(path, v string, allowed ...string) {
	if slices.Contains(allowed, v) {
		return
	}
	d.addf(path, "must be one of %s, not %q", strings.Join(quoteAll(allowed), ", "), v)
}

// pins reads kind = "hex" pairs from a table into dst.
func (d *decoder) pins(t *table, dst map[string]string) {
	kinds := make([]string, 0, len(t.m))
	for k := range t.m {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		var hex string
		if !t.str(k, &hex) {
			continue
		}
		if !nameRE.MatchString(k) {
			d.addf(t.at(k), "%q is not a kind name: it %s", k, nameRule)
			continue
		}
		if msg := checkHex(hex); msg != "" {
			d.addf(t.at(k), "%s", msg)
			continue
		}
		dst[k] = hex
	}
}

// loadPins reads plugins.sha256_file into c.Plugins.SHA256.
func loadPins(main *document, c *Config) Errors {
	file := c.Plugins.SHA256File
	data, err := os.ReadFile(file)
	if err != nil {
		msg := fmt.Sprintf("can't read %s: %s", file, ioReason(err))
		if errors.Is(err, os.ErrNotExist) {
			msg += "; run `make build` to write the pins of the built-in plugins, or remove sha256_file"
		}
		return Errors{{File: main.file, Line: main.lineAt("plugins.sha256_file"), Field: "plugins.sha256_file", Message: msg}}
	}
	doc, errs := parseDocument(file, data)
	if errs != nil {
		return errs
	}
	d := &decoder{doc: doc}
	pins := map[string]string{}
	d.pins(d.table("", doc.root), pins)
	for k, h := range pins {
		if old, ok := c.Plugins.SHA256[k]; ok && old != h {
			d.addf(joinKey("", k), "the %s plugin is pinned to a different hash in %s line %d ([plugins.sha256]); keep one of the two",
				k, main.file, main.lineAt(joinKey("plugins.sha256", k)))
			continue
		}
		c.Plugins.SHA256[k] = h
	}
	return d.errs
}

var (
	hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// hostKeys are the host's own top-level keys, in the order of the example
// config; any other top-level table is a kind's.
var hostKeys = []string{"server", "plugins", "tools_dir", "runs", "tokens", "log", "model", "sessions", "store", "cluster", "approvals", "kinds", "tool"}

func checkHex(s string) string {
	switch {
	case hexRE.MatchString(s):
		return ""
	case hexRE.MatchString(strings.ToLower(s)):
		return "must be written in lowercase hex digits"
	default:
		return fmt.Sprintf("must be a SHA-256 in hex: 64 digits 0-9 and a-f, not %q", s)
	}
}

func checkListen(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("must be host:port, like \"127.0.0.1:8080\", not %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("the port must be a number from 0 to 65535, not %q", port)
	}
	if host != "" && net.ParseIP(host) == nil && !hostnameRE.MatchString(host) {
		return fmt.Sprintf("%q is not an IP address or host name", host)
	}
	return ""
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)

func checkOrigin(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Sprintf("must be an origin like \"https://chat.example.com\" (scheme, host and port only), not %q", s)
	}
	return ""
}
