package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/toolhost/toolhost/plugins/python/session"
	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/rootfs"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
)

// configSchema is the JSON Schema of the [python] table, served through Describe: every setting,
// its default and range, and which are paths (the host resolves those against the config file's
// folder). A test checks it against parseConfig; config/example_test.go checks that
// examples/toolhost.toml documents every setting.
//
//go:embed config.schema.json
var configSchema string

// Config is the kind's [python] table as the host sends it (JSON, snake_case keys).
type Config struct {
	Runsc  string `json:"runsc"`
	Rootfs string `json:"rootfs"`
	// SessionRootfs is the root filesystem of the conversation sandboxes: the rootfs's
	// packages and SessionPackages (the scientific stack by default). One-shot tool runs keep
	// Rootfs. Left out, it is Rootfs's folder with "-sessions" added (rootfs.SessionDirFor).
	SessionRootfs string `json:"session_rootfs"`
	StateDir      string `json:"state_dir"`
	SessionsDir   string `json:"sessions_dir"`
	// SessionsKeepFreeMB is the room on sessions_dir's filesystem that session disks never take.
	SessionsKeepFreeMB int `json:"sessions_keep_free_mb"`
	// SessionCheckpoints: a conversation sandbox that stops while idle (or for a restart) is
	// checkpointed to sessions_dir and resumed with its interpreter's names at its next run.
	SessionCheckpoints bool     `json:"session_checkpoints"`
	Platform           string   `json:"platform"`
	SandboxPrefix      string   `json:"sandbox_prefix"`
	Packages           []string `json:"packages"`
	// SessionPackages are the Debian packages the session rootfs has besides Packages.
	SessionPackages   []string `json:"session_packages"`
	MaxMemoryMB       int      `json:"max_memory_mb"`
	MaxOutputBytes    int64    `json:"max_output_bytes"`
	ExtraAllowedCIDRs []string `json:"extra_allowed_cidrs"`
	Pids              int      `json:"pids"`
	// CheckSeconds is the CPU seconds (and one more on the clock) a tool's check may take.
	CheckSeconds int `json:"check_seconds"`
	TmpMB        int `json:"tmp_mb"`
	WorkMB       int `json:"work_mb"`
	// Pool is [python.pool]: the ready sandboxes (see poolConfig).
	Pool json.RawMessage `json:"pool"`

	extraCIDRs []netip.Prefix
	pool       poolConfig
}

// poolConfig is [python.pool].
type poolConfig struct {
	// Size is how many ready sandboxes are kept of each shape in use (network off, network on);
	// 0 turns the pool off.
	Size int `json:"size"`
	// Max is how many sandboxes may run at once: tool runs, ready sandboxes and conversation
	// sandboxes together (sandbox.Places).
	Max int `json:"max"`
	// MaxIdleMinutes is how long demand is remembered: ready sandboxes above Size go after this
	// long without need, and the network shape keeps none once unused this long.
	MaxIdleMinutes int `json:"max_idle_minutes"`
	// Preload are Python modules every ready sandbox imports before its run (e.g. "numpy").
	Preload []string `json:"preload"`
	// ReadySessions is how many sandboxes are kept started ahead for new conversations, each on
	// a blank disk of its own with its interpreter started (session.Options.Ready); 0 turns
	// them off.
	ReadySessions int `json:"ready_sessions"`
}

// defaultPoolMax is [python.pool] max when left out.
const defaultPoolMax = 16

var moduleRx = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// defaultConfig is what a setting left out takes.
func defaultConfig() Config {
	return Config{
		Runsc:              "/usr/local/bin/runsc",
		Rootfs:             rootfs.DefaultDir,
		SessionPackages:    slices.Clone(rootfs.DefaultSessionPackages),
		StateDir:           "/run/toolhost",
		SessionsDir:        "/var/lib/toolhost/sessions",
		SessionsKeepFreeMB: session.DefaultKeepFreeMB,
		SessionCheckpoints: true,
		Platform:           runsc.PlatformSystrap,
		SandboxPrefix:      sandbox.DefaultPrefix,
		MaxMemoryMB:        1024,
		MaxOutputBytes:     1 << 20,
		Pids:               64,
		CheckSeconds:       defaultCheckSeconds,
		TmpMB:              64,
		WorkMB:             256,
	}
}

// parseConfig decodes the table over the defaults and checks every value.
func parseConfig(raw json.RawMessage) (Config, error) {
	cfg := defaultConfig()
	if fe := unknownSettings(raw); fe != nil {
		return cfg, fe
	}
	if len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, sdk.FieldErrors{{Path: "python", Message: fmt.Sprintf("the [python] table can't be read: %v", err)}}
		}
	}
	if cfg.SessionRootfs == "" {
		cfg.SessionRootfs = rootfs.SessionDirFor(cfg.Rootfs)
	}
	var fe sdk.FieldErrors
	bad := func(key, format string, args ...any) {
		fe = append(fe, sdk.FieldError{Path: "python." + key, Message: fmt.Sprintf(format, args...)})
	}
	for key, v := range map[string]string{"runsc": cfg.Runsc, "rootfs": cfg.Rootfs, "session_rootfs": cfg.SessionRootfs,
		"state_dir": cfg.StateDir, "sessions_dir": cfg.SessionsDir} {
		if !strings.HasPrefix(v, "/") {
			bad(key, "must be an absolute path, not %q", v)
		}
	}
	if cfg.SessionRootfs == cfg.Rootfs && cfg.Rootfs != "" {
		bad("session_rootfs", "must be another folder than rootfs (%s): the conversation sandboxes' rootfs is built with more packages", cfg.Rootfs)
	}
	for key, list := range map[string][]string{"packages": cfg.Packages, "session_packages": cfg.SessionPackages} {
		for i, p := range list {
			if !rootfs.IsPackageName(p) {
				bad(fmt.Sprintf("%s[%d]", key, i), "%q is not a Debian package name like \"python3-numpy\"", p)
			}
		}
	}
	if cfg.Platform != runsc.PlatformSystrap && cfg.Platform != runsc.PlatformPtrace && cfg.Platform != "kvm" {
		bad("platform", "must be \"systrap\", \"ptrace\" or \"kvm\", not %q", cfg.Platform)
	}
	if err := sandbox.CheckPrefix(cfg.SandboxPrefix); err != nil {
		bad("sandbox_prefix", "%v", err)
	}
	if cfg.MaxMemoryMB < minMemoryMB || cfg.MaxMemoryMB > 65536 {
		bad("max_memory_mb", "must be from %d to 65536, not %d", minMemoryMB, cfg.MaxMemoryMB)
	}
	if cfg.MaxOutputBytes < 1024 || cfg.MaxOutputBytes > 1<<30 {
		bad("max_output_bytes", "must be from 1024 to 1073741824, not %d", cfg.MaxOutputBytes)
	}
	if cfg.Pids < 8 || cfg.Pids > 4096 {
		bad("pids", "must be from 8 to 4096, not %d", cfg.Pids)
	}
	if cfg.CheckSeconds < 1 || cfg.CheckSeconds > 300 {
		bad("check_seconds", "must be from 1 to 300, not %d", cfg.CheckSeconds)
	}
	if cfg.TmpMB < 1 || cfg.TmpMB > 65536 {
		bad("tmp_mb", "must be from 1 to 65536, not %d", cfg.TmpMB)
	}
	if cfg.SessionsKeepFreeMB < 0 || cfg.SessionsKeepFreeMB > 1048576 {
		bad("sessions_keep_free_mb", "must be from 0 to 1048576, not %d", cfg.SessionsKeepFreeMB)
	}
	if cfg.WorkMB < 1 || cfg.WorkMB > 1048576 {
		bad("work_mb", "must be from 1 to 1048576, not %d", cfg.WorkMB)
	}
	for i, s := range cfg.ExtraAllowedCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p {
			bad(fmt.Sprintf("extra_allowed_cidrs[%d]", i), "%q is not an address range like \"203.0.113.0/24\"", s)
			continue
		}
		cfg.extraCIDRs = append(cfg.extraCIDRs, p)
	}
	cfg.pool = poolConfig{Size: 2, Max: defaultPoolMax, MaxIdleMinutes: 10, ReadySessions: 1}
	if len(cfg.Pool) > 0 && string(cfg.Pool) != "null" {
		dec := json.NewDecoder(strings.NewReader(string(cfg.Pool)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg.pool); err != nil {
			bad("pool", "the [python.pool] table can't be read: %v", err)
		}
	}
	switch p := cfg.pool; {
	case p.Max < 1 || p.Max > 1024:
		bad("pool.max", "must be from 1 to 1024, not %d", p.Max)
	case p.Size < 0 || p.Size > p.Max:
		bad("pool.size", "must be from 0 to python.pool.max (%d), not %d", p.Max, p.Size)
	case p.MaxIdleMinutes < 1 || p.MaxIdleMinutes > 1440:
		bad("pool.max_idle_minutes", "must be from 1 to 1440, not %d", p.MaxIdleMinutes)
	case p.ReadySessions < 0 || p.ReadySessions > p.Max:
		bad("pool.ready_sessions", "must be from 0 to python.pool.max (%d), not %d", p.Max, p.ReadySessions)
	}
	for i, m := range cfg.pool.Preload {
		if !moduleRx.MatchString(m) {
			bad(fmt.Sprintf("pool.preload[%d]", i), "%q is not a Python module name like \"numpy\" or \"xml.etree\"", m)
		}
	}
	if len(fe) > 0 {
		return cfg, fe
	}
	return cfg, nil
}

// unknownSettings reports the keys of the table, and of its pool table, that configSchema does
// not list, naming the settings there are.
func unknownSettings(raw json.RawMessage) sdk.FieldErrors {
	var schema struct {
		Properties map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"properties"`
	}
	_ = json.Unmarshal([]byte(configSchema), &schema) // a test checks it is JSON
	var table map[string]json.RawMessage
	if json.Unmarshal(raw, &table) != nil {
		return nil // the decoder says what is wrong
	}
	var fe sdk.FieldErrors
	check := func(path string, m map[string]json.RawMessage, known []string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(known, k) {
				fe = append(fe, sdk.FieldError{Path: path + "." + k,
					Message: fmt.Sprintf("is not a setting of [%s]: the settings are %s", path, strings.Join(known, ", "))})
			}
		}
	}
	check("python", table, slices.Sorted(maps.Keys(schema.Properties)))
	var pool map[string]json.RawMessage
	if json.Unmarshal(table["pool"], &pool) == nil {
		check("python.pool", pool, slices.Sorted(maps.Keys(schema.Properties["pool"].Properties)))
	}
	return fe
}
