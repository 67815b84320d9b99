package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/sdk"
)

// config is the [graph] table of the host config, described by
// configSchema; parseConfig checks it.
type config struct {
	MaxNestedCalls int `json:"max_nested_calls"`
}

// configSchema is the JSON Schema of the [graph] table. A test checks it
// against parseConfig.
//
//go:embed config.schema.json
var configSchema string

// runSchema is the JSON Schema of a graph tool's run table.
//
//go:embed run.schema.json
var runSchema string

// Limits of the settings.
const (
	defaultMaxNestedCalls = 64
	maxMaxNestedCalls     = 1024
)

func defaultConfig() config { return config{MaxNestedCalls: defaultMaxNestedCalls} }

// parseConfig reads the [graph] table, given as a JSON object. Keys left
// out keep their defaults.
func parseConfig(raw json.RawMessage) (config, error) {
	cfg := defaultConfig()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return cfg, sdk.FieldErrors{{Path: "graph", Message: "must be a table of settings (max_nested_calls)"}}
	}
	var fe sdk.FieldErrors
	for _, k := range sortedKeys(m) {
		path := "graph." + k
		switch k {
		case "max_nested_calls":
			v := bytes.TrimSpace(m[k])
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 1 || n > maxMaxNestedCalls {
				fe = append(fe, sdk.FieldError{Path: path, Message: fmt.Sprintf("must be a whole number of calls from 1 to %d, not %s", maxMaxNestedCalls, clip(string(v), 40))})
				continue
			}
			cfg.MaxNestedCalls = int(n)
		default:
			fe = append(fe, sdk.FieldError{Path: path, Message: fmt.Sprintf("%q is not a setting of [graph]: the settings are %s", clip(k, 40), strings.Join(settingNames(), ", "))})
		}
	}
	if fe != nil {
		return cfg, fe
	}
	return cfg, nil
}

// settingNames are the settings of [graph], from configSchema.
func settingNames() []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal([]byte(configSchema), &s) // a test checks it is JSON
	return sortedKeys(s.Properties)
}
