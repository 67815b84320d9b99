package runs

import (
	"context"
	"fmt"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
)

// ForKind is the sdk.Host served to the plugin of one kind. Its nested
// calls (CallTool, AskModel) run with the rights of their parent run, so
// the parent must be a run the plugin is executing: one going on, of a
// tool of that kind. Any other ParentRunID (a run of another kind, whose
// id a plugin may have learned from a tool's arguments or output) is
// refused as an unknown run, so a plugin can't act as whoever started a
// run it does not execute. The Dispatcher's own CallTool and AskModel do
// not check this, and are for the host's own code.
func (d *Dispatcher) ForKind(kind string) sdk.Host {
	return &kindHost{d: d, kind: kind}
}

// kindHost is the Host of ForKind.
type kindHost struct {
	d    *Dispatcher
	kind string
}

func (h *kindHost) CallTool(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
	if refused := h.d.runsOfKind(req.ParentRunID, h.kind, "a call of "+req.Tool); refused != nil {
		return sdk.ToolResult{Error: refused}, nil
	}
	return h.d.CallTool(ctx, req)
}

func (h *kindHost) AskModel(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
	if refused := h.d.runsOfKind(req.ParentRunID, h.kind, "a question for the model"); refused != nil {
		return sdk.ModelAnswer{}, refused
	}
	return h.d.AskModel(ctx, req)
}

// runsOfKind says why a plugin of kind may not make a nested call (what)
// under the run named id, or nil when the run is one it executes.
func (d *Dispatcher) runsOfKind(id, kind, what string) *sdk.Error {
	d.mu.Lock()
	run, ok := d.runs[id]
	d.mu.Unlock()
	if ok && !run.Done() && run.kind == kind {
		return nil
	}
	if ok && run.kind != kind {
		// Not a mistake a kind makes by chance: say so to the operator.
		d.log.Warn("a plugin named a run of another kind as the parent of its nested call; refused",
			"plugin", kind, "run", id, "run_kind", run.kind, "call", what)
	}
	return &sdk.Error{Code: wire.CodeUnknownRun, Message: fmt.Sprintf(
		"%s must be made by a run that this plugin (the %s kind) is running, named by its id (the RunID of its invocation)", what, kind)}
}

var _ sdk.Host = (*kindHost)(nil)
