// Command toolhost-plugin-flaky is a test-only kind whose first check of
// each tool fails as if its sandbox had not started: the tool is fine, the
// kind just could not check it then. Tests use it to see the host check a
// tool again rather than drop it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/toolhost/toolhost/sdk"
)

type flaky struct {
	mu      sync.Mutex
	checked map[string]bool
}

func (*flaky) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "flaky", Version: "0.0.1"}, nil
}

func (*flaky) Configure(context.Context, json.RawMessage) error { return nil }

func (f *flaky) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.checked[tool.Name] {
		f.checked[tool.Name] = true
		return nil, errors.New("no sandbox could be started to check it")
	}
	return tool.Run, nil
}

func (*flaky) Invoke(context.Context, sdk.Call, sdk.Emit) (json.RawMessage, error) {
	return json.RawMessage(`"checked the second time"`), nil
}

func main() { sdk.Serve(&flaky{checked: map[string]bool{}}) }
