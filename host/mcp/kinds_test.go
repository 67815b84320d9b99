package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/mcp"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// talkKind's "value" returns its argument v as the run's value; its
// "talk" logs at debug, info and error, then returns "ok".
type talkKind struct{}

func (talkKind) Invoke(_ context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	if inv.Tool.Name == "value" {
		var a struct {
			V json.RawMessage `json:"v"`
		}
		_ = json.Unmarshal(inv.Args, &a)
		return a.V, nil
	}
	for _, l := range []sdk.Log{{Level: "debug", Message: "detail"}, {Level: "info", Message: "started"}, {Level: "error", Message: "bad"}} {
		l.ToCaller = true
		onEvent(sdk.Event{Log: &l})
	}
	return json.RawMessage(`"ok"`), nil
}

// talkHost serves a bare MCP handler over a dispatcher of talkKind's
// tools, for the local caller.
func talkHost(t testing.TB) (*httptest.Server, *runs.Dispatcher) {
	t.Helper()
	run := json.RawMessage(`{"type":"talk"}`)
	list := []*tools.Tool{
		{Tool: config.Tool{Name: "value", Description: "Return v.", Effect: "read", Params: []config.Param{{Name: "v", Type: "json"}}}, Kind: "talk", Run: run},
		{Tool: config.Tool{Name: "talk", Description: "Log.", Effect: "read"}, Kind: "talk", Run: run},
	}
	reg := tools.NewRegistry()
	reg.Replace(list)
	d := runs.NewDispatcher(reg, func(kind string) (runs.Invoker, bool) { return talkKind{}, kind == "talk" }, nil, time.Hour)
	t.Cleanup(d.Close)
	h := mcp.New(mcp.Options{Dispatcher: d, Tools: func(auth.Identity) []tools.FunctionSpec {
		var specs []tools.FunctionSpec
		for _, tool := range reg.List() {
			specs = append(specs, tool.Spec())
		}
		return specs
	}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Serve(w, r, auth.Local()) }))
	t.Cleanup(srv.Close)
	return srv, d
}

// Every result type reaches the SDK's client as MCP has it: it accepts
// each (structuredContent an object or absent), and the text reads as the
// value.
func TestMCPResultTypes(t *testing.T) {
	srv, _ := talkHost(t)
	c := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "t", Version: "1"}, nil)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		s, err := c.Connect(context.Background(), &sdkmcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: true},
			&sdkmcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, v := range []struct {
			value, text, structured string
		}{
			{`{"a":[1,2]}`, `{"a":[1,2]}`, `{"a":[1,2]}`},
			{`"A short summary."`, `A short summary.`, `null`},
			{`[1,2]`, `[1,2]`, `null`},
			{`42`, `42`, `null`},
			{`true`, `true`, `null`},
			{`null`, `null`, `null`},
		} {
			res := call(t, s, "value", map[string]any{"v": json.RawMessage(v.value)}, nil)
			sc, _ := json.Marshal(res.StructuredContent)
			if res.IsError || text(res) != v.text || string(sc) != v.structured {
				t.Errorf("%s, a result %s: %v text %q structured %s, want %q %s", version, v.value, res.IsError, text(res), sc, v.text, v.structured)
			}
		}
	}
}

// A run's log events come as log notifications at the call's level: info
// unless the caller set another with logging/setLevel, or the call's
// _meta says one.
func TestMCPLogNotifications(t *testing.T) {
	srv, d := talkHost(t)
	const v = "2025-11-25"
	logs := func(meta string) []string {
		params := `"name":"talk","arguments":{}`
		if meta != "" {
			params += `,"_meta":{` + meta + `}`
		}
		_, msgs := send(context.Background(), t, srv.URL, "", v, rpcBody(v, "1", "tools/call", params))
		var got []string
		for _, m := range msgs {
			if m.Method != "notifications/message" {
				continue
			}
			var p struct {
				Level  string `json:"level"`
				Logger string `json:"logger"`
				Data   string `json:"data"`
			}
			_ = json.Unmarshal(m.Params, &p)
			got = append(got, p.Level+":"+p.Logger+":"+p.Data)
		}
		if len(msgs) == 0 || msgs[len(msgs)-1].Result == nil {
			t.Fatalf("no result: %+v", msgs)
		}
		return got
	}
	first := logs("")
	var logged bool
	for _, r := range d.List() {
		events, _ := r.Events(0)
		for _, e := range events {
			logged = logged || e.Type == "log"
		}
	}
	if !logged {
		t.Fatal("the run recorded no log events: the caller's log lines never reached the run")
	}
	if strings.Join(first, "|") != "info:talk:started|error:talk:bad" {
		t.Errorf("at the default level: %q", first)
	}
	send(context.Background(), t, srv.URL, "", v, rpcBody(v, "2", "logging/setLevel", `"level":"debug"`))
	if got := logs(""); strings.Join(got, "|") != "debug:talk:detail|info:talk:started|error:talk:bad" {
		t.Errorf("after logging/setLevel debug: %q", got)
	}
	if got := logs(`"io.modelcontextprotocol/logLevel":"error"`); strings.Join(got, "|") != "error:talk:bad" {
		t.Errorf("with the call's own level error: %q", got)
	}
}
