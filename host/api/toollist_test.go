package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestToolListFormats: GET /api/v1/tools and list_tools give the tools in
// the format asked for; the default is today's specs, with effect and
// kind; a bad format or strict is a 400 (bad_frame on the websocket)
// naming what is taken.
func TestToolListFormats(t *testing.T) {
	h := newTestHost(t, Options{})
	n := len(fakeTools())
	for _, c := range []struct {
		query    string
		has, not []string // keys of the first tool
	}{
		{"", []string{"type", "function", "effect", "kind"}, nil},
		{"?format=toolhost", []string{"type", "function", "effect", "kind"}, nil},
		{"?format=openai", []string{"type", "function"}, []string{"effect", "kind"}},
		{"?format=openai&strict=true", []string{"type", "function"}, []string{"effect", "kind"}},
		{"?format=anthropic", []string{"name", "description", "input_schema"}, []string{"type", "effect"}},
		{"?format=mcp", []string{"name", "description", "inputSchema", "annotations"}, []string{"effect"}},
	} {
		status, body, _ := do(t, h, "GET", "/api/v1/tools"+c.query, "", "")
		list, _ := body["tools"].([]any)
		if status != 200 || len(list) != n {
			t.Errorf("%s: %d %v", c.query, status, body)
			continue
		}
		first := list[0].(map[string]any)
		for _, k := range c.has {
			if _, ok := first[k]; !ok {
				t.Errorf("%s: no %q in %v", c.query, k, first)
			}
		}
		for _, k := range c.not {
			if _, ok := first[k]; ok {
				t.Errorf("%s: %q in %v", c.query, k, first)
			}
		}
		want := strings.TrimPrefix(strings.Split(c.query, "&")[0], "?format=")
		if want == "" {
			want = "toolhost"
		}
		if body["format"] != want {
			t.Errorf("%s: format %v, want %s", c.query, body["format"], want)
		}
	}

	// Strict: every param required; lines' optional ones take null.
	_, body, _ := do(t, h, "GET", "/api/v1/tools?format=openai&strict=1", "", "")
	var fn map[string]any
	for _, tool := range body["tools"].([]any) {
		if f := tool.(map[string]any)["function"].(map[string]any); f["name"] == "lines" {
			fn = f
		}
	}
	if fn == nil || fn["strict"] != true {
		t.Fatalf("strict lines: %v", fn)
	}
	params := fn["parameters"].(map[string]any)
	if got, _ := json.Marshal(params["required"]); string(got) != `["n","size","delay_ms","stderr"]` {
		t.Errorf("strict required: %s", got)
	}
	if got, _ := json.Marshal(params["properties"].(map[string]any)["stderr"]); string(got) != `{"type":["boolean","null"]}` {
		t.Errorf("strict stderr: %s", got)
	}

	for _, c := range []struct{ query, want string }{
		{"?format=gemini", `format must be one of toolhost, openai, anthropic, mcp, not "gemini"`},
		{"?format=openai&strict=yes", `strict must be true or false, not "yes"`},
		{"?format=anthropic&strict=true", `strict is OpenAI's strict mode: it goes with format=openai, not anthropic`},
	} {
		status, body, _ := do(t, h, "GET", "/api/v1/tools"+c.query, "", "")
		if status != 400 || errCode(body) != "bad_request" || body["error"].(map[string]any)["message"] != c.want {
			t.Errorf("%s: %d %v, want 400 %q", c.query, status, body, c.want)
		}
	}

	// The websocket: the same choice in list_tools.
	ws := h.dial(t, nil)
	ws.send(map[string]any{"type": "list_tools", "id": "d"})
	if f := ws.read(5 * time.Second); f.Type != "tools" || f.ID != "d" || len(f.Tools) != n || f.Tools[0].Kind == "" || f.Tools[0].Effect == "" {
		t.Errorf("default list_tools = %+v", f)
	}
	ws.send(map[string]any{"type": "list_tools", "id": "a", "format": "anthropic"})
	_ = ws.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got struct {
		Type, ID, Format string
		Tools            []map[string]any
	}
	if err := ws.conn.ReadJSON(&got); err != nil || got.Type != "tools" || got.ID != "a" || got.Format != "anthropic" || len(got.Tools) != n || got.Tools[0]["input_schema"] == nil {
		t.Errorf("anthropic list_tools = %+v, %v", got, err)
	}
	ws.send(map[string]any{"type": "list_tools", "id": "b", "format": "yaml"})
	if f := ws.read(5 * time.Second); f.Type != "error" || f.ID != "b" || f.Error.Code != "bad_frame" || !strings.Contains(f.Error.Message, `not "yaml"`) {
		t.Errorf("bad format list_tools = %+v", f)
	}
	ws.send(map[string]any{"type": "ping", "id": "p"})
	if f := ws.read(5 * time.Second); f.Type != "pong" {
		t.Errorf("after a bad list_tools the connection serves on: %+v", f)
	}
}
