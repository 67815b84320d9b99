package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// endKind ends each run with the error its tool names, once the run is
// cancelled ("after_cancel") or at once.
type endKind struct{ errs map[string]error }

func (k endKind) Invoke(ctx context.Context, inv hostside.Invocation, _ func(sdk.Event)) (json.RawMessage, error) {
	if strings.HasPrefix(inv.Tool.Name, "after_cancel") {
		<-ctx.Done()
	}
	return nil, k.errs[inv.Tool.Name]
}

// TestARunEndsWithOneCodeWhateverItsKindReturned: the host decides a run
// was cancelled in one place (errcode.FromRun), the same way the SDK does
// in the plugin: a run cancelled by its caller ends "cancelled" whether
// its plugin answered with ctx's error, a broken connection or a plain
// "failed"; a more precise code (a timeout) and an *sdk.Error wrapped in
// another error are kept; anything else is "failed" with its text.
func TestARunEndsWithOneCodeWhateverItsKindReturned(t *testing.T) {
	errs := map[string]error{
		"after_cancel_reset":   errors.New("read unix @->/tmp/plugin: connection reset by peer"),
		"after_cancel_failed":  &sdk.Error{Code: wire.CodeFailed, Message: "the plugin failed"},
		"after_cancel_timeout": &sdk.Error{Code: wire.CodeTimeout, Message: "it took too long"},
		"wrapped":              fmt.Errorf("calling: %w", &sdk.Error{Code: "http_status", Message: "the server answered 404"}),
		"plain":                errors.New("something broke"),
		"canceled_error":       fmt.Errorf("stream: %w", context.Canceled),
	}
	want := map[string]errcode.Error{
		"after_cancel_reset":   {Code: wire.CodeCancelled, Message: "the run was cancelled"},
		"after_cancel_failed":  {Code: wire.CodeCancelled, Message: "the run was cancelled"},
		"after_cancel_timeout": {Code: wire.CodeTimeout, Message: "it took too long"},
		"wrapped":              {Code: "http_status", Message: "the server answered 404"},
		"plain":                {Code: wire.CodeFailed, Message: "something broke"},
		"canceled_error":       {Code: wire.CodeCancelled, Message: "the run was cancelled"},
	}
	reg := tools.NewRegistry()
	var list []*tools.Tool
	for name := range errs {
		list = append(list, &tools.Tool{Tool: config.Tool{Name: name, Description: "A test tool.", Effect: "read"},
			Kind: "end", Run: json.RawMessage(`{"type":"end"}`)})
	}
	reg.Replace(list)
	d := NewDispatcher(reg, func(string) (Invoker, bool) { return endKind{errs}, true }, nil, time.Hour)
	t.Cleanup(func() { d.CancelAll("the test is over"); d.Close() })
	for name, w := range want {
		run, err := d.Start(Request{Tool: name, Principal: "ed"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(name, "after_cancel") {
			run.Cancel()
		}
		last := wait(t, run)
		if last.Type != "error" || last.Error == nil || last.Error.Code != w.Code || last.Error.Message != w.Message {
			t.Errorf("%s ended with %+v; want error %q: %q", name, last.Error, w.Code, w.Message)
		}
	}
}

// TestARunStoppedByTheHostSaysWhy: a run the host cancels at shutdown
// (CancelAll) ends "cancelled" with the host's reason, whatever its kind
// answered; a caller's cancel keeps the plain message.
func TestARunStoppedByTheHostSaysWhy(t *testing.T) {
	errs := map[string]error{"after_cancel_failed": &sdk.Error{Code: wire.CodeFailed, Message: "the plugin failed"}}
	reg := tools.NewRegistry()
	reg.Replace([]*tools.Tool{{Tool: config.Tool{Name: "after_cancel_failed", Description: "A test tool.", Effect: "read"},
		Kind: "end", Run: json.RawMessage(`{"type":"end"}`)}})
	d := NewDispatcher(reg, func(string) (Invoker, bool) { return endKind{errs}, true }, nil, time.Hour)
	t.Cleanup(d.Close)
	run, err := d.Start(Request{Tool: "after_cancel_failed", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	const why = "the host is stopping, so its runs were stopped"
	d.CancelAll(why)
	if last := wait(t, run); last.Error == nil || last.Error.Code != wire.CodeCancelled || last.Error.Message != why {
		t.Errorf("a run stopped by the host ended with %+v; want cancelled: %q", last.Error, why)
	}
}

// TestARefusedCallIsAnSDKError: a call refused before it ran is the one
// error type, matched by code with errors.Is.
func TestARefusedCallIsAnSDKError(t *testing.T) {
	d, _ := nestDispatcher(t, 1)
	_, err := d.Start(Request{Tool: "nope", Principal: "ed"})
	if !errors.Is(err, &sdk.Error{Code: wire.CodeUnknownTool}) || errcode.Code(err) != wire.CodeUnknownTool {
		t.Fatalf("calling a tool that isn't there: %#v; want an *sdk.Error of code unknown_tool", err)
	}
}
