package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPCallOverhead measures, side by side in one run, an http tool
// called through the real host with MCP's tools/call at /mcp (the SDK's own
// client, stateless streamable HTTP: one POST a call) against the same
// call over the host's websocket. Each iteration does one of each,
// interleaved, so both see the same machine load; the host is idle first.
func BenchmarkMCPCallOverhead(b *testing.B) {
	srv := jsonServer(b)
	h := startHost(b, hostSpec{
		Config: "[http]\nallow_private = true\n",
		Tools:  map[string]string{"get_item.toml": getItemTool(srv.URL)},
	})
	ws := h.Dial(b)
	ctx := context.Background()
	c := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "bench", Version: "1"}, nil)
	session, err := c.Connect(ctx, &sdkmcp.StreamableClientTransport{
		Endpoint: h.URL("/mcp"), HTTPClient: &http.Client{}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer session.Close()
	mcpCall := func() {
		res, err := session.CallTool(ctx, &sdkmcp.CallToolParams{Name: "get_item", Arguments: map[string]any{"id": "1"}})
		if err != nil {
			b.Fatal(err)
		}
		// A string result is its text, and no structuredContent (MCP
		// allows objects only there).
		if res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
			b.Fatalf("bad MCP result %+v", res)
		}
		if tc, ok := res.Content[0].(*sdkmcp.TextContent); !ok || tc.Text != "item 1" {
			b.Fatalf("bad MCP result text %+v", res.Content[0])
		}
	}
	// One call each, then idle: what is measured is a host that has been up a while.
	warmHTTPCall(b, &http.Client{}, srv.URL, ws)
	mcpCall()
	idleBeforeMeasuring(b)
	var viaWS, viaMCP []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprint("b", i)
		t0 := time.Now()
		ws.Send(map[string]any{"type": "call", "id": id, "tool": "get_item", "args": map[string]any{"id": "1"}})
		frames := ws.UntilEnd(id, 10*time.Second)
		viaWS = append(viaWS, time.Since(t0))
		if frames[len(frames)-1]["result"] != "item 1" {
			b.Fatalf("bad result %v", frames[len(frames)-1])
		}

		t0 = time.Now()
		mcpCall()
		viaMCP = append(viaMCP, time.Since(t0))
	}
	b.StopTimer()
	w50, _, w99 := quantiles(viaWS)
	m50, _, m99 := quantiles(viaMCP)
	b.ReportMetric(w50, "ws-p50-µs")
	b.ReportMetric(w99, "ws-p99-µs")
	b.ReportMetric(m50, "mcp-p50-µs")
	b.ReportMetric(m99, "mcp-p99-µs")
	b.ReportMetric(m50-w50, "added-p50-µs")
	b.ReportMetric(m50/w50, "p50-ratio")
	b.ReportMetric(m99/w99, "p99-ratio")
	b.Logf("\n%-34s %10s %10s\n%-34s %10.0f %10.0f\n%-34s %10.0f %10.0f\n%-34s %10.2f %10.2f  (n=%d)",
		"http tool call via the host", "p50 µs", "p99 µs",
		"websocket call", w50, w99,
		"MCP tools/call (SDK client)", m50, m99,
		"ratio", m50/w50, m99/w99, len(viaWS))
}
