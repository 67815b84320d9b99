package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// mcpPost posts one JSON-RPC request to the host's /mcp as protocol
// 2025-11-25 (what the TypeScript SDK speaks) and returns the answer's
// SSE data lines.
func mcpPost(ctx context.Context, h *Host, body string) ([]string, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", h.URL("/mcp"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	return data, sc.Err()
}

// Through the real host: a string result is its text over MCP, and a
// client of protocol 2025-11-25 that hangs up cancels its run, down to
// the tool's own outbound request.
func TestMCPEndToEnd(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/items/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %q, "name": "item %s"}`, r.PathValue("id"), r.PathValue("id"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-time.After(30 * time.Second):
		case <-r.Context().Done():
			ended <- struct{}{}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	h := startHost(t, hostSpec{
		Config: "[http]\nallow_private = true\n",
		Tools:  map[string]string{"get_item.toml": getItemTool(srv.URL), "slow.toml": slowTool(srv.URL)},
	})

	data, err := mcpPost(context.Background(), h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_item","arguments":{"id":"1"}}}`)
	if err != nil || len(data) != 1 {
		t.Fatalf("get_item: %v %q", err, data)
	}
	if !strings.Contains(data[0], `"content":[{"type":"text","text":"item 1"}]`) || strings.Contains(data[0], "structuredContent") {
		t.Errorf("a string result over MCP: %s", data[0])
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = mcpPost(ctx, h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("the slow tool's request never came:\n%s", h.Stderr())
	}
	cancel()
	<-done
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("the run went on after its MCP client hung up:\n%s", h.Stderr())
	}

	resp, err := http.Get(h.URL("/.well-known/oauth-protected-resource/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"bearer_methods_supported":["header"]`) {
		t.Errorf("the protected resource metadata: %d %s", resp.StatusCode, body)
	}
}
