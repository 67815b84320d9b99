// Command toolhost-plugin-latency is a tool kind for measuring: a tool of
// kind "latency" prints `lines` lines, one every `every_ms`, each holding
// the time it was printed in Unix nanoseconds, so a client can tell how
// long a printed line took to reach it. The integration benchmark
// BenchmarkPrintToFrameThroughPlugin builds and uses it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

type latency struct{}

func (latency) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "latency", Version: "1.0.0", RunSchema: json.RawMessage(`{"type":"object","properties":{"type":{"const":"latency"}}}`)}, nil
}

func (latency) Configure(context.Context, json.RawMessage) error { return nil }

func (latency) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	return tool.Run, nil
}

func (latency) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	var a struct {
		Lines   int `json:"lines"`
		EveryMS int `json:"every_ms"`
	}
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return nil, err
	}
	for range a.Lines {
		select {
		case <-time.After(time.Duration(a.EveryMS) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		emit.Stdout(fmt.Appendf(nil, "%d\n", time.Now().UnixNano()))
	}
	return json.Marshal(a.Lines)
}

func main() { sdk.Serve(latency{}) }
