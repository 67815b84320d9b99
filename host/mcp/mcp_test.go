package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api"
	"github.com/toolhost/toolhost/host/api/apitest"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
)

func tokens(entries ...string) *auth.Tokens {
	var list []config.Token
	for i := 0; i+1 < len(entries); i += 2 {
		sum := sha256.Sum256([]byte(entries[i] + "-token"))
		list = append(list, config.Token{Name: entries[i], SHA256: hex.EncodeToString(sum[:]), Role: entries[i+1]})
	}
	return auth.New(list)
}

// testTools are apitest's tools and "wipe", a change tool that prints
// lines like "lines".
func testTools() []*tools.Tool {
	list := apitest.Tools()
	wipe := *list[0]
	wipe.Name, wipe.Description, wipe.Effect = "wipe", "Wipe things.", "change"
	return append(list, &wipe)
}

func startHost(t testing.TB, toks *auth.Tokens) *apitest.Host[*api.Server] {
	t.Helper()
	return apitest.Start(t, apitest.Setup{Tools: testTools()}, func(reg *tools.Registry, d *runs.Dispatcher) *api.Server {
		return api.New(api.Options{Registry: reg, Dispatcher: d, Tokens: toks})
	})
}

// bearer adds a token to every request, and sends it to one of hosts in
// turn when there are several.
type bearer struct {
	token string
	hosts []string
	n     atomic.Int64
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if len(b.hosts) > 0 {
		r.URL.Host = b.hosts[int(b.n.Add(1)-1)%len(b.hosts)]
		r.Host = r.URL.Host
	}
	return http.DefaultTransport.RoundTrip(r)
}

type progress struct {
	mu       sync.Mutex
	messages []string
}

func (p *progress) handle(_ context.Context, req *sdkmcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.messages = append(p.messages, req.Params.Message)
}

func connect(t testing.TB, endpoint, token string, p *progress, hosts ...string) (*sdkmcp.ClientSession, error) {
	t.Helper()
	opts := &sdkmcp.ClientOptions{}
	if p != nil {
		opts.ProgressNotificationHandler = p.handle
	}
	c := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &sdkmcp.StreamableClientTransport{
		Endpoint:   endpoint + "/mcp",
		HTTPClient: &http.Client{Transport: &bearer{token: token, hosts: hosts}},
		MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func call(t testing.TB, s *sdkmcp.ClientSession, tool string, args any, progressToken any) *sdkmcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := &sdkmcp.CallToolParams{Name: tool, Arguments: args}
	if progressToken != nil {
		params.SetProgressToken(progressToken)
	}
	res, err := s.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res
}

func text(r *sdkmcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdkmcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCP(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor, "vi", auth.Viewer))

	t.Run("initialize", func(t *testing.T) {
		s, err := connect(t, h.Srv.URL, "ed-token", nil)
		if err != nil {
			t.Fatal(err)
		}
		init := s.InitializeResult()
		if init.ServerInfo.Name != "toolhost" || init.Capabilities.Tools == nil {
			t.Errorf("initialize: %+v %+v", init.ServerInfo, init.Capabilities)
		}
	})

	t.Run("list", func(t *testing.T) {
		s, err := connect(t, h.Srv.URL, "ed-token", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*sdkmcp.Tool{}
		for _, tool := range res.Tools {
			byName[tool.Name] = tool
		}
		if len(byName) != 4 {
			t.Fatalf("listed %d tools, want lines, block, fail and wipe: %v", len(res.Tools), byName)
		}
		lines, wipe := byName["lines"], byName["wipe"]
		if lines.Description != "Print lines." || lines.Annotations == nil || !lines.Annotations.ReadOnlyHint || lines.Annotations.DestructiveHint != nil {
			t.Errorf("lines: %+v %+v", lines, lines.Annotations)
		}
		if wipe.Annotations == nil || wipe.Annotations.ReadOnlyHint || wipe.Annotations.DestructiveHint == nil || !*wipe.Annotations.DestructiveHint {
			t.Errorf("wipe's annotations: %+v", wipe.Annotations)
		}
		schema, _ := json.Marshal(lines.InputSchema)
		var want any = testTools()[0].Spec().Function.Parameters
		wantJSON, _ := json.Marshal(want)
		if string(schema) != string(wantJSON) {
			t.Errorf("lines' input schema is %s, want the spec's parameters %s", schema, wantJSON)
		}
	})

	t.Run("call", func(t *testing.T) {
		p := &progress{}
		s, err := connect(t, h.Srv.URL, "ed-token", p)
		if err != nil {
			t.Fatal(err)
		}
		res := call(t, s, "lines", map[string]any{"n": 3, "stderr": true}, "p-1")
		// The SDK's client hands notifications to the handler after the
		// result may have been returned (on the wire they come before it:
		// TestMCPProgressOnTheWire), so wait for them a while.
		want := []string{"0 \n", "warning 0\n", "1 \n", "warning 1\n", "50% half way", "2 \n", "warning 2\n"}
		var got []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			p.mu.Lock()
			got = append([]string(nil), p.messages...)
			p.mu.Unlock()
			if len(got) >= len(want) || time.Now().After(deadline) {
				break
			}
		}
		if res.IsError || text(res) != `{"lines":3}` {
			t.Fatalf("result: %+v %q", res, text(res))
		}
		if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"lines":3}` {
			t.Errorf("structured content %s", sc)
		}
		if run, _ := res.Meta["toolhost/run"].(string); !strings.HasPrefix(run, "r") {
			t.Errorf("no run id in the result's _meta: %v", res.Meta)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("progress: %q, want %q", got, want)
		}
		// Without a progress token, no notifications.
		p2 := &progress{}
		s2, _ := connect(t, h.Srv.URL, "ed-token", p2)
		if res := call(t, s2, "lines", map[string]any{"n": 2}, nil); res.IsError {
			t.Fatal(text(res))
		}
		p2.mu.Lock()
		defer p2.mu.Unlock()
		if len(p2.messages) != 0 {
			t.Errorf("notifications without a progress token: %q", p2.messages)
		}
	})

	t.Run("errors", func(t *testing.T) {
		s, err := connect(t, h.Srv.URL, "ed-token", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			tool string
			args any
			want string
		}{
			{"fail", map[string]any{}, "no_luck: the thing could not be done"},
			{"lines", map[string]any{"n": "two"}, "bad_args: "},
			{"lines", map[string]any{"n": 1, "pad": strings.Repeat("x", 1<<20)}, "too_large: "},
		} {
			res := call(t, s, c.tool, c.args, nil)
			if !res.IsError || !strings.HasPrefix(text(res), c.want) {
				t.Errorf("%s %v: %v %q, want an error %q", c.tool, c.args, res.IsError, text(res), c.want)
			}
			if sc, _ := json.Marshal(res.StructuredContent); !strings.HasPrefix(string(sc), `{"error":{"code":`) {
				t.Errorf("%s: structured content %s, want the error object", c.tool, sc)
			}
		}
		// An unknown tool is a protocol error, -32602, as in MCP's tools
		// section: not a result.
		_, err = s.CallTool(context.Background(), &sdkmcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, `"nope"`) {
			t.Errorf("an unknown tool: %v, want a JSON-RPC error -32602 naming it", err)
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		for _, tok := range []string{"", "nobody-token"} {
			if _, err := connect(t, h.Srv.URL, tok, nil); err == nil {
				t.Errorf("token %q: connected", tok)
			}
			status, hdr := post(t, h.Srv.URL+"/mcp", tok, "")
			if status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("token %q: %d %v, want 401 with WWW-Authenticate", tok, status, hdr)
			}
		}
	})

	t.Run("viewer", func(t *testing.T) {
		s, err := connect(t, h.Srv.URL, "vi-token", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := s.ListTools(context.Background(), nil); err != nil || len(res.Tools) != 4 {
			t.Fatalf("a viewer's list: %v %v", res, err)
		}
		before := len(h.Runs.List())
		res := call(t, s, "lines", map[string]any{"n": 1}, nil)
		if !res.IsError || !strings.HasPrefix(text(res), "forbidden: vi is a viewer") {
			t.Errorf("a viewer's call: %v %q", res.IsError, text(res))
		}
		if after := len(h.Runs.List()); after != before {
			t.Errorf("a viewer's call started a run (%d runs, then %d)", before, after)
		}
	})

	t.Run("stateless", func(t *testing.T) {
		// Two hosts over one registry and dispatcher, the client's
		// requests sent to each in turn: initialize on one, list on the
		// other, call on the first.
		other := apitest.Start(t, apitest.Setup{Tools: testTools()}, func(reg *tools.Registry, d *runs.Dispatcher) *api.Server {
			return api.New(api.Options{Registry: reg, Dispatcher: d, Tokens: tokens("ed", auth.Editor)})
		})
		hosts := []string{hostOf(h.Srv.URL), hostOf(other.Srv.URL)}
		s, err := connect(t, h.Srv.URL, "ed-token", nil, hosts...)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if res, err := s.ListTools(context.Background(), nil); err != nil || len(res.Tools) != 4 {
				t.Fatalf("list: %v %v", res, err)
			}
			if res := call(t, s, "lines", map[string]any{"n": 1}, nil); res.IsError {
				t.Fatal(text(res))
			}
		}
	})

	t.Run("change tool awaiting approval", func(t *testing.T) {
		s, err := connect(t, h.Srv.URL, "ed-token", nil)
		if err != nil {
			t.Fatal(err)
		}
		res := call(t, s, "wipe", map[string]any{"n": 2}, nil)
		var body struct {
			Run      string `json:"run"`
			Approval struct {
				ID string `json:"id"`
			} `json:"approval"`
		}
		sc, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(sc, &body)
		if !res.IsError || body.Approval.ID == "" || !strings.HasPrefix(text(res), "approval_required: the call of wipe waits for a person to approve it") {
			t.Fatalf("a change call: %v %q %s", res.IsError, text(res), sc)
		}
		// The model reads the text: it names no endpoint (it could not
		// approve anything); the client finds the ids in _meta too.
		if strings.Contains(text(res), "/api/") || strings.Contains(text(res), "POST") {
			t.Errorf("the approval text names an endpoint: %q", text(res))
		}
		if res.Meta["toolhost/approval"] != body.Approval.ID || res.Meta["toolhost/run"] != body.Run {
			t.Errorf("the result's _meta %v, want the approval %s and the run %s", res.Meta, body.Approval.ID, body.Run)
		}
		run, ok := h.Runs.Get(body.Run)
		if !ok || run.Done() {
			t.Fatalf("the run %q waiting for approval is gone or ended", body.Run)
		}
		// The run waits on after the answer; approved, it runs, and its
		// result is read back.
		if _, err := h.Runs.Decide(body.Approval.ID, runs.Decider{Name: "ed"}, "approve"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		last, err := run.Wait(ctx)
		if err != nil || string(last.Result) != `{"lines":2}` {
			t.Errorf("the approved run ended with %+v %v", last, err)
		}
	})
}

func hostOf(u string) string {
	p, _ := url.Parse(u)
	return p.Host
}

func post(t testing.TB, u, token, host string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// With no tokens, /mcp serves callers on this machine only, as the rest of
// the API: a page of another site can't reach it by DNS rebinding.
func TestMCPWithoutTokens(t *testing.T) {
	h := startHost(t, nil)
	s, err := connect(t, h.Srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, s, "lines", map[string]any{"n": 1}, nil); res.IsError {
		t.Errorf("the local caller's call: %q", text(res))
	}
	if status, _ := post(t, h.Srv.URL+"/mcp", "", "evil.example:80"); status != http.StatusForbidden {
		t.Errorf("a rebound host name: %d, want 403", status)
	}
}

// The progress notifications of a call come on its response stream, in
// order, before its result.
func TestMCPProgressOnTheWire(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lines","arguments":{"n":2,"stderr":true},"_meta":{"progressToken":"p"}}}`
	req, _ := http.NewRequest("POST", h.Srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer ed-token")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var got []string
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Message  string  `json:"message"`
				Progress float64 `json:"progress"`
			} `json:"params"`
			Result *struct {
				StructuredContent json.RawMessage `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		switch {
		case m.Method == "notifications/progress":
			got = append(got, fmt.Sprintf("%g:%s", m.Params.Progress, strings.TrimSpace(m.Params.Message)))
		case m.Result != nil:
			got = append(got, "result "+string(m.Result.StructuredContent))
		}
	}
	want := "1:0|2:warning 0|3:1|4:warning 1|5:50% half way|result {\"lines\":2}"
	if strings.Join(got, "|") != want {
		t.Errorf("the stream: %q (status %d)\nwant %s\n%s", got, resp.StatusCode, want, raw)
	}
}

// A client that goes away mid-call cancels the run, as over HTTP.
func TestMCPClientGoneCancelsRun(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	s, err := connect(t, h.Srv.URL, "ed-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, &sdkmcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
		errc <- err
	}()
	var run *runs.Run
	for deadline := time.Now().Add(10 * time.Second); run == nil; time.Sleep(10 * time.Millisecond) {
		for _, r := range h.Runs.List() {
			if r.Tool == "block" {
				run = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never started a run")
		}
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call answered")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	last, err := run.Wait(wctx)
	if err != nil || last.Error == nil || last.Error.Code != "cancelled" {
		t.Errorf("the run of a client gone: %+v %v", last, err)
	}
}

// A token taken away mid-call ends the call at once; its run goes on, as
// over HTTP.
func TestMCPTokenTakenAwayMidCall(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	s, err := connect(t, h.Srv.URL, "ed-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := s.CallTool(ctx, &sdkmcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
		errc <- err
	}()
	var run *runs.Run
	for deadline := time.Now().Add(10 * time.Second); run == nil; time.Sleep(10 * time.Millisecond) {
		for _, r := range h.Runs.List() {
			if r.Tool == "block" {
				run = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never started a run")
		}
	}
	h.API.SetTokens(tokens("ad", auth.Admin))
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the call of a caller signed out answered without an error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call went on after its token was taken away")
	}
	time.Sleep(100 * time.Millisecond)
	if run.Done() {
		t.Error("the run ended with the call; it should go on, for an admin to read")
	}
}

// A call's _meta names its conversation sandbox and idempotency key; the
// HTTP request's headers do when it doesn't.
func TestMCPSessionAndKey(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	s, err := connect(t, h.Srv.URL, "ed-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdkmcp.CallToolParams{Name: "lines", Arguments: map[string]any{"n": 1},
		Meta: sdkmcp.Meta{"toolhost/session": "conv-1", "toolhost/idempotency_key": "k-1"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %q", err, text(res))
	}
	run, ok := h.Runs.Get(res.Meta["toolhost/run"].(string))
	if !ok || run.Session != "conv-1" || run.IdempotencyKey != "k-1" || run.Principal != "ed" {
		t.Errorf("the run: %+v", run)
	}
}
