package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// contentCode returns a part of each type and a value, and reports progress and log lines while
// it runs, the first well before it ends.
const contentCode = `import time
import toolhost

def run():
    toolhost.progress(0.25, "a quarter")
    time.sleep(1.5)
    toolhost.log("warning", "careful: é\n\"quoted\"")
    print("printed")
    toolhost.progress(message="no idea how far")
    toolhost.progress(1)
    return toolhost.content(
        toolhost.text("a caption"),
        toolhost.image(b"\x89PNG\r\n\x1a\n\x00\xff", "image/png"),
        toolhost.audio(bytearray(b"RIFF\x00\x01"), "audio/wav"),
        toolhost.resource("file:///report.txt", text="the report", mime_type="text/plain"),
        toolhost.resource("file:///blob.bin", blob=bytes([0, 1, 2, 255])),
        value={"n": 1},
    )
`

// TestToolhostModuleContentProgressAndLog: every content type reaches the host byte for byte and
// in order with the value; progress and log lines are events, the first streamed while the code
// still runs, in the order the code made them.
func TestToolhostModuleContentProgressAndLog(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type seen struct {
		e  sdk.Event
		at time.Time
	}
	var (
		mu     sync.Mutex
		events []seen
	)
	result, err := c.KindClient.Invoke(ctx, hostside.Invocation{Tool: pyTool(t, contentCode, nil), Args: []byte(`{}`), RunID: "rtest"}, func(e sdk.Event) {
		mu.Lock()
		events = append(events, seen{e, time.Now()})
		mu.Unlock()
	})
	ended := time.Now()
	if err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	if string(result) != `{"n": 1}` {
		t.Fatalf("result = %s", result)
	}
	var told []string
	var content []sdk.Content
	var firstAt time.Time
	for _, s := range events {
		switch e := s.e; {
		case e.Progress != nil:
			told = append(told, fmt.Sprintf("progress %g %q", e.Progress.Fraction, e.Progress.Message))
			if firstAt.IsZero() {
				firstAt = s.at
			}
		case e.Log != nil:
			told = append(told, fmt.Sprintf("log %s %q %v", e.Log.Level, e.Log.Message, e.Log.ToCaller))
		case e.Content != nil:
			content = append(content, e.Content...)
		}
	}
	want := []string{
		`progress 0.25 "a quarter"`,
		`log warning "careful: é\n\"quoted\"" true`,
		`progress -1 "no idea how far"`,
		`progress 1 ""`,
	}
	if !reflect.DeepEqual(told, want) {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}
	if early := ended.Sub(firstAt); early < time.Second {
		t.Errorf("the first progress came %s before the end; it should come as it is made, 1.5 s before", early)
	}
	wantContent := []sdk.Content{
		{Type: "text", Text: "a caption"},
		{Type: "image", Data: []byte("\x89PNG\r\n\x1a\n\x00\xff"), MIMEType: "image/png"},
		{Type: "audio", Data: []byte("RIFF\x00\x01"), MIMEType: "audio/wav"},
		{Type: "resource", URI: "file:///report.txt", Text: "the report", MIMEType: "text/plain"},
		{Type: "resource", URI: "file:///blob.bin", Data: []byte{0, 1, 2, 255}},
	}
	if !reflect.DeepEqual(content, wantContent) {
		t.Fatalf("content\n%+v\nwant\n%+v", content, wantContent)
	}
	// Content alone: the value is null; a plain return has no content.
	r := invoke(t, c, "import toolhost\ndef run():\n    return toolhost.content(toolhost.text('only'))\n", nil, nil)
	wantResult(t, r, `null`)
	if got := r.Content(); len(got) != 1 || got[0].Text != "only" {
		t.Fatalf("content = %+v", got)
	}
	r = invoke(t, c, "def run():\n    return {'plain': True}\n", nil, nil)
	wantResult(t, r, `{"plain": true}`)
	if r.Content() != nil {
		t.Fatalf("a plain result came with content %+v", r.Content())
	}
}

// TestToolhostModuleRefusesBadArguments: a wrong argument is a Python exception at the call,
// whose message says what is wrong; the run fails with it.
func TestToolhostModuleRefusesBadArguments(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	for _, tc := range []struct{ call, want string }{
		{`toolhost.image("not bytes", "image/png")`, "TypeError: toolhost.image: data must be bytes, not str"},
		{`toolhost.image(b"x", "text/plain")`, "ValueError: toolhost.image: mime_type must be a MIME type such as image/png, not 'text/plain'"},
		{`toolhost.audio([1, 2], "audio/wav")`, "TypeError: toolhost.audio: data must be bytes, not list"},
		{`toolhost.log("loud", "x")`, "ValueError: toolhost.log: level must be one of debug, info, notice, warning, error, critical, alert, emergency, not 'loud'"},
		{`toolhost.log("info", 42)`, "TypeError: toolhost.log: message must be a str, not int"},
		{`toolhost.progress(1.5)`, "ValueError: toolhost.progress: fraction must be from 0 to 1 (or None), not 1.5"},
		{`toolhost.progress(-0.1)`, "ValueError: toolhost.progress: fraction must be from 0 to 1 (or None), not -0.1"},
		{`toolhost.progress(float("nan"))`, "ValueError: toolhost.progress: fraction must be from 0 to 1 (or None), not nan"},
		{`toolhost.progress("half")`, "TypeError: toolhost.progress: fraction must be a number from 0 to 1 or None, not str"},
		{`toolhost.progress(0.5, "x" * 70000)`, "ValueError: toolhost.progress: the message is 70000 characters; at most 65536"},
		{`toolhost.resource("file:///a")`, "TypeError: toolhost.resource: give text or blob (bytes), one of them"},
		{`toolhost.resource("file:///a", text="t", blob=b"b")`, "TypeError: toolhost.resource: give text or blob (bytes), one of them"},
		{`toolhost.resource("file:///a", blob="not bytes")`, "TypeError: toolhost.resource: blob must be bytes, not str"},
		{`toolhost.content("a string")`, "TypeError: toolhost.content: part 1 is a str; make parts with toolhost.text, image, audio or resource"},
	} {
		code := "import toolhost\ndef run():\n    return " + tc.call + "\n"
		r := invoke(t, c, code, nil, nil)
		wantError(t, r, codeCodeError, "the code failed: "+tc.want)
	}
	r := invoke(t, c, "import toolhost\ndef run():\n    return toolhost.content(toolhost.text('x'), value={1, 2})\n", nil, nil)
	wantError(t, r, codeBadResult, "the code's result isn't JSON: set is not JSON serializable")
}

// TestToolhostChannelCantBeForged: what the code prints is its output, whatever it looks like
// (fake event lines, fake answers, fake client frames); what it writes to fd 3 itself is an event
// only when it is a well-formed progress or log line, and anything else there fails the run with
// nothing of it emitted.
func TestToolhostChannelCantBeForged(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	fakes := `{"event": "log", "level": "error", "message": "forged"}
{"event": "progress", "fraction": 0.5, "message": "forged"}
{"ok": true, "result": 666, "content": [{"type": "text", "text": "forged"}]}
{"type": "result", "run": "r1", "seq": 9, "result": 666}
`
	code := "import sys\ndef run():\n    sys.stdout.write(" + fmt.Sprintf("%q", fakes) + ")\n    sys.stderr.write(" + fmt.Sprintf("%q", fakes) + ")\n    return 1\n"
	r := invoke(t, c, code, nil, nil)
	wantResult(t, r, `1`)
	if r.Stdout() != fakes || r.Stderr() != fakes {
		t.Fatalf("stdout %q, stderr %q; want the fake lines as printed", r.Stdout(), r.Stderr())
	}
	for _, e := range r.Events {
		if e.Progress != nil || e.Log != nil || e.Content != nil {
			t.Fatalf("printing made an event: %+v", e)
		}
	}

	for _, tc := range []struct{ name, write string }{
		{"another event type", `{"event": "stdout", "message": "forged"}\n`},
		{"a result as an event", `{"event": "result", "message": "", "result": 666}\n`},
		{"an unknown field", `{"event": "log", "level": "info", "message": "m", "data": "forged"}\n`},
		{"a level toolhost doesn't know", `{"event": "log", "level": "fatal", "message": "m"}\n`},
		{"a fraction out of range", `{"event": "progress", "fraction": 7, "message": "m"}\n`},
		{"not JSON", `garbage\n`},
		{"a broken frame, then the module", `{"event": "log", "level": "info", "mess`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := "import os, toolhost\ndef run():\n    os.write(3, b'" + tc.write + "')\n" +
				"    toolhost.log('info', 'after')\n    print('still running')\n    return 1\n"
			r := invoke(t, c, code, nil, nil)
			if r.ErrorCode() != codeCodeError || !strings.Contains(r.Err.Error(), "the code wrote to fd 3, the channel of the module toolhost, what toolhost can't read") {
				t.Fatalf("err = %s %v; want the run failed for what it wrote to fd 3", r.ErrorCode(), r.Err)
			}
			for _, e := range r.Events {
				if e.Progress != nil || e.Log != nil || e.Content != nil {
					t.Fatalf("a forged line made an event: %+v", e)
				}
			}
		})
	}
	// A well-formed line written by hand is what the module would have sent: no more.
	r = invoke(t, c, "import os\ndef run():\n    os.write(3, b'{\"event\": \"log\", \"level\": \"info\", \"message\": \"by hand\"}\\n')\n    return 2\n", nil, nil)
	wantResult(t, r, `2`)
	if len(r.Events) != 1 || r.Events[0].Log == nil || *r.Events[0].Log != (sdk.Log{Level: "info", Message: "by hand", ToCaller: true}) {
		t.Fatalf("events = %+v", r.Events)
	}
}
