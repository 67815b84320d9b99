package sessions

import (
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
)

// ToolSource is where the built-in session tools say they are defined.
const ToolSource = "built in ([sessions] enabled)"

// Tools are the session tools kind (the kind that keeps the sessions)
// declared in Describe (sdk.Info.SessionTools), as tool definitions for it
// to check and serve: each runs in its caller's session, its run table
// {"type": kind, "session": what it does}.
func Tools(kind string, declared []sdk.SessionTool) []config.Tool {
	out := make([]config.Tool, 0, len(declared))
	for _, t := range declared {
		params := make([]config.Param, len(t.Params))
		for i, p := range t.Params {
			params[i] = config.Param{Name: p.Name, Type: p.Type, Required: p.Required, Options: p.Options, Description: p.Description}
		}
		out = append(out, config.Tool{
			Name: t.Name, Description: t.Description, Effect: t.Effect, Params: params,
			Run:    map[string]any{"type": kind, "session": t.Session},
			Source: ToolSource,
		})
	}
	return out
}
