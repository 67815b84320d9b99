package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/client/wire"
)

// asSent is a result as the client gets it.
func asSent(t *testing.T, res *sdkmcp.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every JSON value a run returns makes a result MCP allows:
// structuredContent an object or absent, and text that reads as the
// value (a string as itself).
func TestDoneValues(t *testing.T) {
	for _, c := range []struct {
		result     string
		text       string
		structured string // "" for none
	}{
		{`{"a":1}`, `{"a":1}`, `{"a":1}`},
		{`"A short summary."`, `A short summary.`, ""},
		{`"say \"hi\"\n"`, "say \"hi\"\n", ""},
		{`[1,2]`, `[1,2]`, ""},
		{`42`, `42`, ""},
		{`true`, `true`, ""},
		{`null`, `null`, ""},
		{``, `null`, ""},
	} {
		res, err := done("r1", json.RawMessage(c.result), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.result, err)
		}
		if len(res.Content) != 1 || res.Content[0].(*sdkmcp.TextContent).Text != c.text {
			t.Errorf("%s: content %s, want one text %q", c.result, asSent(t, res), c.text)
		}
		var got struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		_ = json.Unmarshal([]byte(asSent(t, res)), &got)
		if string(got.StructuredContent) != c.structured {
			t.Errorf("%s: structuredContent %s, want %q", c.result, got.StructuredContent, c.structured)
		}
		if res.IsError || res.Meta[MetaRun] != "r1" {
			t.Errorf("%s: %s", c.result, asSent(t, res))
		}
	}
}

// A run's content parts become MCP content of their types, in order, and
// its value follows them.
func TestDoneContent(t *testing.T) {
	parts := []wire.Content{
		{Type: wire.ContentText, Text: "hello"},
		{Type: wire.ContentImage, Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
		{Type: wire.ContentAudio, Data: []byte("RIFF"), MIMEType: "audio/wav"},
		{Type: wire.ContentResource, URI: "file:///a.txt", Text: "a text", MIMEType: "text/plain"},
		{Type: wire.ContentResource, URI: "file:///b.bin", Data: []byte{1, 2}, MIMEType: "application/octet-stream"},
	}
	res, err := done("r1", json.RawMessage(`{"n":2}`), parts)
	if err != nil {
		t.Fatal(err)
	}
	w := asSent(t, res)
	var got struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Data     string `json:"data"`
			MIMEType string `json:"mimeType"`
			Resource *struct {
				URI      string `json:"uri"`
				Text     string `json:"text"`
				Blob     string `json:"blob"`
				MIMEType string `json:"mimeType"`
			} `json:"resource"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(w), &got); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, c := range got.Content {
		types = append(types, c.Type)
	}
	if strings.Join(types, ",") != "text,image,audio,resource,resource,text" {
		t.Fatalf("content types %v: %s", types, w)
	}
	c := got.Content
	if c[0].Text != "hello" || c[1].Data != "iVBORw==" || c[1].MIMEType != "image/png" || c[2].Data != "UklGRg==" || c[2].MIMEType != "audio/wav" {
		t.Errorf("text, image, audio: %s", w)
	}
	if r := c[3].Resource; r == nil || r.URI != "file:///a.txt" || r.Text != "a text" || r.MIMEType != "text/plain" || r.Blob != "" {
		t.Errorf("a text resource: %s", w)
	}
	if r := c[4].Resource; r == nil || r.URI != "file:///b.bin" || r.Blob != "AQI=" || r.Text != "" {
		t.Errorf("a blob resource: %s", w)
	}
	if c[5].Text != `{"n":2}` || string(got.StructuredContent) != `{"n":2}` {
		t.Errorf("the value after the parts: %s", w)
	}

	// Content only, a null value: exactly the parts.
	res, _ = done("r1", json.RawMessage(`null`), parts[:1])
	if len(res.Content) != 1 || res.StructuredContent != nil {
		t.Errorf("content with a null value: %s", asSent(t, res))
	}
	// A part MCP can't carry is an error naming it, not dropped.
	if _, err := done("r1", nil, []wire.Content{{Type: "video"}}); err == nil || !strings.Contains(err.Error(), `"video"`) {
		t.Errorf("an unknown content type: %v", err)
	}
	if _, err := done("r1", nil, []wire.Content{{Type: wire.ContentResource}}); err == nil || !strings.Contains(err.Error(), "uri") {
		t.Errorf("a resource without a uri: %v", err)
	}
}

// A run that waits for approval answers at once, with the ids for the
// client, and a text for the model that names no endpoint.
func TestAwaitingApproval(t *testing.T) {
	res := awaiting("r1", "wipe", wire.Event{Type: wire.TypeApprovalRequired, Approval: "a7", Tool: "wipe"})
	w := asSent(t, res)
	if !res.IsError || res.Meta[MetaRun] != "r1" || res.Meta[MetaApproval] != "a7" {
		t.Errorf("%s", w)
	}
	if !strings.Contains(w, `"approval":{"id":"a7"}`) || !strings.Contains(w, `"run":"r1"`) {
		t.Errorf("structured content without the ids: %s", w)
	}
	text := res.Content[0].(*sdkmcp.TextContent).Text
	if !strings.Contains(text, "a person to approve it") || strings.Contains(text, "/api/") {
		t.Errorf("the text: %q", text)
	}
	nested := awaiting("r1", "plan", wire.Event{Approval: "a8", Tool: "wipe"})
	if text := nested.Content[0].(*sdkmcp.TextContent).Text; !strings.Contains(text, "the call of plan (its call of wipe)") {
		t.Errorf("a nested call waiting: %q", text)
	}
}

func TestProgressText(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		e    wire.Event
		want string
	}{
		{wire.Event{Message: "step"}, "step"},
		{wire.Event{Fraction: f(0.5), Message: "half way"}, "50% half way"},
		{wire.Event{Fraction: f(1)}, "100%"},
		{wire.Event{Fraction: f(-1), Message: "unknown"}, "unknown"},
	} {
		if got := progressText(c.e); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}
