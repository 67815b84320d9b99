package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// chain is a graph of an arg, count template nodes each reading the one
// before, and a return.
func chain(b testing.TB, count int) sdk.Tool {
	nodes := []n{{"id": "q", "type": "arg", "param": "q"}}
	prev := "q"
	for i := range count {
		id := fmt.Sprintf("t%d", i)
		nodes = append(nodes, n{"id": id, "type": "template", "text": "<{{" + prev + "}}>"})
		prev = id
	}
	nodes = append(nodes, n{"id": "out", "type": "return", "value": prev})
	return graphTool(b, []sdk.Param{text("q", true)}, nodes...)
}

// BenchmarkTemplateChain is the per-node cost of a graph run: 20 template
// nodes chained against one, run in process (Invoke as the SDK calls it)
// and through the plugin protocol (in-process gRPC, as sdktest serves
// it); and Check of the 20, which a run does once per tool (compiled
// graphs are kept). Per node: (chain20 - chain1) / 19.
func BenchmarkTemplateChain(b *testing.B) {
	for _, count := range []int{1, 20} {
		tool := chain(b, count)
		b.Run(fmt.Sprintf("invoke/chain%d", count), func(b *testing.B) {
			k := &kind{}
			call := sdk.Call{Tool: tool, Args: json.RawMessage(`{"q":"x"}`), RunID: "r"}
			for b.Loop() {
				if _, err := k.Invoke(context.Background(), call, func(sdk.Event) {}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("plugin/chain%d", count), func(b *testing.B) {
			c := sdktest.Start(b, &kind{}, nil)
			if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
				b.Fatal(err)
			}
			args := map[string]any{"q": "x"}
			for b.Loop() {
				if run := c.Invoke(context.Background(), tool, args); run.Err != nil {
					b.Fatal(run.Err)
				}
			}
		})
		b.Run(fmt.Sprintf("check/chain%d", count), func(b *testing.B) {
			k := &kind{}
			for b.Loop() {
				if _, err := k.Check(context.Background(), tool); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
