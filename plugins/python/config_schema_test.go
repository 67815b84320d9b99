package main

import (
	"encoding/json"
	"testing"

	"github.com/toolhost/toolhost/sdk/sdktest"
)

// TestConfigSchemaMatchesParseConfig: the schema the host reads and the checks of Configure agree.
func TestConfigSchemaMatchesParseConfig(t *testing.T) {
	sdktest.CheckConfigSchema(t, "python", json.RawMessage(configSchema), func(raw json.RawMessage) error {
		_, err := parseConfig(raw)
		return err
	})
}
