// Package config reads toolhost's configuration: the main toolhost.toml and
// the tool files, strictly (an unknown key, a wrong type or a bad value is an
// error at its file and line), with defaults filled in and paths resolved.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
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
	HTTP     HTTPConfig
	Python   PythonConfig
	Runs     RunsConfig
	Tokens   []Token
	Log      LogConfig
	// Kinds holds the [kinds.<name>] tables, given as-is to the plugin of
	// that kind. Values are as decoded: string, int64, float64, bool, time
	// values, []any, map[string]any.
	Kinds map[string]map[string]any
	// Tools are the [[tool]] tables of the main config, checked like tool
	// files.
	Tools []Tool
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
}

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

// HTTPConfig is [http], the http kind's settings.
type HTTPConfig struct {
	AllowPrivate   bool  // default false
	TimeoutSeconds int   // default 30, 1..600
	MaxBytes       int64 // default 10 MiB, 1..1 GiB
}

// PythonConfig is [python], the python kind's settings.
type PythonConfig struct {
	Runsc    string // absolute; default "/usr/local/bin/runsc"
	Rootfs   string // absolute; default "/var/lib/toolhost/rootfs"
	StateDir string // absolute; default "/run/toolhost" (runsc state and sandbox folders below it)
	Platform string // systrap (default), ptrace or kvm
	// SandboxPrefix starts the name of every sandbox, so leftovers can be
	// found and cleaned up; default "toolhost-".
	SandboxPrefix     string
	Packages          []string // Debian packages added to the rootfs; default none
	MaxMemoryMB       int      // default 1024, 16..65536
	MaxOutputBytes    int64    // default 1 MiB, 1 KiB..1 GiB
	ExtraAllowedCIDRs []string // test-only: extra destinations (any range, any port); loopback, link-local, multicast and the host's own addresses stay blocked; default none
	Pids              int      // default 64, 8..4096
	TmpMB             int      // default 64, 1..65536
	WorkMB            int      // default 256, 1..1048576
	Pool              PoolConfig
}

// PoolConfig is [python.pool]: sandboxes started ahead of need.
type PoolConfig struct {
	Size           int      // ready sandboxes kept per shape in use (network off, on); default 2, 0..Max; 0 turns the pool off
	Max            int      // sandboxes running at once, and the most kept ready when demand grows; default 16, 1..1024
	MaxIdleMinutes int      // how long demand is remembered: ready sandboxes above Size go after this long unneeded; default 10, 1..1440
	Preload        []string // Python modules every ready sandbox imports before its run; default none
}

// RunsConfig is [runs].
type RunsConfig struct {
	KeepMinutes int // how long a finished run's output is kept for reconnects; default 60, 1..10080
	// MaxRunningPerToken is how many runs one caller may have going at
	// once: each token without a max_running of its own, and the "local"
	// caller of a host with no tokens. Default 8, 1..1024.
	MaxRunningPerToken int
}

// Token is one [[tokens]] entry: a bearer token, stored as its SHA-256.
type Token struct {
	Name   string
	SHA256 string // 64 lowercase hex digits
	Role   string // admin, editor or viewer
	// MaxRunning is how many runs the token may have going at once; 0
	// (not set) means [runs] max_running_per_token.
	MaxRunning int
	Line       int // the [[tokens]] line
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

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// Default returns the configuration used when a file sets nothing.
func Default() *Config {
	return &Config{
		Server:  ServerConfig{Listen: "127.0.0.1:8080", StateDir: "/var/lib/toolhost"},
		Plugins: PluginsConfig{Dir: "/usr/lib/toolhost/plugins", SHA256: map[string]string{}, StartTimeoutSeconds: 10},
		HTTP:    HTTPConfig{TimeoutSeconds: 30, MaxBytes: 10 * mib},
		Python: PythonConfig{
			Runsc:          "/usr/local/bin/runsc",
			Rootfs:         "/var/lib/toolhost/rootfs",
			StateDir:       "/run/toolhost",
			Platform:       "systrap",
			SandboxPrefix:  "toolhost-",
			MaxMemoryMB:    1024,
			MaxOutputBytes: 1 * mib,
			Pids:           64,
			TmpMB:          64,
			WorkMB:         256,
			Pool:           PoolConfig{Size: 2, Max: 16, MaxIdleMinutes: 10},
		},
		Runs:  RunsConfig{KeepMinutes: 60, MaxRunningPerToken: 8},
		Log:   LogConfig{Level: "info", Format: "text"},
		Kinds: map[string]map[string]any{},
	}
}

// Load reads and checks the config file at path. When the file has problems
// the error is Errors, listing all of them; when it can't be read the error
// says so and wraps the cause.
func Load(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("can't find the config file %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, below
		}
		return nil, fmt.Errorf("can't read the config file %s: %w", path, err)
	}
	return parse(path, abs, data)
}

// Parse checks a config given as bytes. file names it in errors; relative
// paths in it are resolved against file's folder.
func Parse(file string, data []byte) (*Config, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("can't find the config file %s: %w", file, err)
	}
	return parse(file, abs, data)
}

func parse(file, abs string, data []byte) (*Config, error) {
	doc, errs := parseDocument(file, data)
	if errs != nil {
		return nil, errs
	}
	d := &decoder{doc: doc}
	c := Default()
	c.File = abs
	dir := filepath.Dir(abs)
	d.decodeConfig(c, dir)
	if c.Plugins.SHA256File != "" && !d.hasErrorAt("plugins.sha256_file") {
		d.errs = append(d.errs, loadPins(d.doc, c)...)
	}
	if err := errorsOrNil(d.errs); err != nil {
		return nil, err
	}
	return c, nil
}

func (d *decoder) hasErrorAt(field string) bool {
	return slices.ContainsFunc(d.errs, func(e Error) bool { return e.Field == field })
}

func (d *decoder) decodeConfig(c *Config, dir string) {
	top := d.table("", d.doc.root)

	if v, ok := top.get("server"); ok {
		t := d.table("server", v)
		if t.str("listen", &c.Server.Listen) {
			if msg := checkListen(c.Server.Listen); msg != "" {
				d.addf("server.listen", "%s", msg)
			}
		}
		if t.strings("allowed_origins", &c.Server.AllowedOrigins) {
			for i, o := range c.Server.AllowedOrigins {
				if msg := checkOrigin(o); msg != "" {
					d.addf(indexPath("server.allowed_origins", i), "%s", msg)
				}
			}
		}
		d.path(t, "state_dir", dir, &c.Server.StateDir, false)
		t.done()
	}

	if v, ok := top.get("plugins"); ok {
		t := d.table("plugins", v)
		d.path(t, "dir", dir, &c.Plugins.Dir, false)
		if pv, ok := t.get("sha256"); ok {
			pt := d.table("plugins.sha256", pv)
			d.pins(pt, c.Plugins.SHA256)
		}
		d.path(t, "sha256_file", dir, &c.Plugins.SHA256File, true)
		t.int("start_timeout_seconds", &c.Plugins.StartTimeoutSeconds, 1, 300)
		t.done()
	}

	d.path(top, "tools_dir", dir, &c.ToolsDir, true)

	if v, ok := top.get("http"); ok {
		t := d.table("http", v)
		t.boolean("allow_private", &c.HTTP.AllowPrivate)
		t.int("timeout_seconds", &c.HTTP.TimeoutSeconds, 1, 600)
		t.integer("max_bytes", &c.HTTP.MaxBytes, 1, gib)
		t.done()
	}

	if v, ok := top.get("python"); ok {
		d.decodePython(d.table("python", v), &c.Python, dir)
	}

	if v, ok := top.get("runs"); ok {
		t := d.table("runs", v)
		t.int("keep_minutes", &c.Runs.KeepMinutes, 1, 10080)
		t.int("max_running_per_token", &c.Runs.MaxRunningPerToken, 1, 1024)
		t.done()
	}

	if l, ok := top.tables("tokens"); ok {
		d.decodeTokens(l, c)
	}

	if v, ok := top.get("log"); ok {
		t := d.table("log", v)
		if t.str("level", &c.Log.Level) {
			d.oneOf("log.level", c.Log.Level, "trace", "debug", "info", "warn", "error")
		}
		if t.str("format", &c.Log.Format) {
			d.oneOf("log.format", c.Log.Format, "text", "json")
		}
		t.done()
	}

	if v, ok := top.get("kinds"); ok {
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
			case k == "http" || k == "python":
				d.addf(p, "the %s kind's settings go in [%s], not [kinds.%s]", k, k, k)
			case !nameRE.MatchString(k):
				d.addf(p, "%q is not a kind name: it %s", k, nameRule)
			default:
				m, ok := kv.(map[string]any)
				if !ok {
					d.addf(p, "must be a table, not %s", describe(kv))
					continue
				}
				c.Kinds[k] = m
			}
		}
	}

	if l, ok := top.tables("tool"); ok {
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

	top.done()
}

func (d *decoder) decodePython(t *table, py *PythonConfig, dir string) {
	d.path(t, "runsc", dir, &py.Runsc, false)
	d.path(t, "rootfs", dir, &py.Rootfs, false)
	d.path(t, "state_dir", dir, &py.StateDir, false)
	if t.str("platform", &py.Platform) {
		d.oneOf("python.platform", py.Platform, "systrap", "ptrace", "kvm")
	}
	if t.str("sandbox_prefix", &py.SandboxPrefix) && !sandboxPrefixRE.MatchString(py.SandboxPrefix) {
		d.addf("python.sandbox_prefix", "%q is not a good prefix: use 1 to 18 lowercase letters, digits, '-' or '_', starting with a letter", py.SandboxPrefix)
	}
	if t.strings("packages", &py.Packages) {
		for i, p := range py.Packages {
			if !debPackageRE.MatchString(p) {
				d.addf(indexPath("python.packages", i), "%q is not a Debian package name (like \"python3-numpy\")", p)
			}
		}
	}
	t.int("max_memory_mb", &py.MaxMemoryMB, 16, 65536)
	t.integer("max_output_bytes", &py.MaxOutputBytes, kib, gib)
	if t.strings("extra_allowed_cidrs", &py.ExtraAllowedCIDRs) {
		for i, s := range py.ExtraAllowedCIDRs {
			if msg := checkCIDR(s); msg != "" {
				d.addf(indexPath("python.extra_allowed_cidrs", i), "%s", msg)
			}
		}
	}
	t.int("pids", &py.Pids, 8, 4096)
	t.int("tmp_mb", &py.TmpMB, 1, 65536)
	t.int("work_mb", &py.WorkMB, 1, 1048576)
	if v, ok := t.get("pool"); ok {
		pt := d.table("python.pool", v)
		maxSet := pt.int("max", &py.Pool.Max, 1, 1024)
		sizeSet := pt.int("size", &py.Pool.Size, 0, 1024)
		pt.int("max_idle_minutes", &py.Pool.MaxIdleMinutes, 1, 1440)
		if pt.strings("preload", &py.Pool.Preload) {
			for i, m := range py.Pool.Preload {
				if !pyModuleRE.MatchString(m) {
					d.addf(indexPath("python.pool.preload", i), "%q is not a Python module name (like \"numpy\" or \"xml.etree\")", m)
				}
			}
		}
		pt.done()
		switch {
		case py.Pool.Size <= py.Pool.Max:
		case sizeSet:
			d.addf("python.pool.size", "must be at most python.pool.max (%d), not %d", py.Pool.Max, py.Pool.Size)
		case maxSet:
			d.addf("python.pool.max", "must be at least python.pool.size (%d, the default), not %d", py.Pool.Size, py.Pool.Max)
		}
	}
	t.done()
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
	hexRE           = regexp.MustCompile(`^[0-9a-f]{64}$`)
	sandboxPrefixRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,17}$`)
	pyModuleRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	debPackageRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
)

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

func checkCIDR(s string) string {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Sprintf("%q is not an address range like \"203.0.113.0/24\"", s)
	}
	if p.Masked() != p {
		return fmt.Sprintf("%q has bits set past its prefix length; write %q", s, p.Masked().String())
	}
	return ""
}

// KindConfig returns the settings table a kind's plugin is given: for "http"
// and "python" their tables with every key (snake_case, as in the file) and
// defaults filled in; for any other kind its [kinds.<kind>] table as written,
// or nil. Numbers are int64 and lists []any, as if decoded from TOML. The
// maps returned for http and python are new; the others are the config's own
// and must not be changed.
func (c *Config) KindConfig(kind string) map[string]any {
	switch kind {
	case "http":
		return map[string]any{
			"allow_private":   c.HTTP.AllowPrivate,
			"timeout_seconds": int64(c.HTTP.TimeoutSeconds),
			"max_bytes":       c.HTTP.MaxBytes,
		}
	case "python":
		py := c.Python
		return map[string]any{
			"runsc":               py.Runsc,
			"rootfs":              py.Rootfs,
			"state_dir":           py.StateDir,
			"platform":            py.Platform,
			"sandbox_prefix":      py.SandboxPrefix,
			"packages":            anyList(py.Packages),
			"max_memory_mb":       int64(py.MaxMemoryMB),
			"max_output_bytes":    py.MaxOutputBytes,
			"extra_allowed_cidrs": anyList(py.ExtraAllowedCIDRs),
			"pids":                int64(py.Pids),
			"tmp_mb":              int64(py.TmpMB),
			"work_mb":             int64(py.WorkMB),
			"pool": map[string]any{
				"size":             int64(py.Pool.Size),
				"max":              int64(py.Pool.Max),
				"max_idle_minutes": int64(py.Pool.MaxIdleMinutes),
				"preload":          anyList(py.Pool.Preload),
			},
		}
	}
	return c.Kinds[kind]
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
