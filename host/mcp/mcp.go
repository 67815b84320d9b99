// Package mcp serves the host's tools to MCP clients at /mcp, over the
// Model Context Protocol's streamable HTTP transport (the official Go
// SDK), stateless: every request is served on its own, so any replica of
// the host can serve any request. tools/list gives the tools the caller
// is shown by GET /api/v1/tools, and tools/call runs one through the same
// dispatcher as every other call, as the caller, with its checks, limits
// and approvals; what the run prints and its progress come as progress
// notifications when the client asks for progress, its log events as
// log notifications. The API signs the caller in before a request gets
// here; this package also tells OAuth clients that the host takes bearer
// tokens only (oauth.go).
package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Path is where the API serves MCP.
const Path = "/mcp"

// Meta keys a tools/call may carry in its _meta: the conversation sandbox
// to run in and the call's idempotency key. The Toolhost-Session and
// Idempotency-Key headers of the HTTP request are used when they are not.
const (
	MetaSession        = "toolhost/session"
	MetaIdempotencyKey = "toolhost/idempotency_key"
	// MetaRun is the run's id, in the _meta of a tools/call result.
	MetaRun = "toolhost/run"
)

// DefaultPageSize is how many tools one tools/list answer holds at most.
const DefaultPageSize = 100

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
	// /api/v1/tools for that caller, sorted by name.
	Tools func(auth.Identity) []tools.FunctionSpec
	// Shown says whether a caller is shown a tool (is it among Tools?),
	// cheaply; nil looks in Tools.
	Shown func(id auth.Identity, tool string) bool
	// NeedsSession says whether a tool runs in a conversation's sandbox
	// (so a call of it needs a session); nil says no tool does.
	NeedsSession func(tool string) bool
	// Version is the host's version, told to clients on initialize.
	Version string
	Logger  hclog.Logger
	// PageSize is how many tools one tools/list answer holds at most; 0
	// means DefaultPageSize.
	PageSize int
}

// Handler serves MCP for callers the API has signed in.
type Handler struct {
	opts   Options
	server *sdkmcp.Server
	http   *sdkmcp.StreamableHTTPHandler
	// calls are the tools/calls running, for notifications/cancelled.
	calls inFlight
	// levels are the log levels callers set with logging/setLevel.
	levels logLevels
}

// request is what the handler knows of one HTTP request: who sent it, its
// own context, and the JSON-RPC id of the tools/call it carries, if it
// carries one (the SDK tells handlers no id).
type request struct {
	id auth.Identity
	// http is the HTTP request's context: done when the client hangs up,
	// or when the API takes the caller's sign-in away (cause SignedOut).
	http  context.Context
	rpcID json.RawMessage
}

type requestKey struct{}

// Errors that end a call's wait for its run, as its context's cause.
var (
	errHungUp    = errors.New("the MCP client went away mid-call")
	errCancelled = errors.New("the MCP client cancelled the call (notifications/cancelled)")
)

// New returns the MCP handler.
func New(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	h := &Handler{opts: opts}
	// One server for every request: it holds no caller's state (the
	// middleware reads the caller from the request's context).
	h.server = sdkmcp.NewServer(&sdkmcp.Implementation{Name: "toolhost", Version: opts.Version}, &sdkmcp.ServerOptions{
		Capabilities: capabilities(),
	})
	h.server.AddReceivingMiddleware(h.middleware)
	h.http = sdkmcp.NewStreamableHTTPHandler(func(r *http.Request) *sdkmcp.Server {
		if _, ok := r.Context().Value(requestKey{}).(*request); !ok {
			return nil // not signed in: the SDK answers 400
		}
		return h.server
	}, &sdkmcp.StreamableHTTPOptions{
		Stateless: true,
		// The API refuses requests for other host names when it serves
		// this machine only (no tokens), and needs a token otherwise; the
		// SDK's own check would refuse a host behind a proxy on loopback.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxBody,
		// No PropagateRequestCancellation: the SDK applies it to protocol
		// 2026-07-28 and later only; call ties a run to its HTTP request
		// itself, for every version.
	})
	return h
}

// SignedOut is the cause the API ends a request's context with when a
// change of tokens takes its caller's sign-in away mid-call: the call ends,
// and its run goes on.
type SignedOut struct{ Message string }

func (e SignedOut) Error() string { return e.Message }

// Serve serves one MCP request of the caller id, signed in by the API.
// r's context ends when the client hangs up, and with cause SignedOut when
// the caller's sign-in is taken away.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	in := &request{id: id, http: r.Context()}
	if r.Method == http.MethodPost && r.Body != nil {
		// Peek at the body for the id of a tools/call; the SDK reads it
		// after (and answers one too large).
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err == nil && len(body) <= maxBody {
			in.rpcID = h.peek(id, body)
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	}
	h.http.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, in)))
}

// peek reads a request's body before the SDK does: it cancels the calls
// a notifications/cancelled in it names, and returns the id of the
// tools/call it is, or nil. The SDK would hand the notification to a
// session that a stateless server closes as soon as it has answered 202,
// so it may never be read; and the call it names runs on another request.
func (h *Handler) peek(id auth.Identity, body []byte) json.RawMessage {
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if !bytes.Contains(body, []byte(`"tools/call"`)) && !bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
		return nil // most requests: nothing to look at
	}
	var one msg
	var batch []msg
	if json.Unmarshal(body, &one) == nil {
		batch = []msg{one}
	} else if json.Unmarshal(body, &batch) != nil {
		return nil
	}
	for _, m := range batch {
		if m.Method != "notifications/cancelled" || m.ID != nil {
			continue
		}
		if k, ok := keyOf(id.Name, m.Params.RequestID); ok {
			h.calls.cancel(k)
		}
	}
	if len(batch) == 1 && batch[0].Method == "tools/call" {
		return batch[0].ID
	}
	return nil
}

// notServed are the methods of features the host does not advertise: they
// are not found, as JSON-RPC says, rather than answered empty.
var notServed = map[string]bool{
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true,
}

// middleware answers the methods the host serves itself, for the caller
// of the request; the SDK answers the rest (initialize, ping, …).
func (h *Handler) middleware(next sdkmcp.MethodHandler) sdkmcp.MethodHandler {
	return func(ctx context.Context, method string, req sdkmcp.Request) (sdkmcp.Result, error) {
		in, ok := ctx.Value(requestKey{}).(*request)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request reached MCP without a caller signed in"}
		}
		if notServed[method] {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s is not served: toolhost serves tools (and logging) only, as its capabilities say", method)}
		}
		switch r := req.(type) {
		case *sdkmcp.ListToolsRequest:
			return h.list(in.id, r.Params)
		case *sdkmcp.CallToolRequest:
			return h.call(ctx, in, r, next)
		}
		if method == "logging/setLevel" {
			if err := h.setLevel(in.id.Name, req); err != nil {
				return nil, err
			}
		}
		return next(ctx, method, req)
	}
}

// list is one page of the caller's tools as MCP tools. The cursor is the
// last name of the page before, so a tool added or removed between pages
// moves no other across a page's edge.
func (h *Handler) list(id auth.Identity, p *sdkmcp.ListToolsParams) (*sdkmcp.ListToolsResult, error) {
	specs := h.opts.Tools(id)
	name := func(i int) string { return specs[i].Function.Name }
	if !sort.SliceIsSorted(specs, func(i, j int) bool { return name(i) < name(j) }) {
		specs = append([]tools.FunctionSpec(nil), specs...)
		sort.Slice(specs, func(i, j int) bool { return name(i) < name(j) })
	}
	start := 0
	if p != nil && p.Cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the cursor %q is not one tools/list gave", p.Cursor)}
		}
		start = sort.Search(len(specs), func(i int) bool { return name(i) > string(after) })
	}
	end := min(start+h.opts.PageSize, len(specs))
	res := &sdkmcp.ListToolsResult{Tools: make([]*sdkmcp.Tool, 0, end-start)}
	// The list depends on the caller's role: only its own client may
	// keep it, and tools change with a reload or a PUT.
	res.CacheScope = "private"
	for _, s := range specs[start:end] {
		res.Tools = append(res.Tools, Tool(s))
	}
	if end < len(specs) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(name(end - 1)))
	}
	return res, nil
}

// Tool is a tool's spec as an MCP tool: a "read" tool is read-only, a
// "change" tool destructive. Tools declare no result type, so none has an
// outputSchema.
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
// and message, for the model to read. A tool the caller is not shown is
// a protocol error (-32602), as MCP's tools section has it.
func (h *Handler) call(ctx context.Context, in *request, req *sdkmcp.CallToolRequest, next sdkmcp.MethodHandler) (*sdkmcp.CallToolResult, error) {
	p, id := req.Params, in.id
	run, res, err := h.startRun(in, req)
	if res != nil || err != nil {
		return res, err
	}
	// The wait ends when the client hangs up, when it cancels the call
	// with notifications/cancelled (on any request: key), or when the
	// SDK ends it; left says what then becomes of the run.
	wait, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	unhook := context.AfterFunc(in.http, func() { stop(errHungUp) })
	defer unhook()
	key, keyed := keyOf(id.Name, in.rpcID)
	keyed = keyed && in.rpcID != nil
	if keyed {
		defer h.calls.add(key, func() { stop(errCancelled) })()
	}

	out := &notifier{h: h, ctx: wait, req: req, run: run.ID, tool: p.Name, token: p.GetProgressToken(),
		level: h.logLevel(id.Name, p.Meta), next: next}
	return h.relay(wait, in, run, out, p.Name, key, keyed)
}

// startRun checks the call (a tool the caller is shown and may run,
// arguments of at most maxArgs, a session when the tool needs one) and
// starts its run. When it starts none, it returns the call's answer
// instead: a refusal as a result with isError, or a protocol error.
func (h *Handler) startRun(in *request, req *sdkmcp.CallToolRequest) (*runs.Run, *sdkmcp.CallToolResult, error) {
	p, id := req.Params, in.id
	if !h.shown(id, p.Name) {
		// Hidden tools are unknown to this caller, as in tools/list.
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool: there is no tool named %q (tools/list lists the tools)", p.Name)}
	}
	if !id.CanCall() {
		return nil, failed("", &errcode.Error{Code: wire.CodeForbidden, Message: fmt.Sprintf("%s is a %s and may not run tools", id.Name, id.Role)}), nil
	}
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if len(args) > maxArgs {
		return nil, failed("", &errcode.Error{Code: wire.CodeTooLarge, Message: "the arguments must be at most 1 MiB of JSON"}), nil
	}
	var header http.Header
	if req.Extra != nil {
		header = req.Extra.Header
	}
	session := metaOr(p.Meta, MetaSession, header, "Toolhost-Session")
	if session == "" && h.opts.NeedsSession != nil && h.opts.NeedsSession(p.Name) {
		return nil, failed("", &errcode.Error{Code: wire.CodeBadArgs, Message: fmt.Sprintf(
			"%s runs in a conversation's sandbox and needs a session: name it in the call's _meta as %q "+
				"(or in the Toolhost-Session header); a session id is 1 to 64 letters, digits, '-' or '_', chosen by the client, one per conversation",
			p.Name, MetaSession)}), nil
	}
	run, err := h.opts.Dispatcher.Start(runs.Request{
		Tool: p.Name, Args: args, Principal: id.Name,
		Session:        session,
		IdempotencyKey: metaOr(p.Meta, MetaIdempotencyKey, header, "Idempotency-Key"),
	})
	if err != nil {
		var ce *errcode.Error
		if errors.As(err, &ce) {
			return nil, failed("", ce), nil
		}
		return nil, nil, fmt.Errorf("the call of %s could not be started: %w", p.Name, err)
	}
	return run, nil, nil
}

// relay passes the run's events on to the client (output and progress as
// progress notifications, logs as log messages) until the run answers the
// call: its result, its error, or the approval it awaits. A wait that ends
// first answers with what becomes of the run (left).
func (h *Handler) relay(wait context.Context, in *request, run *runs.Run, out *notifier, tool string, key callKey, keyed bool) (*sdkmcp.CallToolResult, error) {
	for from := uint64(0); ; {
		batch, err := run.Next(wait, from)
		if err != nil {
			return nil, h.left(run, wait, in, key, keyed)
		}
		if len(batch) == 0 {
			return nil, fmt.Errorf("the run %s ended without a result", run.ID)
		}
		for _, e := range batch {
			switch e.Type {
			case wire.TypeStdout, wire.TypeStderr:
				out.progress(e.Data)
			case wire.TypeProgress:
				out.progress(progressText(e))
			case wire.TypeDisplay:
				// The part itself comes with the result, as MCP content: the
				// notification says where it came in the output.
				for _, c := range e.Content {
					out.progress(fmt.Sprintf("[shown: %s (%s, %d bytes); it comes with the result]\n", c.Type, c.MIMEType, len(c.Data)))
				}
			case wire.TypeLog:
				out.log(e)
			case wire.TypeApprovalRequired:
				return awaiting(run.ID, tool, e), nil
			case wire.TypeResult:
				res, err := done(run.ID, e.Result, e.Content)
				if err != nil {
					return failed(run.ID, &errcode.Error{Code: wire.CodeFailed, Message: err.Error()}), nil
				}
				return res, nil
			case wire.TypeError:
				return failed(run.ID, e.Error), nil
			}
		}
		from = batch[len(batch)-1].Seq + 1
	}
}

// left is what becomes of a run whose call stopped waiting for it, and the
// call's error. The HTTP request's own context decides, not the wait's:
// the API sets its cause before anything else can end the wait, so a
// caller signed out is never taken for one that hung up.
//   - notifications/cancelled: the run is cancelled, idempotency key or not;
//   - the caller's sign-in taken away: the run goes on, for an admin to read;
//   - the client hung up: the run is cancelled, unless it has an
//     idempotency key, which a retry attaches to; then a
//     notifications/cancelled of the call's id still cancels it, until
//     it ends;
//   - the SDK ended the call (a cancel on the same connection): cancelled.
func (h *Handler) left(run *runs.Run, wait context.Context, in *request, key callKey, keyed bool) error {
	cause := context.Cause(wait)
	var out SignedOut
	switch {
	case errors.Is(cause, errCancelled):
		run.CancelBecause(cause.Error())
		return cause
	case errors.As(context.Cause(in.http), &out):
		return out
	case in.http.Err() != nil:
		if run.IdempotencyKey == "" {
			run.CancelBecause(errHungUp.Error())
			return errHungUp
		}
		if keyed {
			remove := h.calls.add(key, func() { run.CancelBecause(errCancelled.Error()) })
			go func() {
				_, _ = run.Wait(context.Background())
				remove()
			}()
		}
		return errHungUp
	}
	run.CancelBecause("the MCP call was cancelled")
	return cause
}

// shown says whether the caller is shown the tool.
func (h *Handler) shown(id auth.Identity, name string) bool {
	if h.opts.Shown != nil {
		return h.opts.Shown(id, name)
	}
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
