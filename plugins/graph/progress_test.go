package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
)

// TestNodeDoneProgressNamesTheNode: each call_tool and ask_model node
// that is done says so in a progress of unknown fraction whose node
// (protocol 2) is the node's id; its message names the node too, for a
// host of protocol 1, which does not see the node.
func TestNodeDoneProgressNamesTheNode(t *testing.T) {
	host := &fakeHost{
		call: func(context.Context, sdk.ToolCall) (sdk.ToolResult, error) {
			return sdk.ToolResult{Result: json.RawMessage(`"body"`)}, nil
		},
		ask: func(context.Context, sdk.ModelRequest) (sdk.ModelAnswer, error) {
			return sdk.ModelAnswer{Text: "short"}, nil
		},
	}
	c := serve(t, host, `{}`)
	tool := graphTool(t, nil,
		n{"id": "fetch", "type": "call_tool", "tool": "get_json"},
		n{"id": "sum", "type": "ask_model", "prompt": "fetch"},
		n{"id": "out", "type": "return", "value": "sum"})
	run := c.Invoke(testCtx(t), tool, map[string]any{})
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	var got []string
	for _, e := range run.Events {
		if e.Progress != nil {
			got = append(got, fmt.Sprintf("%s|%g|%s", e.Progress.Node, e.Progress.Fraction, e.Progress.Message))
		}
	}
	want := `fetch|-1|node "fetch" done sum|-1|node "sum" done`
	if strings.Join(got, " ") != want {
		t.Fatalf("progress events\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}
