package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/sdk"
)

// Config is the kind's [python] table as the host sends it (JSON, snake_case keys).
type Config struct {
	Runsc             string   `json:"runsc"`
	Rootfs            string   `json:"rootfs"`
	StateDir          string   `json:"state_dir"`
	Platform          string   `json:"platform"`
	SandboxPrefix     string   `json:"sandbox_prefix"`
	Packages          []string `json:"packages"`
	MaxMemoryMB       int      `json:"max_memory_mb"`
	MaxOutputBytes    int64    `json:"max_output_bytes"`
	ExtraAllowedCIDRs []string `json:"extra_allowed_cidrs"`
	Pids              int      `json:"pids"`
	TmpMB             int      `json:"tmp_mb"`
	WorkMB            int      `json:"work_mb"`
	// Pool is read by the pool of ready sandboxes (a later issue); accepted and kept meanwhile.
	Pool json.RawMessage `json:"pool"`

	extraCIDRs []netip.Prefix
}

// defaultConfig is what a setting left out takes.
func defaultConfig() Config {
	return Config{
		Runsc:          "/usr/local/bin/runsc",
		Rootfs:         "/var/lib/toolhost/rootfs",
		StateDir:       "/run/toolhost",
		Platform:       runsc.PlatformSystrap,
		SandboxPrefix:  runsc.DefaultPrefix,
		MaxMemoryMB:    1024,
		MaxOutputBytes: 1 << 20,
		Pids:           64,
		TmpMB:          64,
		WorkMB:         256,
	}
}

// parseConfig decodes the table over the defaults and checks every value.
func parseConfig(raw json.RawMessage) (Config, error) {
	cfg := defaultConfig()
	if len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, sdk.FieldErrors{{Path: "python", Message: fmt.Sprintf("the [python] table can't be read: %v", err)}}
		}
	}
	var fe sdk.FieldErrors
	bad := func(key, format string, args ...any) {
		fe = append(fe, sdk.FieldError{Path: "python." + key, Message: fmt.Sprintf(format, args...)})
	}
	for key, v := range map[string]string{"runsc": cfg.Runsc, "rootfs": cfg.Rootfs, "state_dir": cfg.StateDir} {
		if !strings.HasPrefix(v, "/") {
			bad(key, "must be an absolute path, not %q", v)
		}
	}
	if cfg.Platform != runsc.PlatformSystrap && cfg.Platform != runsc.PlatformPtrace && cfg.Platform != "kvm" {
		bad("platform", "must be \"systrap\", \"ptrace\" or \"kvm\", not %q", cfg.Platform)
	}
	if err := runsc.CheckPrefix(cfg.SandboxPrefix); err != nil {
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
	if cfg.TmpMB < 1 || cfg.TmpMB > 65536 {
		bad("tmp_mb", "must be from 1 to 65536, not %d", cfg.TmpMB)
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
	if len(fe) > 0 {
		return cfg, fe
	}
	return cfg, nil
}
