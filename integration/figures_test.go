package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// figureCode prints, shows a matplotlib figure, prints again, and leaves a second figure open
// (shown at the cell's end).
const figureCode = "import matplotlib.pyplot as plt, pandas as pd\nprint('before')\n" +
	"pd.Series([1, 3, 2]).plot()\nplt.show()\nprint('after')\nplt.figure()\nplt.bar(['a', 'b'], [3, 5])\n"

// TestFiguresReachEveryClient: a conversation's run_python that draws with matplotlib (on the
// session rootfs, with pandas) sends each figure as a display event on the websocket, between
// what it printed before and after, and as image content of the result; the HTTP call's answer
// has the same images; the official MCP SDK's client gets them as ImageContent beside the
// result's text.
func TestFiguresReachEveryClient(t *testing.T) {
	s := startSessionHost(t)
	isPNG := func(what, b64 string) []byte {
		t.Helper()
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || len(data) < 2000 {
			t.Fatalf("%s: %d bytes (%v), %q…", what, len(data), err, data[:min(8, len(data))])
		}
		return data
	}

	// The websocket: the events in order.
	ws := s.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "f1", "tool": "run_python", "session": "figs", "args": map[string]string{"code": figureCode}})
	var order []string
	var shown []string
	var end Frame
	for _, f := range ws.UntilEnd("f1", 3*time.Minute) {
		switch f.Str("type") {
		case "stdout":
			order = append(order, f.Str("data"))
		case "display":
			parts, _ := f["content"].([]any)
			p, _ := parts[0].(map[string]any)
			if len(parts) != 1 || p["type"] != "image" || p["mime_type"] != "image/png" {
				t.Fatalf("a display event: %v", f)
			}
			isPNG("a display event's image", p["data"].(string))
			shown = append(shown, p["data"].(string))
			order = append(order, "[figure]")
		case "result", "error":
			end = f
		}
	}
	if got := strings.Join(order, ""); got != "before\n[figure]after\n[figure]" {
		t.Fatalf("the run's events: %q (ended %v); want before, a figure, after, a figure", got, end)
	}
	res, _ := end["result"].(map[string]any)
	parts, _ := end["content"].([]any)
	if end.Str("type") != "result" || res["images"] != float64(2) || res["exit_code"] != float64(0) || len(parts) != 2 {
		t.Fatalf("the result: %v", end)
	}
	for i, p := range parts {
		if d, _ := p.(map[string]any)["data"].(string); d != shown[i] {
			t.Errorf("the result's image %d differs from the one shown", i+1)
		}
	}

	// HTTP: the call's answer has the images as content.
	body, _ := json.Marshal(map[string]string{"code": "plt.plot([1, 2])\nplt.show()"})
	code, out := postJSON(t, s.URL("/api/v1/tools/run_python/call?session=figs"), string(body))
	content, _ := out["content"].([]any)
	if code != http.StatusOK || len(content) != 1 {
		t.Fatalf("the HTTP call: %d %v", code, out)
	}
	isPNG("the HTTP answer's image", content[0].(map[string]any)["data"].(string))

	// MCP, with the official Go SDK's client.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "figures", Version: "1"}, nil)
	session, err := c.Connect(ctx, &sdkmcp.StreamableClientTransport{Endpoint: s.URL("/mcp"), HTTPClient: &http.Client{}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	mres, err := session.CallTool(ctx, &sdkmcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "fig = plt.figure()\nplt.pie([1, 2])\nfig"},
		Meta: sdkmcp.Meta{"toolhost/session": "figs"}})
	if err != nil {
		t.Fatal(err)
	}
	var images, texts int
	for _, c := range mres.Content {
		switch c := c.(type) {
		case *sdkmcp.ImageContent:
			images++
			if c.MIMEType != "image/png" || !bytes.HasPrefix(c.Data, []byte("\x89PNG")) {
				t.Errorf("MCP image: %s, %d bytes", c.MIMEType, len(c.Data))
			}
		case *sdkmcp.TextContent:
			texts++
			if !strings.Contains(c.Text, `"images":1`) {
				t.Errorf("MCP text: %s", c.Text)
			}
		}
	}
	if mres.IsError || images != 1 || texts != 1 {
		t.Fatalf("the MCP result: error %v, %d images, %d texts; want the figure and the result's text", mres.IsError, images, texts)
	}
}
