package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// progressKind says a node of its own is done, then passes on the
// progress of a nested call as it comes, as the graph kind does.
type progressKind struct{ *echoKind }

func (progressKind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	emit(sdk.Event{Progress: &sdk.Progress{Fraction: -1, Message: `node "fetch" done`, Node: "fetch"}})
	res, err := call.Host.CallTool(ctx, sdk.ToolCall{ParentRunID: call.RunID, Tool: "inner", OnEvent: func(e sdk.Event) {
		if e.Progress != nil {
			emit(e)
		}
	}})
	if err != nil {
		return nil, err
	}
	return res.Result, nil
}

// progressHost streams a nested run's progress, about a node of its own.
type progressHost struct{ streamingHost }

func (progressHost) CallTool(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
	req.OnEvent(sdk.Event{Progress: &sdk.Progress{Fraction: 0.5, Message: "half way", Node: "inner"}})
	req.OnEvent(sdk.Event{Progress: &sdk.Progress{Fraction: 1, Message: "all"}})
	return sdk.ToolResult{Result: json.RawMessage(`1`)}, nil
}

// TestProgressCarriesItsNodeOverTheWire: a progress's node (protocol 2)
// reaches the host from the kind, and the kind from the host's stream of
// a nested run; a progress about the run itself has none.
func TestProgressCarriesItsNodeOverTheWire(t *testing.T) {
	c := sdktest.Start(t, progressKind{&echoKind{}}, &progressHost{})
	if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	run := c.Invoke(context.Background(), sdktest.Tool(t, "p", nil), map[string]string{})
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	var got []string
	for _, e := range run.Events {
		if e.Progress != nil {
			got = append(got, fmt.Sprintf("%s|%g|%s", e.Progress.Node, e.Progress.Fraction, e.Progress.Message))
		}
	}
	want := `fetch|-1|node "fetch" done inner|0.5|half way |1|all`
	if strings.Join(got, " ") != want {
		t.Fatalf("progress events\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}
