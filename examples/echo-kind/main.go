// Command toolhost-plugin-echo is a complete third-party tool kind written
// with the toolhost SDK: a tool of kind "echo" prints a line for each of
// its arguments, one every `delay_ms`, and returns them. It is the example
// in sdk/README.md, and the integration tests use it to watch output
// stream.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// run is the echo kind's run table.
type run struct {
	Type    string `json:"type"`
	Prefix  string `json:"prefix"`
	DelayMS int    `json:"delay_ms"`
}

type echo struct{}

func (echo) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "echo", Version: "1.0.0", RunSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "type": {"const": "echo"},
    "prefix": {"type": "string", "description": "printed before each line"},
    "delay_ms": {"type": "integer", "minimum": 0, "maximum": 10000, "description": "pause before each line"}
  },
  "additionalProperties": false
}`)}, nil
}

func (echo) Configure(context.Context, json.RawMessage) error { return nil }

func (echo) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(tool.Run, &fields); err != nil {
		return nil, sdk.FieldErrors{{Path: "run", Message: "must be a table"}}
	}
	var errs sdk.FieldErrors
	for key := range fields {
		if key != "type" && key != "prefix" && key != "delay_ms" {
			errs = append(errs, sdk.FieldError{Path: "run." + key, Message: "is not a setting of an echo tool (it has prefix and delay_ms)"})
		}
	}
	var r run
	if err := json.Unmarshal(tool.Run, &r); err != nil {
		errs = append(errs, sdk.FieldError{Path: "run", Message: "prefix is text and delay_ms a whole number: " + err.Error()})
	} else if r.DelayMS < 0 || r.DelayMS > 10000 {
		errs = append(errs, sdk.FieldError{Path: "run.delay_ms", Message: "must be from 0 to 10000 milliseconds"})
	}
	if errs != nil {
		return nil, errs
	}
	return json.Marshal(r)
}

func (echo) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	var r run
	if err := json.Unmarshal(call.Tool.Run, &r); err != nil {
		return nil, err
	}
	var args map[string]any
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		select {
		case <-time.After(time.Duration(r.DelayMS) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		value, ok := args[name].(string)
		if !ok {
			b, _ := json.Marshal(args[name])
			value = string(b)
		}
		emit.Stdout(fmt.Appendf(nil, "%s%s=%s\n", r.Prefix, name, value))
	}
	return json.Marshal(map[string]any{"echoed": args})
}

func main() { sdk.Serve(echo{}) }
