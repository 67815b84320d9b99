package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// contentKind writes log lines for its caller (one of a level no caller
// knows) and one for the host, then returns an image and a resource
// beside its value, as the host's client of a plugin hands them over.
type contentKind struct{}

func (contentKind) Invoke(_ context.Context, _ hostside.Invocation, emit func(sdk.Event)) (json.RawMessage, error) {
	emit(sdk.Event{Log: &sdk.Log{Level: "warning", Message: "careful", ToCaller: true}})
	emit(sdk.Event{Log: &sdk.Log{Level: "loud", Message: "made up", ToCaller: true}})
	emit(sdk.Event{Log: &sdk.Log{Level: "info", Message: "for the host only"}})
	emit(sdk.Event{Content: contentParts})
	return json.RawMessage(`{"w":1}`), nil
}

var contentParts = []sdk.Content{
	{Type: sdk.ContentImage, Data: []byte{0x89, 'P', 'N', 'G', 0}, MIMEType: "image/png"},
	{Type: sdk.ContentResource, URI: "file:///a.txt", Text: "a", MIMEType: "text/plain"},
}

// TestContentAndLogReachTheRun: a result's content is on the result
// event and the run's record, with the value, and reaches a nested
// caller; caller log lines are log events (an unknown level as info), and
// a line for the host is not an event.
func TestContentAndLogReachTheRun(t *testing.T) {
	reg := tools.NewRegistry()
	reg.Replace([]*tools.Tool{
		{Tool: config.Tool{Name: "pic", Description: "A test tool.", Effect: "read"}, Kind: "pic", Run: json.RawMessage(`{"type":"pic"}`)},
		{Tool: config.Tool{Name: "hold", Description: "A test tool.", Effect: "read"}, Kind: "talk", Run: json.RawMessage(`{"type":"talk"}`)},
	})
	talk := &talkKind{gate: make(chan struct{})}
	d := NewDispatcher(reg, func(kind string) (Invoker, bool) {
		if kind == "pic" {
			return contentKind{}, true
		}
		return talk, true
	}, nil, time.Hour)
	t.Cleanup(func() { d.CancelAll("the test is over"); d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	run, err := d.Start(Request{Tool: "pic", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	end, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := contentToClient(contentParts)
	if end.Type != wire.TypeResult || string(end.Result) != `{"w":1}` || !reflect.DeepEqual(end.Content, want) {
		t.Fatalf("the end = %+v; want the value and %+v", end, want)
	}
	var logs []string
	for _, e := range readAll(t, run, 0) {
		if e.Type == wire.TypeLog {
			logs = append(logs, fmt.Sprintf("%s %s", e.Level, e.Message))
		}
	}
	if got := strings.Join(logs, "|"); got != "warning careful|info made up" {
		t.Fatalf("log events = %s", got)
	}
	rec, err := run.Record(false)
	if err != nil || string(rec.Result) != `{"w":1}` || !reflect.DeepEqual(rec.Content, want) {
		t.Fatalf("the record = %+v, %v", rec, err)
	}

	parent, err := d.Start(Request{Tool: "hold", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	res, err := d.CallTool(ctx, sdk.ToolCall{ParentRunID: parent.ID, Tool: "pic", OnEvent: func(sdk.Event) {}})
	if err != nil || res.Error != nil || string(res.Result) != `{"w":1}` || !reflect.DeepEqual(res.Content, contentParts) {
		t.Fatalf("nested call = %+v, %v", res, err)
	}
}

// displayKind prints, shows an image, shows a part no one could draw
// (an image without bytes, from a plugin not built with the SDK), and
// prints again.
type displayKind struct{}

func (displayKind) Invoke(_ context.Context, _ hostside.Invocation, emit func(sdk.Event)) (json.RawMessage, error) {
	emit(sdk.Event{Stdout: []byte("before\n")})
	emit(sdk.Event{Display: &contentParts[0]})
	emit(sdk.Event{Display: &sdk.Content{Type: sdk.ContentImage, MIMEType: "image/png"}})
	emit(sdk.Event{Stdout: []byte("after\n")})
	return json.RawMessage(`null`), nil
}

// TestAShownImageIsAnEventInOrder: a part a run shows is a display event
// between the output printed before and after it; one that isn't a
// valid part is not sent.
func TestAShownImageIsAnEventInOrder(t *testing.T) {
	reg := tools.NewRegistry()
	reg.Replace([]*tools.Tool{{Tool: config.Tool{Name: "show", Description: "A test tool.", Effect: "read"}, Kind: "show", Run: json.RawMessage(`{"type":"show"}`)}})
	d := NewDispatcher(reg, func(string) (Invoker, bool) { return displayKind{}, true }, nil, time.Hour)
	t.Cleanup(func() { d.CancelAll("the test is over"); d.Close() })
	run, err := d.Start(Request{Tool: "show", Principal: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range readAll(t, run, 0) {
		switch e.Type {
		case wire.TypeStdout:
			got = append(got, e.Data)
		case wire.TypeDisplay:
			if len(e.Content) != 1 || !reflect.DeepEqual(e.Content[0], contentToClient(contentParts[:1])[0]) {
				t.Fatalf("display event %+v; want the image", e)
			}
			got = append(got, "[image]")
		}
	}
	if strings.Join(got, "") != "before\n[image]after\n" {
		t.Fatalf("events: %q; want the output before, the image, the output after", got)
	}
}
