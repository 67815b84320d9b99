// Command toolhost-plugin-nested is a test-only kind whose runs call another
// tool through the host (HostService, over go-plugin's broker), the way a
// graph of tools does. Tests use it to see a nested call answered whenever
// it comes: at once, after the host sat idle, after the plugin was killed
// and restarted, after a reload.
//
// A tool of kind "nested" names the tool to call and the arguments to pass:
//
//	name = "nest"
//	description = "Calls say through the host."
//	[run]
//	type = "nested"
//	tool = "say"                 # the tool called, required
//	args = { word = "hello" }    # its arguments (default {})
//
// The nested tool's arguments are run.args with the call's own arguments
// laid over them, so a tool of this kind may declare params and pass them
// on. A run prints what the nested tool printed (once it has ended) and
// returns the nested tool's result, or ends with the nested tool's error.
// When the host can't be reached the run fails with code "host_unreachable".
package main

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/toolhost/toolhost/sdk"
)

// run is the nested kind's run table.
type run struct {
	Type string         `json:"type"`
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

type nested struct{}

func (nested) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "nested", Version: "0.0.1", RunSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "type": {"const": "nested"},
    "tool": {"type": "string", "description": "the tool called through the host"},
    "args": {"type": "object", "description": "its arguments"}
  },
  "required": ["tool"],
  "additionalProperties": false
}`)}, nil
}

func (nested) Configure(context.Context, json.RawMessage) error { return nil }

func (nested) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(tool.Run, &fields); err != nil {
		return nil, sdk.FieldErrors{{Path: "run", Message: "must be a table"}}
	}
	var errs sdk.FieldErrors
	for key := range fields {
		if key != "type" && key != "tool" && key != "args" {
			errs = append(errs, sdk.FieldError{Path: "run." + key, Message: "is not a setting of a nested tool (it has tool and args)"})
		}
	}
	var r run
	if err := json.Unmarshal(tool.Run, &r); err != nil {
		errs = append(errs, sdk.FieldError{Path: "run", Message: "tool is text and args a table: " + err.Error()})
	} else if r.Tool == "" {
		errs = append(errs, sdk.FieldError{Path: "run.tool", Message: "is required: the name of the tool to call"})
	}
	if errs != nil {
		return nil, errs
	}
	if r.Args == nil {
		r.Args = map[string]any{}
	}
	return json.Marshal(r)
}

func (nested) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	var r run
	if err := json.Unmarshal(call.Tool.Run, &r); err != nil {
		return nil, err
	}
	var own map[string]any
	if err := json.Unmarshal(call.Args, &own); err != nil {
		return nil, err
	}
	args := map[string]any{}
	maps.Copy(args, r.Args)
	maps.Copy(args, own)
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	res, err := call.Host.CallTool(ctx, sdk.ToolCall{ParentRunID: call.RunID, Tool: r.Tool, Args: raw})
	if err != nil {
		return nil, sdk.Errorf("host_unreachable", "%s could not call %s through the host: %v", call.Tool.Name, r.Tool, err)
	}
	if res.Printed != "" {
		emit.Stdout([]byte(res.Printed))
	}
	if res.Error != nil {
		return nil, res.Error
	}
	return res.Result, nil
}

func main() { sdk.Serve(nested{}) }
