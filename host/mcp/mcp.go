// Package mcp serves the host's tools to MCP clients at /mcp, over the
// Model Context Protocol's streamable HTTP transport (the official Go
// SDK), stateless: every request is served on its own, so any replica of
// the host can serve any request. tools/list gives the tools the caller
// is shown by GET /api/v1/tools, and tools/call runs one through the same
// dispatcher as every other call, as the caller, with its checks, limits
// and approvals; printed output comes as progress notifications when the
// client asks for progress. The API signs the caller in before a request
// gets here.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/go-hclog"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Path is where the API serves MCP.
const Path = "/mcp"

// TypeApprovalRequired is the event of a run that waits for a person to
// approve it.
const TypeApprovalRequired = "approval_required"

// Meta keys a tools/call may carry in its _meta: the conversation sandbox
// to run in and the call's idempotency key. The Toolhost-Session and
// Idempotency-Key headers of the HTTP request are used when they are not.
const (
	MetaSession        = "toolhost/session"
	MetaIdempotencyKey = "toolhost/idempotency_key"
	// MetaRun is the run's id, in the _meta of a tools/call result.
	MetaRun = "toolhost/run"
)

// maxArgs bounds a call's arguments, as everywhere; maxBody a request's
// body, with room for the JSON-RPC around them.
const (
	maxArgs = 1 << 20
	maxBody = maxArgs + 64<<10
)

// Options wire the MCP endpoint to the rest of the host.
type Options struct {
	Dispatcher *runs.Dispatcher
	// Tools are the tools a caller is shown: the specs of GET
	// /api/v1/tools for that caller.
	Tools func(auth.Identity) []tools.FunctionSpec
	// Version is the host's version, told to clients on initialize.
	Version string
	Logger  hclog.Logger
}

// Handler serves MCP for callers the API has signed in.
type Handler struct {
	opts Options
	http *sdkmcp.StreamableHTTPHandler
}

type identityKey struct{}

// New returns the MCP handler.
func New(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	h := &Handler{opts: opts}
	h.http = sdkmcp.NewStreamableHTTPHandler(h.server, &sdkmcp.StreamableHTTPOptions{
		Stateless: true,
		// The API refuses requests for other host names when it serves
		// this machine only (no tokens), and needs a token otherwise; the
		// SDK's own check would refuse a host behind a proxy on loopback.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxBody,
		// A client that goes away cancels its call's run, as over HTTP.
		PropagateRequestCancellation: true,
	})
	return h
}

// SignedOut is the cause the API ends a request's context with when a
// change of tokens takes its caller's sign-in away mid-call: the call ends,
// and its run goes on.
type SignedOut struct{ Message string }

func (e SignedOut) Error() string { return e.Message }

// Serve serves one MCP request of the caller id, signed in by the API.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	h.http.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
}

// server is the MCP server of one request: it knows its caller. It holds
// nothing between requests.
func (h *Handler) server(r *http.Request) *sdkmcp.Server {
	id, ok := r.Context().Value(identityKey{}).(auth.Identity)
	if !ok {
		return nil // not signed in: the SDK answers 400
	}
	s := sdkmcp.NewServer(&sdkmcp.Implementation{Name: "toolhost", Version: h.opts.Version}, &sdkmcp.ServerOptions{
		Capabilities: &sdkmcp.ServerCapabilities{Tools: &sdkmcp.ToolCapabilities{}},
	})
	s.AddReceivingMiddleware(func(next sdkmcp.MethodHandler) sdkmcp.MethodHandler {
		return func(ctx context.Context, method string, req sdkmcp.Request) (sdkmcp.Result, error) {
			switch method {
			case "tools/list":
				return &sdkmcp.ListToolsResult{Tools: h.list(id)}, nil
			case "tools/call":
				if call, ok := req.(*sdkmcp.CallToolRequest); ok {
					return h.call(ctx, id, call)
				}
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// list is the caller's tools as MCP tools: the spec's parameters as the
// input schema, the effect as hints.
func (h *Handler) list(id auth.Identity) []*sdkmcp.Tool {
	specs := h.opts.Tools(id)
	out := make([]*sdkmcp.Tool, 0, len(specs))
	for _, s := range specs {
		out = append(out, Tool(s))
	}
	return out
}

// Tool is a tool's spec as an MCP tool: a "read" tool is read-only, a
// "change" tool destructive.
func Tool(s tools.FunctionSpec) *sdkmcp.Tool {
	t := &sdkmcp.Tool{Name: s.Function.Name, Description: s.Function.Description, InputSchema: s.Function.Parameters}
	switch s.Effect {
	case "read":
		t.Annotations = &sdkmcp.ToolAnnotations{ReadOnlyHint: true}
	case "change":
		yes := true
		t.Annotations = &sdkmcp.ToolAnnotations{DestructiveHint: &yes}
	}
	return t
}

// call runs a tool for the caller and answers with its result; a call
// refused or a run that fails answers with isError and the error's code
// and message, for the model to read.
func (h *Handler) call(ctx context.Context, id auth.Identity, req *sdkmcp.CallToolRequest) (*sdkmcp.CallToolResult, error) {
	p := req.Params
	if !id.CanCall() {
		return failed("", &errcode.Error{Code: errcode.Forbidden, Message: fmt.Sprintf("%s is a %s and may not run tools", id.Name, id.Role)}), nil
	}
	if !h.shown(id, p.Name) {
		// Hidden tools are unknown to this caller, as in tools/list.
		return failed("", &errcode.Error{Code: errcode.UnknownTool, Message: fmt.Sprintf("there is no tool named %q (tools/list lists the tools)", p.Name)}), nil
	}
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if len(args) > maxArgs {
		return failed("", &errcode.Error{Code: "too_large", Message: "the arguments must be at most 1 MiB of JSON"}), nil
	}
	var header http.Header
	if req.Extra != nil {
		header = req.Extra.Header
	}
	run, err := h.opts.Dispatcher.Start(runs.Request{
		Tool: p.Name, Args: args, Principal: id.Name,
		Session:        metaOr(p.Meta, MetaSession, header, "Toolhost-Session"),
		IdempotencyKey: metaOr(p.Meta, MetaIdempotencyKey, header, "Idempotency-Key"),
	})
	if err != nil {
		var ce *errcode.Error
		if errors.As(err, &ce) {
			return failed("", ce), nil
		}
		return nil, fmt.Errorf("the call of %s could not be started: %w", p.Name, err)
	}
	token := p.GetProgressToken()
	step := 0.0
	notify := func(message string) {
		if token == nil || message == "" {
			return
		}
		step++
		err := req.Session.NotifyProgress(ctx, &sdkmcp.ProgressNotificationParams{ProgressToken: token, Progress: step, Message: message})
		if err != nil && ctx.Err() == nil {
			h.opts.Logger.Debug("a progress notification could not be sent", "run", run.ID, "error", err)
		}
	}
	for from := uint64(0); ; {
		batch, err := run.Next(ctx, from)
		if err != nil {
			var out SignedOut
			if errors.As(context.Cause(ctx), &out) {
				// The caller's sign-in was taken away: the run goes on,
				// for an admin to read, but this caller gets no more of it.
				return nil, out
			}
			// The client went away: nobody is left to read the run,
			// unless it has an idempotency key, which a retry attaches to.
			if run.IdempotencyKey == "" {
				run.Cancel()
			}
			return nil, err
		}
		if len(batch) == 0 {
			return nil, fmt.Errorf("the run %s ended without a result", run.ID)
		}
		for _, e := range batch {
			switch e.Type {
			case client.TypeStdout, client.TypeStderr:
				notify(e.Data)
			case client.TypeProgress:
				notify(e.Message)
			case TypeApprovalRequired:
				return awaiting(run.ID, p.Name, e), nil
			case client.TypeResult:
				return done(run.ID, e.Result), nil
			case client.TypeError:
				return failed(run.ID, e.Error), nil
			}
		}
		from = batch[len(batch)-1].Seq + 1
	}
}

// shown says whether the caller is shown the tool.
func (h *Handler) shown(id auth.Identity, name string) bool {
	for _, s := range h.opts.Tools(id) {
		if s.Function.Name == name {
			return true
		}
	}
	return false
}

func metaOr(meta sdkmcp.Meta, key string, header http.Header, name string) string {
	if v, ok := meta[key].(string); ok && v != "" {
		return v
	}
	return header.Get(name)
}

func runMeta(run string) sdkmcp.Meta {
	if run == "" {
		return nil
	}
	return sdkmcp.Meta{MetaRun: run}
}

// done is a run's result: as structured content, and as text.
func done(run string, result json.RawMessage) *sdkmcp.CallToolResult {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	return &sdkmcp.CallToolResult{
		Meta:              runMeta(run),
		Content:           []sdkmcp.Content{&sdkmcp.TextContent{Text: string(result)}},
		StructuredContent: result,
	}
}

// failed is a refused call or a failed run, for the model to read.
func failed(run string, e *errcode.Error) *sdkmcp.CallToolResult {
	if e == nil {
		e = &errcode.Error{Code: errcode.Failed, Message: "the run failed without saying why"}
	}
	body, _ := json.Marshal(map[string]any{"error": client.Error{Code: e.Code, Message: e.Message}})
	return &sdkmcp.CallToolResult{
		Meta:              runMeta(run),
		IsError:           true,
		Content:           []sdkmcp.Content{&sdkmcp.TextContent{Text: e.Code + ": " + e.Message}},
		StructuredContent: json.RawMessage(body),
	}
}

// awaiting answers a call whose run waits for a person's approval: the run
// goes on waiting, and its result is read from GET /api/v1/runs/{run}
// once the approval is decided.
func awaiting(run, tool string, e runs.Event) *sdkmcp.CallToolResult {
	approval := approvalID(e)
	msg := fmt.Sprintf("the call of %s awaits approval %s: a person must approve it (POST /api/v1/approvals/%s, or the web UI); its result is then read from GET /api/v1/runs/%s",
		tool, approval, approval, run)
	body, _ := json.Marshal(map[string]any{
		"error":    client.Error{Code: TypeApprovalRequired, Message: msg},
		"approval": map[string]string{"id": approval}, "run": run,
	})
	return &sdkmcp.CallToolResult{
		Meta:              runMeta(run),
		IsError:           true,
		Content:           []sdkmcp.Content{&sdkmcp.TextContent{Text: TypeApprovalRequired + ": " + msg}},
		StructuredContent: json.RawMessage(body),
	}
}

// approvalID reads the approval's id from an approval_required event,
// whether it names it as a string or as an object with an id.
func approvalID(e runs.Event) string {
	b, err := json.Marshal(e)
	if err != nil {
		return ""
	}
	var m struct {
		Approval json.RawMessage `json:"approval"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m.Approval, &s) == nil {
		return s
	}
	var o struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(m.Approval, &o)
	return strings.TrimSpace(o.ID)
}
