package sdk_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// everyPart is one part of each type, every field its type has.
var everyPart = []sdk.Content{
	{Type: sdk.ContentText, Text: "a caption"},
	{Type: sdk.ContentImage, Data: []byte("\x89PNG\r\n\x1a\n\x00"), MIMEType: "image/png"},
	{Type: sdk.ContentAudio, Data: []byte("RIFF\x00\x01"), MIMEType: "audio/wav"},
	{Type: sdk.ContentResource, URI: "file:///report.txt", Text: "the report", MIMEType: "text/plain"},
	{Type: sdk.ContentResource, URI: "file:///blob.bin", Data: []byte{0, 1, 2, 255}, MIMEType: "application/octet-stream"},
}

// contentKind returns the parts its run table names (in two emits, to
// check their order), a value, and a log line for its caller; a tool
// named "fail" fails after emitting content.
type contentKind struct {
	*echoKind
	parts []sdk.Content
}

func (k contentKind) Invoke(_ context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	emit.LogToCaller("notice", "making content")
	if len(k.parts) > 0 {
		emit.Content(k.parts[0])
		emit.Content(k.parts[1:]...)
	}
	if call.Tool.Name == "fail" {
		return nil, sdk.Errorf(errcode.Failed, "it failed")
	}
	return json.RawMessage(`{"n":1}`), nil
}

// TestContentRoundTripsThroughTheProtocol: every type of part, with
// every field, reaches the host as the kind made it, in order, after the
// run's other events and with its value; a log line for the caller comes
// as one.
func TestContentRoundTripsThroughTheProtocol(t *testing.T) {
	c := sdktest.Start(t, contentKind{&echoKind{}, everyPart}, nil)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "c", nil), map[string]string{})
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	if string(run.Result) != `{"n":1}` {
		t.Fatalf("result = %s", run.Result)
	}
	if got := run.Content(); !reflect.DeepEqual(got, everyPart) {
		t.Fatalf("content\n%+v\nwant\n%+v", got, everyPart)
	}
	if n := len(run.Events); n != 2 || run.Events[0].Log == nil || run.Events[1].Content == nil {
		t.Fatalf("events = %+v, want the log line then the content", run.Events)
	}
	if l := run.Events[0].Log; *l != (sdk.Log{Level: "notice", Message: "making content", ToCaller: true}) {
		t.Fatalf("log = %+v", l)
	}
}

// TestContentOfAFailedRunIsDropped: a run that fails after emitting
// content ends with its error alone.
func TestContentOfAFailedRunIsDropped(t *testing.T) {
	c := sdktest.Start(t, contentKind{&echoKind{}, everyPart}, nil)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "fail", nil), map[string]string{})
	if run.ErrorCode() != errcode.Failed || run.Content() != nil {
		t.Fatalf("err = %v, content = %v", run.Err, run.Content())
	}
}

// TestBadContentFailsTheRun: a part the SDK can't send ends the run with
// an error that names the part and what is wrong, as does content over
// MaxContentBytes.
func TestBadContentFailsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []sdk.Content
		code  string
		want  string
	}{
		{"unknown type", []sdk.Content{{Type: "text", Text: "x"}, {Type: "video", Data: []byte("x")}}, errcode.Failed, `part 2 of the result's content is wrong: its type is "video"`},
		{"image without data", []sdk.Content{{Type: "image", MIMEType: "image/png"}, {Type: "text"}}, errcode.Failed, "part 1 of the result's content is wrong: an image part needs its data"},
		{"audio without mime type", []sdk.Content{{Type: "audio", Data: []byte("x")}, {Type: "text"}}, errcode.Failed, "an audio part needs its MIME type"},
		{"resource without uri", []sdk.Content{{Type: "resource", Text: "x"}, {Type: "text"}}, errcode.Failed, "a resource part needs its URI"},
		{"resource with text and blob", []sdk.Content{{Type: "resource", URI: "a:b", Text: "x", Data: []byte("y")}, {Type: "text"}}, errcode.Failed, "text or data (a blob), not both"},
		{"too large", []sdk.Content{{Type: "image", Data: make([]byte, sdk.MaxContentBytes), MIMEType: "image/png"}, {Type: "text", Text: "x"}}, errcode.TooLarge, "over the 16 MiB a result's content may be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sdktest.Start(t, contentKind{&echoKind{}, tc.parts}, nil)
			run := c.Invoke(context.Background(), sdktest.Tool(t, "c", nil), map[string]string{})
			if run.ErrorCode() != tc.code || !strings.Contains(run.Err.Error(), tc.want) {
				t.Fatalf("err = %v (code %q), want %s containing %q", run.Err, run.ErrorCode(), tc.code, tc.want)
			}
			if run.Content() != nil {
				t.Fatalf("content reached the host: %+v", run.Content())
			}
		})
	}
}

// TestContentNeedsProtocol3: a plugin serving a host of protocol 2 (which
// can't read content) fails a run with content, saying why, instead of
// dropping it; a run without content is served as before.
func TestContentNeedsProtocol3(t *testing.T) {
	c := sdktest.StartPlugin(t, &sdk.KindPlugin{Impl: contentKind{&echoKind{}, everyPart}, Protocol: 2}, nil, false)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "c", nil), map[string]string{})
	if run.ErrorCode() != errcode.Unsupported || !strings.Contains(run.Err.Error(), "speaks plugin protocol 2, and content needs 3") {
		t.Fatalf("err = %v", run.Err)
	}
	c = sdktest.StartPlugin(t, &sdk.KindPlugin{Impl: contentKind{&echoKind{}, nil}, Protocol: 2}, nil, false)
	if run := c.Invoke(context.Background(), sdktest.Tool(t, "c", nil), map[string]string{}); run.Err != nil || string(run.Result) != `{"n":1}` {
		t.Fatalf("a run without content: %s, %v", run.Result, run.Err)
	}
}

// contentHost answers a nested call with content.
type contentHost struct{ streamingHost }

func (contentHost) CallTool(context.Context, sdk.ToolCall) (sdk.ToolResult, error) {
	return sdk.ToolResult{Result: json.RawMessage(`null`), Content: everyPart}, nil
}

// nestingKind returns a nested call's content as its own.
type nestingKind struct{ *echoKind }

func (nestingKind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	res, err := call.Host.CallTool(ctx, sdk.ToolCall{ParentRunID: call.RunID, Tool: "inner", OnEvent: func(sdk.Event) {}})
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, res.Error
	}
	emit.Content(res.Content...)
	return res.Result, nil
}

// TestNestedCallCarriesContent: the content of a nested call's result
// reaches the kind that made it (over CallToolStream), every field intact.
func TestNestedCallCarriesContent(t *testing.T) {
	c := sdktest.Start(t, nestingKind{&echoKind{}}, &contentHost{})
	if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	run := c.Invoke(context.Background(), sdktest.Tool(t, "n", nil), map[string]string{})
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	if string(run.Result) != "null" || !reflect.DeepEqual(run.Content(), everyPart) {
		t.Fatalf("result %s, content %+v", run.Result, run.Content())
	}
}

// displayKind prints, shows an image, prints again, and shows a part the
// SDK can't send when its tool is named "bad".
type displayKind struct{ *echoKind }

func (displayKind) Invoke(_ context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	emit.Stdout([]byte("before\n"))
	emit.Content(everyPart[0])
	emit.Display(everyPart[1])
	emit.Stdout([]byte("after\n"))
	if call.Tool.Name == "bad" {
		emit.Display(sdk.Content{Type: sdk.ContentImage, MIMEType: "image/png"})
	}
	return json.RawMessage(`{"n":2}`), nil
}

// TestDisplayStreamsInOrderAndComesWithTheResult: a part shown with
// Emit.Display reaches the host as an event between the output printed
// before and after it, and is in the result's content too, after the
// parts added before it; a part that can't be sent isn't streamed and
// fails the run, named.
func TestDisplayStreamsInOrderAndComesWithTheResult(t *testing.T) {
	c := sdktest.Start(t, displayKind{&echoKind{}}, nil)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "d", nil), map[string]string{})
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	ev := run.Events
	if len(ev) != 4 || string(ev[0].Stdout) != "before\n" || ev[1].Display == nil || !reflect.DeepEqual(*ev[1].Display, everyPart[1]) ||
		string(ev[2].Stdout) != "after\n" || ev[3].Content == nil {
		t.Fatalf("events = %+v; want stdout, the image shown, stdout, the content", ev)
	}
	if got := run.Content(); !reflect.DeepEqual(got, everyPart[:2]) {
		t.Fatalf("content %+v; want the text added, then the image shown", got)
	}

	run = c.Invoke(context.Background(), sdktest.Tool(t, "bad", nil), map[string]string{})
	if run.ErrorCode() != errcode.Failed || !strings.Contains(run.Err.Error(), "part 3 of the result's content is wrong: an image part needs its data") {
		t.Fatalf("a bad part shown: %v", run.Err)
	}
	for _, e := range run.Events {
		if e.Display != nil && len(e.Display.Data) == 0 {
			t.Fatalf("the bad part was streamed: %+v", run.Events)
		}
	}
}
