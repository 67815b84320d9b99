package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	hostconfig "github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
)

// loadTool reads a tool file as the host does and gives it as the kinds
// see it.
func loadTool(t *testing.T, path string) sdk.Tool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := hostconfig.ParseTool(path, data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	run, err := json.Marshal(ct.Run)
	if err != nil {
		t.Fatal(err)
	}
	tool := sdk.Tool{Name: ct.Name, Description: ct.Description, Effect: ct.Effect, Run: run, Source: ct.Source}
	for _, p := range ct.Params {
		tool.Params = append(tool.Params, sdk.Param{Name: p.Name, Type: p.Type, Required: p.Required, Options: p.Options, Description: p.Description})
	}
	return tool
}

// TestExampleGraph: testdata/summarise_post.toml, the graph proposed for
// examples/tools, passes Check against the example tools as they are, and
// runs: get_json, then word_count and the model at once, the answer and
// the word count joined.
func TestExampleGraph(t *testing.T) {
	paths, _ := filepath.Glob("../../examples/tools/*.toml")
	var catalog []sdk.Tool
	for _, p := range paths {
		catalog = append(catalog, loadTool(t, p))
	}
	tool := loadTool(t, "testdata/summarise_post.toml")
	catalog = append(catalog, tool)
	k := &kind{}
	run, err := k.CheckWithCatalog(context.Background(), tool, catalog)
	if err != nil {
		t.Fatalf("the example graph does not check against examples/tools: %v", err)
	}
	tool.Run = run

	// word_count and the model each wait for the other: they run at once.
	var arrived atomic.Int32
	both := make(chan struct{})
	barrier := func(ctx context.Context) error {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	host := &fakeHost{
		call: func(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
			switch req.Tool {
			case "get_json":
				if string(req.Args) != `{"id":3,"resource":"posts"}` {
					t.Errorf("get_json called with %s", req.Args)
				}
				return sdk.ToolResult{Result: json.RawMessage(`{"status":200,"headers":{},"body":{"id":3,"title":"t","body":"one two three four"}}`)}, nil
			case "word_count":
				if err := barrier(ctx); err != nil {
					return sdk.ToolResult{}, err
				}
				req.OnEvent(sdk.Event{Stdout: []byte("counting\n")})
				return sdk.ToolResult{Result: json.RawMessage(`{"words":4}`)}, nil
			}
			return sdk.ToolResult{Error: &sdk.Error{Code: "unknown_tool", Message: req.Tool}}, nil
		},
		ask: func(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
			if err := barrier(ctx); err != nil {
				return sdk.ModelAnswer{}, err
			}
			req.OnText("Four words.")
			return sdk.ModelAnswer{Text: "Four words."}, nil
		},
	}
	c := serve(t, host, `{}`)
	got := c.Invoke(testCtx(t), tool, map[string]any{"id": 3})
	if got.Err != nil || string(got.Result) != `"Four words. (4 words)"` {
		t.Fatalf("got %s, %v", got.Result, got.Err)
	}
	var marked []string
	for _, e := range got.Events {
		if e.Stdout != nil {
			marked = append(marked, e.Node+": "+strings.TrimSpace(string(e.Stdout)))
		}
	}
	if strings.Join(marked, "|") != "count: counting|summary: Four words." && strings.Join(marked, "|") != "summary: Four words.|count: counting" {
		t.Fatalf("stdout: %q", marked)
	}
}
