// Package sdktest runs a kind in-process over a real gRPC connection
// (go-plugin's TestPluginGRPCConn), so a plugin author tests a kind without
// building a binary: the same adapters, the same wire, the same broker for
// calls back into the host.
package sdktest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// Conn is a host-side connection to a kind served in-process.
type Conn struct {
	*hostside.KindClient
	t    testing.TB
	conn *grpc.ClientConn
}

// Start serves kind over an in-process gRPC connection and returns the
// host's side of it. host answers the kind's HostService calls; nil gives
// a host that refuses them. The connection closes when the test ends.
//
// Call Configure before Invoke, as the host does: that is when the kind
// connects to the host's HostService, for good. Without it a run that uses
// call.Host connects on first use, which works only within 5 s of Start
// (go-plugin's broker forgets the offer after that).
func Start(t testing.TB, kind sdk.Kind, host sdk.Host) *Conn {
	t.Helper()
	if host == nil {
		host = refusingHost{}
	}
	return StartPlugin(t, &sdk.KindPlugin{Impl: kind}, host, false)
}

// StartPlugin is Start for tests of the SDK itself: it serves the plugin's
// half as given, with host as it is (nil: the host serves no HostService
// at all), over go-plugin's test connection with or without broker
// multiplexing.
func StartPlugin(t testing.TB, p *sdk.KindPlugin, host sdk.Host, multiplex bool) *Conn {
	t.Helper()
	both := *p
	both.Dispense = hostside.Dispense(host)
	client, _ := plugin.TestPluginGRPCConn(t, multiplex, map[string]plugin.Plugin{sdk.PluginName: &both})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(sdk.PluginName)
	if err != nil {
		t.Fatalf("dispensing the kind: %v", err)
	}
	return &Conn{KindClient: raw.(*hostside.KindClient), t: t, conn: client.Conn}
}

// Check checks a tool as the host does with no other tools loaded: the
// catalog holds the tool alone, for kinds that want one.
func (c *Conn) Check(ctx context.Context, tool sdk.Tool) (json.RawMessage, error) {
	return c.KindClient.Check(ctx, tool, []sdk.Tool{tool})
}

// CheckWithCatalog checks a tool as the host does with the given tools
// loaded beside it (sdk.CatalogChecker).
func (c *Conn) CheckWithCatalog(ctx context.Context, tool sdk.Tool, catalog []sdk.Tool) (json.RawMessage, error) {
	return c.KindClient.Check(ctx, tool, catalog)
}

// ClientConn is the gRPC connection under c, for tests that speak the
// protocol raw.
func (c *Conn) ClientConn() *grpc.ClientConn { return c.conn }

// Run is what one Invoke produced: the events in order, and the result or
// the error it ended with.
type Run struct {
	Events []sdk.Event
	Result json.RawMessage
	Err    error
}

// Stdout is everything the run printed to stdout.
func (r *Run) Stdout() string {
	var s []byte
	for _, e := range r.Events {
		s = append(s, e.Stdout...)
	}
	return string(s)
}

// Stderr is everything the run printed to stderr.
func (r *Run) Stderr() string {
	var s []byte
	for _, e := range r.Events {
		s = append(s, e.Stderr...)
	}
	return string(s)
}

// Content is the content the run's result came with (nil for none).
func (r *Run) Content() []sdk.Content {
	var parts []sdk.Content
	for _, e := range r.Events {
		parts = append(parts, e.Content...)
	}
	return parts
}

// ErrorCode is the code of the *sdk.Error the run ended with, or "".
func (r *Run) ErrorCode() string {
	return errcode.Code(r.Err)
}

// Invoke runs tool with args (marshalled to JSON) and collects everything.
func (c *Conn) Invoke(ctx context.Context, tool sdk.Tool, args any) *Run {
	c.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		c.t.Fatalf("marshalling args: %v", err)
	}
	var (
		mu  sync.Mutex
		run Run
	)
	run.Result, run.Err = c.KindClient.Invoke(ctx, hostside.Invocation{Tool: tool, Args: raw, RunID: "rtest"}, func(e sdk.Event) {
		mu.Lock()
		run.Events = append(run.Events, e)
		mu.Unlock()
	})
	return &run
}

// Tool builds a tool of a kind from a run table given as a Go value.
func Tool(t testing.TB, name string, run map[string]any, params ...sdk.Param) sdk.Tool {
	t.Helper()
	raw, err := json.Marshal(run)
	if err != nil {
		t.Fatalf("marshalling run: %v", err)
	}
	return sdk.Tool{Name: name, Description: "a test tool", Effect: "read", Params: params, Run: raw, Source: "test"}
}

type refusingHost struct{}

func (refusingHost) CallTool(context.Context, sdk.ToolCall) (sdk.ToolResult, error) {
	return sdk.ToolResult{}, &sdk.Error{Code: errcode.NoHost, Message: "this test serves no tools to call"}
}

func (refusingHost) AskModel(context.Context, sdk.ModelRequest) (sdk.ModelAnswer, error) {
	return sdk.ModelAnswer{}, &sdk.Error{Code: errcode.NoHost, Message: "this test serves no model"}
}
