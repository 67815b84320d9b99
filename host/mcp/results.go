package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// MetaApproval is the id of the approval a call waits for, in the _meta of
// its tools/call result.
const MetaApproval = "toolhost/approval"

// done is a run's result as MCP content. The run's content parts come
// first, as they are; then its JSON value: an object is the
// structuredContent and, serialised, one text part (MCP asks for both, for
// clients that read text only); any other value is one text part only (a
// string as itself, anything else as JSON), since structuredContent must
// be an object. A null value adds nothing when the run returned content,
// and is the text "null" when it returned nothing else.
func done(run string, result json.RawMessage, parts []wire.Content) (*sdkmcp.CallToolResult, error) {
	res := &sdkmcp.CallToolResult{Meta: runMeta(run), Content: make([]sdkmcp.Content, 0, len(parts)+1)}
	for i, p := range parts {
		c, err := content(p)
		if err != nil {
			return nil, fmt.Errorf("the run %s returned a content part (#%d) MCP can't carry: %w", run, i+1, err)
		}
		res.Content = append(res.Content, c)
	}
	value := bytes.TrimSpace(result)
	if len(value) == 0 || string(value) == "null" {
		if len(parts) == 0 {
			res.Content = append(res.Content, &sdkmcp.TextContent{Text: "null"})
		}
		return res, nil
	}
	switch value[0] {
	case '{':
		res.StructuredContent = json.RawMessage(value)
		res.Content = append(res.Content, &sdkmcp.TextContent{Text: string(value)})
	case '"':
		var s string
		if err := json.Unmarshal(value, &s); err != nil {
			return nil, fmt.Errorf("the run %s returned a string that is not valid JSON: %w", run, err)
		}
		res.Content = append(res.Content, &sdkmcp.TextContent{Text: s})
	default:
		res.Content = append(res.Content, &sdkmcp.TextContent{Text: string(value)})
	}
	return res, nil
}

// content is one part of a run's result as MCP content.
func content(p wire.Content) (sdkmcp.Content, error) {
	switch p.Type {
	case wire.ContentText:
		return &sdkmcp.TextContent{Text: p.Text}, nil
	case wire.ContentImage:
		return &sdkmcp.ImageContent{Data: p.Data, MIMEType: p.MIMEType}, nil
	case wire.ContentAudio:
		return &sdkmcp.AudioContent{Data: p.Data, MIMEType: p.MIMEType}, nil
	case wire.ContentResource:
		if p.URI == "" {
			return nil, fmt.Errorf("a resource part needs a uri")
		}
		r := &sdkmcp.ResourceContents{URI: p.URI, MIMEType: p.MIMEType, Text: p.Text}
		if p.Text == "" {
			// A blob, possibly empty: Blob is sent whenever it is not nil.
			r.Blob = p.Data
			if r.Blob == nil {
				r.Blob = []byte{}
			}
		}
		return &sdkmcp.EmbeddedResource{Resource: r}, nil
	}
	return nil, fmt.Errorf("unknown content type %q (text, image, audio and resource are known)", p.Type)
}

// failed is a refused call or a failed run, for the model to read.
func failed(run string, e *errcode.Error) *sdkmcp.CallToolResult {
	if e == nil {
		e = &errcode.Error{Code: wire.CodeFailed, Message: "the run failed without saying why"}
	}
	body, _ := json.Marshal(map[string]any{"error": wire.Error{Code: e.Code, Message: e.Message}})
	return &sdkmcp.CallToolResult{
		Meta:              runMeta(run),
		IsError:           true,
		Content:           []sdkmcp.Content{&sdkmcp.TextContent{Text: e.Code + ": " + e.Message}},
		StructuredContent: json.RawMessage(body),
	}
}

// awaiting answers a call whose run waits for a person's approval: the run
// goes on waiting. The text is for the model, which can't approve
// anything: it says a person must, and names no endpoint; the ids are in
// structuredContent and _meta for the client.
func awaiting(run, tool string, e wire.Event) *sdkmcp.CallToolResult {
	what := "the call of " + tool
	if e.Tool != "" && e.Tool != tool {
		what += " (its call of " + e.Tool + ")"
	}
	msg := fmt.Sprintf("%s waits for a person to approve it, in toolhost's web UI or with their approver; "+
		"it goes on once approved (run %s, approval %s)", what, run, e.Approval)
	body, _ := json.Marshal(map[string]any{
		"error":    wire.Error{Code: wire.CodeApprovalRequired, Message: msg},
		"approval": map[string]string{"id": e.Approval}, "run": run,
	})
	meta := runMeta(run)
	meta[MetaApproval] = e.Approval
	return &sdkmcp.CallToolResult{
		Meta:              meta,
		IsError:           true,
		Content:           []sdkmcp.Content{&sdkmcp.TextContent{Text: wire.TypeApprovalRequired + ": " + msg}},
		StructuredContent: json.RawMessage(body),
	}
}

func runMeta(run string) sdkmcp.Meta {
	if run == "" {
		return nil
	}
	return sdkmcp.Meta{MetaRun: run}
}
