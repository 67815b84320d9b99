package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// progressKind reports progress about a node of its run (as a graph of
// protocol 2 does) and about the run itself.
type progressKind struct{}

func (progressKind) Invoke(_ context.Context, _ hostside.Invocation, emit func(sdk.Event)) (json.RawMessage, error) {
	emit(sdk.Event{Progress: &sdk.Progress{Fraction: -1, Message: `node "fetch" done`, Node: "fetch"}})
	emit(sdk.Event{Progress: &sdk.Progress{Fraction: 0.5, Message: "half way"}})
	return json.RawMessage(`1`), nil
}

// TestProgressKeepsItsNode: a progress's node reaches the run's client
// events ("node" on progress), and a nested caller's stream.
func TestProgressKeepsItsNode(t *testing.T) {
	reg := tools.NewRegistry()
	reg.Replace([]*tools.Tool{
		{Tool: config.Tool{Name: "prog", Description: "A test tool.", Effect: "read"}, Kind: "prog", Run: json.RawMessage(`{"type":"prog"}`)},
		{Tool: config.Tool{Name: "hold", Description: "A test tool.", Effect: "read"}, Kind: "talk", Run: json.RawMessage(`{"type":"talk"}`)},
	})
	talk := &talkKind{gate: make(chan struct{})}
	d := NewDispatcher(reg, func(kind string) (Invoker, bool) {
		if kind == "prog" {
			return progressKind{}, true
		}
		return talk, true
	}, nil, time.Hour)
	t.Cleanup(func() { d.CancelAll("the test is over"); d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	run, err := d.Start(Request{Tool: "prog", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range readAll(t, run, 0) {
		if e.Type == wire.TypeProgress {
			got = append(got, fmt.Sprintf("%s|%g|%s", e.Node, *e.Fraction, e.Message))
		}
	}
	want := `fetch|-1|node "fetch" done |0.5|half way`
	if strings.Join(got, " ") != want {
		t.Fatalf("progress events\n%s\nwant\n%s", strings.Join(got, " "), want)
	}

	parent, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	got = nil
	res, err := d.CallTool(ctx, sdk.ToolCall{ParentRunID: parent.ID, Tool: "prog", OnEvent: func(e sdk.Event) {
		if e.Progress != nil {
			got = append(got, fmt.Sprintf("%s|%g|%s", e.Progress.Node, e.Progress.Fraction, e.Progress.Message))
		}
	}})
	if err != nil || res.Error != nil {
		t.Fatalf("nested call: %v %v", err, res.Error)
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("nested progress events\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}
