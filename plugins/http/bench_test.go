package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// BenchmarkCall compares one http tool call through the plugin (over
// gRPC, in-process) with the same request made by a plain Go client.
func BenchmarkCall(b *testing.B) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": 1, "name": "a", "tags": ["x", "y"]}`)
	}))
	b.Cleanup(s.Close)

	b.Run("plugin", func(b *testing.B) {
		c := sdktest.Start(b, &kind{}, nil)
		if err := c.Configure(context.Background(), json.RawMessage(`{"allow_private": true}`)); err != nil {
			b.Fatal(err)
		}
		tool := sdktest.Tool(b, "t", map[string]any{"type": "http", "url": s.URL + "/items/{{id}}"},
			sdk.Param{Name: "id", Type: "integer", Required: true})
		args := map[string]any{"id": 1}
		for b.Loop() {
			if run := c.Invoke(context.Background(), tool, args); run.Err != nil {
				b.Fatal(run.Err)
			}
		}
	})

	b.Run("direct", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		for b.Loop() {
			req, _ := http.NewRequestWithContext(context.Background(), "GET", s.URL+"/items/1", nil)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || !json.Valid(body) {
				b.Fatal(err)
			}
		}
	})
}
