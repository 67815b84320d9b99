package sdk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// relayKind passes what the host streams to it on as its own output,
// marked with a node, as the graph kind does.
type relayKind struct{ *echoKind }

func (relayKind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	res, err := call.Host.CallTool(ctx, sdk.ToolCall{ParentRunID: call.RunID, Tool: "inner", OnEvent: func(e sdk.Event) {
		e.Node = "fetch/" + e.Node
		emit(e)
	}})
	if err != nil {
		return nil, err
	}
	ans, err := call.Host.AskModel(ctx, sdk.ModelRequest{ParentRunID: call.RunID, Prompt: "p", JSON: true, MaxTokens: 7, OnText: func(s string) {
		emit(sdk.Event{Stdout: []byte(s), Node: "ask"})
	}})
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"printed": res.Printed, "answer": ans})
}

// streamingHost streams a nested run's output and a model's answer.
type streamingHost struct{ asked sdk.ModelRequest }

func (streamingHost) CallTool(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
	req.OnEvent(sdk.Event{Stdout: []byte("a"), Node: "inner"})
	req.OnEvent(sdk.Event{Stderr: []byte("b")})
	req.OnEvent(sdk.Event{Stdout: []byte("c")})
	return sdk.ToolResult{Result: json.RawMessage(`1`), Printed: "ac"}, nil
}

func (h *streamingHost) AskModel(_ context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
	h.asked = req
	req.OnText("hel")
	req.OnText("lo")
	return sdk.ModelAnswer{Text: "hello", Model: "m", InputTokens: 3, OutputTokens: 2}, nil
}

// TestNestedOutputAndModelAnswersStreamOverTheWire: what the host streams
// reaches the kind event by event (nodes kept), and the model's answer
// piece by piece, with the request's JSON and MaxTokens carried over.
func TestNestedOutputAndModelAnswersStreamOverTheWire(t *testing.T) {
	h := &streamingHost{}
	c := sdktest.Start(t, relayKind{&echoKind{}}, h)
	if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	run := c.Invoke(context.Background(), sdktest.Tool(t, "r", nil), map[string]string{})
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	var got []string
	for _, e := range run.Events {
		switch {
		case e.Stdout != nil:
			got = append(got, "out:"+e.Node+":"+string(e.Stdout))
		case e.Stderr != nil:
			got = append(got, "err:"+e.Node+":"+string(e.Stderr))
		}
	}
	want := "out:fetch/inner:a err:fetch/:b out:fetch/:c out:ask:hel out:ask:lo"
	if strings.Join(got, " ") != want {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if string(run.Result) != `{"answer":{"Text":"hello","Model":"m","InputTokens":3,"OutputTokens":2},"printed":"ac"}` {
		t.Fatalf("result %s", run.Result)
	}
	if !h.asked.JSON || h.asked.MaxTokens != 7 || h.asked.ParentRunID != "rtest" {
		t.Fatalf("the host was asked %+v", h.asked)
	}
}

// catalogKind checks its tools against the others loaded with them.
type catalogKind struct {
	*echoKind
	seen []string
}

func (k *catalogKind) CheckWithCatalog(_ context.Context, tool sdk.Tool, catalog []sdk.Tool) (json.RawMessage, error) {
	for _, t := range catalog {
		k.seen = append(k.seen, t.Name+":"+string(t.Run)+":"+t.Params[0].Name)
	}
	return tool.Run, nil
}

// TestAKindThatWantsTheCatalogGetsIt: Describe tells the host, and Check
// gets the tools the host sent.
func TestAKindThatWantsTheCatalogGetsIt(t *testing.T) {
	k := &catalogKind{echoKind: &echoKind{}}
	c := sdktest.Start(t, k, nil)
	info, _, err := c.Describe(context.Background())
	if err != nil || !info.WantsCatalog {
		t.Fatalf("describe: %+v %v", info, err)
	}
	p := sdk.Param{Name: "q", Type: "text"}
	other := sdk.Tool{Name: "other", Params: []sdk.Param{p}, Run: json.RawMessage(`{"type":"http"}`)}
	self := sdktest.Tool(t, "self", map[string]any{"type": "echo"}, p)
	if _, err := c.CheckWithCatalog(context.Background(), self, []sdk.Tool{self, other}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(k.seen, " ") != `self:{"type":"echo"}:q other:{"type":"http"}:q` {
		t.Fatalf("the kind saw %q", k.seen)
	}
	if info, _, _ := sdktest.Start(t, &echoKind{}, nil).Describe(context.Background()); info.WantsCatalog {
		t.Fatal("a kind that is no CatalogChecker says it wants the catalog")
	}
}

// outsideKind is echoKind saying its runs bring outside text.
type outsideKind struct{ *echoKind }

func (k outsideKind) Describe(ctx context.Context) (sdk.Info, error) {
	info, err := k.echoKind.Describe(ctx)
	info.OutsideText = sdk.OutsideTextAlways
	return info, err
}

// TestAKindSaysWhetherItsRunsBringOutsideText: what a kind says in
// Describe reaches the host; a kind that says nothing says none (the
// zero value), which the host tells apart from a plugin built before
// kinds said (OutsideTextUnsaid, sdk/hostside's version test).
func TestAKindSaysWhetherItsRunsBringOutsideText(t *testing.T) {
	if info, _, err := sdktest.Start(t, outsideKind{&echoKind{}}, nil).Describe(context.Background()); err != nil || info.OutsideText != sdk.OutsideTextAlways {
		t.Fatalf("a kind that says always: %+v %v", info, err)
	}
	if info, _, err := sdktest.Start(t, &echoKind{}, nil).Describe(context.Background()); err != nil || info.OutsideText != sdk.OutsideTextNone || info.OutsideTextWhen != "" {
		t.Fatalf("a kind that says nothing: %+v %v", info, err)
	}
	if info, _, err := sdktest.Start(t, perToolKind{&echoKind{}}, nil).Describe(context.Background()); err != nil || info.OutsideText != sdk.OutsideTextNone || info.OutsideTextWhen != "network" {
		t.Fatalf("a kind that says per tool: %+v %v", info, err)
	}
}

// perToolKind is echoKind saying its tools bring outside text when their
// run table sets network.
type perToolKind struct{ *echoKind }

func (k perToolKind) Describe(ctx context.Context) (sdk.Info, error) {
	info, err := k.echoKind.Describe(ctx)
	info.OutsideTextWhen = "network"
	return info, err
}
