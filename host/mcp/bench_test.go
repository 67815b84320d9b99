package mcp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/host/auth"
)

// BenchmarkMCPCall is one tools/call of an in-process tool through the API
// with the SDK's client: what MCP itself costs, without a plugin.
func BenchmarkMCPCall(b *testing.B) {
	h := startHost(b, tokens("ed", auth.Editor))
	s, err := connect(b, h.Srv.URL, "ed-token", nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		res, err := s.CallTool(ctx, &sdkmcp.CallToolParams{Name: "lines", Arguments: map[string]any{"n": 1}})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkMCPCallRaw is BenchmarkMCPCall with a plain HTTP client: one
// POST, its SSE answer read whole.
func BenchmarkMCPCallRaw(b *testing.B) {
	h := startHost(b, tokens("ed", auth.Editor))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lines","arguments":{"n":1}}}`
	for b.Loop() {
		req, _ := http.NewRequest("POST", h.Srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer ed-token")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), `"structuredContent":{"lines":1}`) {
			b.Fatalf("%s", raw)
		}
	}
}

// BenchmarkHTTPCallRaw is the call of BenchmarkMCPCallRaw over the plain
// HTTP API (POST /api/v1/tools/lines/call): what MCP adds to an HTTP call
// is the difference.
func BenchmarkHTTPCallRaw(b *testing.B) {
	h := startHost(b, tokens("ed", auth.Editor))
	for b.Loop() {
		req, _ := http.NewRequest("POST", h.Srv.URL+"/api/v1/tools/lines/call", strings.NewReader(`{"n":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer ed-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), `"result":{"lines":1}`) {
			b.Fatalf("%s", raw)
		}
	}
}
