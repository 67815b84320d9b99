package runs

import (
	"context"
	"testing"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// TestGateRefusesBeforeTheRun: a call the gate refuses gets the gate's
// error and never runs, from a client and from a tool alike; the gate sees
// the request as made.
func TestGateRefusesBeforeTheRun(t *testing.T) {
	d, _ := talkDispatcher(t)
	var seen []Request
	d.SetGate(func(req Request, tool *tools.Tool) error {
		seen = append(seen, req)
		if tool.Name == "quick" && req.Session == "" {
			return &sdk.Error{Code: wire.CodeBadArgs, Message: "quick needs a session"}
		}
		return nil
	})
	if _, err := d.Start(Request{Tool: "quick", Principal: "ed"}); errcode.Code(err) != wire.CodeBadArgs || err.Error() != "quick needs a session" {
		t.Fatalf("got %v", err)
	}
	if n := len(d.List()); n != 0 || d.Going("ed") != 0 {
		t.Errorf("%d runs kept, %d places held after a refusal", n, d.Going("ed"))
	}
	parent, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	res, err := d.CallTool(context.Background(), sdk.ToolCall{ParentRunID: parent.ID, Tool: "quick"})
	if err != nil || res.Error == nil || res.Error.Code != wire.CodeBadArgs {
		t.Fatalf("nested: %+v, %v", res, err)
	}
	run, err := d.Start(Request{Tool: "quick", Principal: "ed", Session: "conv"})
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := run.Wait(context.Background()); last.Type != "result" {
		t.Errorf("a call the gate let through ended %+v", last)
	}
	if len(seen) != 4 || seen[3].Session != "conv" || seen[2].Parent != parent.ID {
		t.Errorf("the gate saw %+v", seen)
	}
	d.SetGate(nil)
	if _, err := d.Start(Request{Tool: "quick", Principal: "ed"}); err != nil {
		t.Errorf("with no gate: %v", err)
	}
}
