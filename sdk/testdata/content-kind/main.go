// Command content-kind is a kind whose runs return an image beside their
// value: the SDK's tests run it under hosts of each protocol version to see
// that content reaches a host that reads it and fails the run, saying why,
// under one that doesn't.
package main

import (
	"context"
	"encoding/json"

	"github.com/toolhost/toolhost/sdk"
)

type kind struct{}

func (kind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "content", Version: "1", RunSchema: json.RawMessage(`{}`)}, nil
}
func (kind) Configure(context.Context, json.RawMessage) error { return nil }
func (kind) Check(_ context.Context, t sdk.Tool) (json.RawMessage, error) {
	return t.Run, nil
}
func (kind) Invoke(_ context.Context, _ sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	emit.Content(sdk.Content{Type: sdk.ContentImage, Data: []byte("\x89PNG\x00"), MIMEType: "image/png"})
	return json.RawMessage(`{"w":1}`), nil
}

func main() { sdk.Serve(kind{}) }
