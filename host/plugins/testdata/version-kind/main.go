// Command version-kind is a test plugin of the "version" kind whose
// Describe reports the version it was built with (-ldflags -X
// main.version=...), so a test can tell which of two builds is running.
package main

import (
	"context"
	"encoding/json"

	"github.com/toolhost/toolhost/sdk"
)

// version is set at build time.
var version = "unset"

type kind struct{}

func (kind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "version", Version: version, RunSchema: json.RawMessage(`{"type":"object"}`)}, nil
}

func (kind) Configure(context.Context, json.RawMessage) error { return nil }

func (kind) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) { return tool.Run, nil }

func (kind) Invoke(context.Context, sdk.Call, sdk.Emit) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"version": version})
}

func main() { sdk.Serve(kind{}) }
