package runs

import (
	"context"
	"encoding/json"
	"errors"
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

// talkKind is an in-process kind for nested calls: "talk" prints "one",
// waits for its gate, prints "two" and returns; "nodes" prints pieces
// marked with nodes, a character split across two of them; "hold" waits
// to be cancelled; "quick" returns at once.
type talkKind struct {
	gate chan struct{}
}

func (k *talkKind) Invoke(ctx context.Context, inv hostside.Invocation, emit func(sdk.Event)) (json.RawMessage, error) {
	switch inv.Tool.Name {
	case "talk":
		emit(sdk.Event{Stdout: []byte("one\n")})
		select {
		case <-k.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		emit(sdk.Event{Stdout: []byte("two\n")})
		return json.RawMessage(`"talked"`), nil
	case "nodes":
		e := []byte("é")
		emit(sdk.Event{Stdout: e[:1], Node: "a"})
		emit(sdk.Event{Stdout: []byte("x"), Node: "b"})
		emit(sdk.Event{Stdout: e[1:], Node: "a"})
		return json.RawMessage(`null`), nil
	case "hold":
		<-ctx.Done()
		return nil, ctx.Err()
	case "quick":
		return json.RawMessage(`1`), nil
	}
	return nil, errors.New("no such tool")
}

func talkDispatcher(t *testing.T) (*Dispatcher, *talkKind) {
	t.Helper()
	reg := tools.NewRegistry()
	var list []*tools.Tool
	for _, name := range []string{"talk", "nodes", "hold", "quick"} {
		list = append(list, &tools.Tool{Tool: config.Tool{Name: name, Description: "A test tool.", Effect: "read"}, Kind: "talk", Run: json.RawMessage(`{"type":"talk"}`)})
	}
	reg.Replace(list)
	k := &talkKind{gate: make(chan struct{})}
	d := NewDispatcher(reg, func(string) (Invoker, bool) { return k, true }, nil, time.Hour)
	t.Cleanup(func() { d.CancelAll("the test is over"); d.Close() })
	return d, k
}

// TestANestedRunsOutputReachesItsCallerAsItIsPrinted: the caller sees the
// nested run's first line while the run is still going, then the rest,
// then the result.
func TestANestedRunsOutputReachesItsCallerAsItIsPrinted(t *testing.T) {
	d, k := talkDispatcher(t)
	parent, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	got := make(chan string, 10)
	done := make(chan sdk.ToolResult, 1)
	go func() {
		res, err := d.CallTool(context.Background(), sdk.ToolCall{ParentRunID: parent.ID, Tool: "talk", OnEvent: func(e sdk.Event) {
			got <- string(e.Stdout)
		}})
		if err != nil {
			res.Error = &sdk.Error{Code: "transport", Message: err.Error()}
		}
		done <- res
	}()
	if first := <-got; first != "one\n" {
		t.Fatalf("first output %q, want %q", first, "one\n")
	}
	select {
	case res := <-done:
		t.Fatalf("the call ended before its run did: %+v", res)
	default:
	}
	close(k.gate)
	if second := <-got; second != "two\n" {
		t.Fatalf("second output %q", second)
	}
	res := <-done
	if res.Error != nil || string(res.Result) != `"talked"` || res.Printed != "one\ntwo\n" {
		t.Fatalf("result %+v", res)
	}
}

// TestOutputOfEachNodeIsTextOfItsOwn: a character split across two chunks
// of one node, with another node's output between them, arrives whole and
// marked with its node.
func TestOutputOfEachNodeIsTextOfItsOwn(t *testing.T) {
	d, _ := talkDispatcher(t)
	run, err := d.Start(Request{Tool: "nodes", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, run)
	events, err := run.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		if e.Type == "stdout" {
			got = append(got, e.Node+":"+e.Data)
		}
	}
	if strings.Join(got, " ") != "b:x a:é" {
		t.Fatalf("stdout events %q, want [b:x a:é]", got)
	}
}

// TestNestedCallsUnderOneRunAreCapped: a run that makes MaxNestedCalls
// nested calls (tools and the model together) is refused the next with
// too_many_calls; another top-level run is not affected.
func TestNestedCallsUnderOneRunAreCapped(t *testing.T) {
	d, _ := talkDispatcher(t)
	d.SetModel(echoModel{})
	parent, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	ctx := context.Background()
	for i := 0; i < MaxNestedCalls-1; i++ {
		if res, err := d.CallTool(ctx, sdk.ToolCall{ParentRunID: parent.ID, Tool: "quick"}); err != nil || res.Error != nil {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
	}
	if _, err := d.AskModel(ctx, sdk.ModelRequest{ParentRunID: parent.ID, Prompt: "hi"}); err != nil {
		t.Fatalf("the last call allowed: %v", err)
	}
	res, err := d.CallTool(ctx, sdk.ToolCall{ParentRunID: parent.ID, Tool: "quick"})
	if err != nil || res.Error == nil || res.Error.Code != wire.CodeTooManyCalls || !strings.Contains(res.Error.Message, "1000 nested calls") {
		t.Fatalf("the call past the cap: %+v %v", res.Error, err)
	}
	if _, err := d.AskModel(ctx, sdk.ModelRequest{ParentRunID: parent.ID, Prompt: "hi"}); errcode.Code(err) != wire.CodeTooManyCalls {
		t.Fatalf("a question past the cap: %v", err)
	}
	other, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Cancel()
	if res, err := d.CallTool(ctx, sdk.ToolCall{ParentRunID: other.ID, Tool: "quick"}); err != nil || res.Error != nil {
		t.Fatalf("another run's call: %+v %v", res, err)
	}
}

type echoModel struct{}

func (echoModel) Ask(_ context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
	for _, w := range strings.Fields(req.Prompt) {
		if req.OnText != nil {
			req.OnText(w + " ")
		}
	}
	return sdk.ModelAnswer{Text: req.Prompt, Model: "echo"}, nil
}

// TestAskingTheModel: with no model the question is refused in words that
// say how to configure one; with one, the answer streams; a run whose
// token was removed may not ask; an unknown run may not ask.
func TestAskingTheModel(t *testing.T) {
	d, _ := talkDispatcher(t)
	parent, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	ctx := context.Background()
	_, err = d.AskModel(ctx, sdk.ModelRequest{ParentRunID: parent.ID, Prompt: "a b"})
	if errcode.Code(err) != wire.CodeUnsupported || !strings.Contains(err.Error(), "[model]") {
		t.Fatalf("no model: %v", err)
	}
	d.SetModel(echoModel{})
	var pieces []string
	ans, err := d.AskModel(ctx, sdk.ModelRequest{ParentRunID: parent.ID, Prompt: "a b", OnText: func(s string) { pieces = append(pieces, s) }})
	if err != nil || ans.Text != "a b" || strings.Join(pieces, "|") != "a |b " {
		t.Fatalf("answer %+v %v, pieces %q", ans, err, pieces)
	}
	if _, err := d.AskModel(ctx, sdk.ModelRequest{ParentRunID: "rnope", Prompt: "a"}); errcode.Code(err) != wire.CodeUnknownRun {
		t.Fatalf("unknown run: %v", err)
	}
	d.SetCallers(func(string) Caller { return Caller{Refused: "the token was removed"} })
	if _, err := d.AskModel(ctx, sdk.ModelRequest{ParentRunID: parent.ID, Prompt: "a"}); errcode.Code(err) != wire.CodeForbidden {
		t.Fatalf("removed token: %v", err)
	}
}
