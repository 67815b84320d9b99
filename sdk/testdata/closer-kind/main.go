// Command closer-kind is a kind whose Close writes "closed" to the file
// named by CLOSER_KIND_FILE: the SDK's tests run it to see that Serve
// closes a kind however its plugin is stopped.
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/toolhost/toolhost/sdk"
)

type kind struct{}

func (kind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "closer", Version: "1", RunSchema: json.RawMessage(`{}`)}, nil
}
func (kind) Configure(context.Context, json.RawMessage) error { return nil }
func (kind) Check(_ context.Context, t sdk.Tool) (json.RawMessage, error) {
	return t.Run, nil
}
func (kind) Invoke(context.Context, sdk.Call, sdk.Emit) (json.RawMessage, error) {
	return json.RawMessage(`null`), nil
}

func (kind) Close(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		return os.WriteFile(os.Getenv("CLOSER_KIND_FILE"), []byte("closed without a deadline"), 0o600)
	}
	return os.WriteFile(os.Getenv("CLOSER_KIND_FILE"), []byte("closed"), 0o600)
}

func main() { sdk.Serve(kind{}) }
