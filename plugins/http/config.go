package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/sdk"
)

// config is the [http] table of the host config. Its settings are
// described by configSchema, which the host reads (see docs/plugins.md);
// parseConfig checks them.
type config struct {
	AllowPrivate   bool  `json:"allow_private"`
	TimeoutSeconds int   `json:"timeout_seconds"`
	MaxBytes       int64 `json:"max_bytes"`
	MaxRunning     int   `json:"max_running"`
}

// configSchema is the JSON Schema of the [http] table: every setting, its
// default and its range. A test checks it against parseConfig; the host's
// example test checks examples/toolhost.toml documents every setting.
//
//go:embed config.schema.json
var configSchema string

// Limits of the settings.
const (
	defaultTimeoutSeconds = 30
	maxTimeoutSeconds     = 600
	defaultMaxBytes       = 10 << 20
	maxMaxBytes           = 1 << 30
)

func defaultConfig() config {
	return config{TimeoutSeconds: defaultTimeoutSeconds, MaxBytes: defaultMaxBytes, MaxRunning: 32}
}

// parseConfig reads the [http] table, given as a JSON object. Keys left
// out keep their defaults.
func parseConfig(raw json.RawMessage) (config, error) {
	cfg := defaultConfig()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return cfg, sdk.FieldErrors{{Path: "http", Message: "must be a table of settings (" + strings.Join(settingNames(), ", ") + ")"}}
	}
	var fe sdk.FieldErrors
	for _, k := range sortedKeys(m) {
		v := m[k]
		path := "http." + k
		switch k {
		case "allow_private":
			if err := json.Unmarshal(v, &cfg.AllowPrivate); err != nil || string(bytes.TrimSpace(v)) == "null" {
				addf(&fe, path, "must be true or false")
			}
		case "timeout_seconds":
			n, msg := wholeNumber(v, "seconds", 1, maxTimeoutSeconds)
			if msg != "" {
				addf(&fe, path, "%s", msg)
				continue
			}
			cfg.TimeoutSeconds = int(n)
		case "max_bytes":
			n, msg := wholeNumber(v, "bytes", 1, maxMaxBytes)
			if msg != "" {
				addf(&fe, path, "%s", msg)
				continue
			}
			cfg.MaxBytes = n
		case "max_running":
			n, msg := wholeNumber(v, "runs", 1, 1024)
			if msg != "" {
				addf(&fe, path, "%s", msg)
				continue
			}
			cfg.MaxRunning = int(n)
		default:
			addf(&fe, path, "is not a setting of [http]: the settings are %s", strings.Join(settingNames(), ", "))
		}
	}
	if fe != nil {
		return cfg, fe
	}
	return cfg, nil
}

// settingNames are the settings of [http], from configSchema.
func settingNames() []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal([]byte(configSchema), &s) // a test checks it is JSON
	return sortedKeys(s.Properties)
}

// wholeNumber reads a JSON integer from lo to hi, or says what it must be.
func wholeNumber(v json.RawMessage, unit string, lo, hi int64) (int64, string) {
	msg := fmt.Sprintf("must be a whole number of %s from %d to %d, not %s", unit, lo, hi, clip(string(bytes.TrimSpace(v)), 40))
	v = bytes.TrimSpace(v)
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, msg
	}
	var num json.Number
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&num); err != nil {
		return 0, msg
	}
	n, err := strconv.ParseInt(num.String(), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, msg
	}
	return n, ""
}

// addf adds a field error.
func addf(fe *sdk.FieldErrors, path, format string, a ...any) {
	*fe = append(*fe, sdk.FieldError{Path: path, Message: fmt.Sprintf(format, a...)})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
