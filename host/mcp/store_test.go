package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
)

// TestMCPStoreUnavailable: an MCP call made while the store's PostgreSQL
// server is stopped is refused with store_unavailable and the sentence a
// caller can act on; once the server is back the call runs.
func TestMCPStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	st, srv := sessionstest.Postgres(t)
	h := startHost(t, tokens("ed", auth.Editor))
	h.Runs.SetLedger(st, st.Clock())
	s, err := connect(t, h.Srv.URL, "ed-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	res := call(t, s, "lines", map[string]any{"n": 1}, nil)
	sc, _ := json.Marshal(res.StructuredContent)
	if want := `{"error":{"code":"store_unavailable","message":"the store's database can't be reached; try again shortly"}}`; !res.IsError || string(sc) != want {
		t.Fatalf("a call with the store down: %v %s; want %s", res.IsError, sc, want)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if res := call(t, s, "lines", map[string]any{"n": 1}, nil); res.IsError {
		t.Fatalf("a call once the store is back: %s", text(res))
	}
}
