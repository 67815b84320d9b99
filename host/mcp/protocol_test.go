package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/mcp"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
)

// message is a JSON-RPC message of an answer.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// versionMeta is the _meta a request of protocol 2026-07-28 carries in
// place of initialize.
const versionMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`

// servedVersions are the protocol versions the host serves.
var servedVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// rpcBody is a JSON-RPC request (id non-empty) or notification of method
// with params (an object's members, without braces), for version.
func rpcBody(version, id, method, params string) string {
	if version >= "2026-07-28" && id != "" {
		if params != "" && !strings.Contains(params, `"_meta"`) {
			params += ","
		}
		if strings.Contains(params, `"_meta":{`) {
			params = strings.Replace(params, `"_meta":{`, `"_meta":{`+versionMeta+",", 1)
		} else {
			params += `"_meta":{` + versionMeta + `}`
		}
	}
	b := `{"jsonrpc":"2.0","method":"` + method + `","params":{` + params + `}`
	if id != "" {
		b += `,"id":` + id
	}
	return b + "}"
}

// send posts one JSON-RPC message to /mcp as version with token, and
// returns the answer's status and messages (read whole).
func send(ctx context.Context, t testing.TB, url, token, version, body string) (int, []message) {
	t.Helper()
	resp, err := post2(ctx, url, token, version, body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readMessages(t, resp)
}

func post2(ctx context.Context, url, token, version, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	if version >= "2026-07-28" {
		// That version's requests say their method (and tool) in headers.
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		req.Header.Set("Mcp-Method", m.Method)
		if m.Params.Name != "" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return http.DefaultClient.Do(req)
}

func readMessages(t testing.TB, resp *http.Response) []message {
	t.Helper()
	raw, _ := io.ReadAll(resp.Body)
	var out []message
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var m message
		if json.Unmarshal(raw, &m) == nil {
			out = append(out, m)
		}
		return out
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "" {
			continue
		}
		var m message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		out = append(out, m)
	}
	return out
}

// runIDs are the ids of the runs the dispatcher has now.
func runIDs(d *runs.Dispatcher) map[string]bool {
	ids := map[string]bool{}
	for _, r := range d.List() {
		ids[r.ID] = true
	}
	return ids
}

// newRun waits for a run of tool that is not among before.
func newRun(t testing.TB, d *runs.Dispatcher, tool string, before map[string]bool) *runs.Run {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, r := range d.List() {
			if r.Tool == tool && !before[r.ID] {
				return r
			}
		}
	}
	t.Fatalf("no run of %s started", tool)
	return nil
}

// hangingCall starts a tools/call of block as version in the background:
// it returns the call's run and a func that hangs up and waits for the
// client to be gone.
func hangingCall(t testing.TB, url string, d *runs.Dispatcher, token, version, id, meta string) (*runs.Run, func()) {
	t.Helper()
	before := runIDs(d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	params := `"name":"block","arguments":{}`
	if meta != "" {
		params += `,"_meta":{` + meta + `}`
	}
	go func() {
		defer close(done)
		resp, err := post2(ctx, url, token, version, rpcBody(version, id, "tools/call", params))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	run := newRun(t, d, "block", before)
	t.Cleanup(func() { cancel(); <-done })
	return run, func() { cancel(); <-done }
}

// ended waits for a run's end and returns its error code and message.
func ended(t testing.TB, r *runs.Run) (code, message string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("the run %s did not end: %v", r.ID, err)
	}
	if last.Error == nil {
		return "", ""
	}
	return last.Error.Code, last.Error.Message
}

// goesOn says whether a run is still going a while later.
func goesOn(r *runs.Run) bool {
	time.Sleep(200 * time.Millisecond)
	return !r.Done()
}

// A client that hangs up mid-call cancels the run, whatever protocol
// version it speaks (the SDK ties a handler to its request only from
// 2026-07-28 on).
func TestMCPHangUpCancelsRunEveryVersion(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	for _, v := range servedVersions {
		t.Run(v, func(t *testing.T) {
			run, hangUp := hangingCall(t, h.Srv.URL, h.Runs, "ed-token", v, "1", "")
			hangUp()
			if code, msg := ended(t, run); code != "cancelled" || !strings.Contains(msg, "went away") {
				t.Errorf("the run of a client that hung up ended with %q %q, want cancelled", code, msg)
			}
		})
	}
}

// notifications/cancelled, which a stateless server gets on another
// request than the call's, cancels the call's run; only the caller that
// made the call can cancel it.
func TestMCPCancelledNotification(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor, "eve", auth.Editor))
	for _, v := range servedVersions {
		t.Run(v, func(t *testing.T) {
			run, _ := hangingCall(t, h.Srv.URL, h.Runs, "ed-token", v, `"c-1"`, "")
			cancelled := rpcBody(v, "", "notifications/cancelled", `"requestId":"c-1","reason":"changed my mind"`)
			// Another caller, and another id of this one, cancel nothing.
			if status, _ := send(context.Background(), t, h.Srv.URL, "eve-token", v, cancelled); status != http.StatusAccepted {
				t.Fatalf("a notification: %d", status)
			}
			send(context.Background(), t, h.Srv.URL, "ed-token", v, rpcBody(v, "", "notifications/cancelled", `"requestId":"c-2"`))
			if !goesOn(run) {
				t.Fatal("another caller's notifications/cancelled (or another id's) cancelled the run")
			}
			send(context.Background(), t, h.Srv.URL, "ed-token", v, cancelled)
			if code, msg := ended(t, run); code != "cancelled" || !strings.Contains(msg, "notifications/cancelled") {
				t.Errorf("the run ended with %q %q, want cancelled by notifications/cancelled", code, msg)
			}
		})
	}
}

// A call with an idempotency key goes on when its client hangs up, so a
// retry can attach to it; notifications/cancelled still cancels it, of
// the first call's id (after the hang-up) or of the retry's.
func TestMCPIdempotentCallAndCancel(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	const v = "2025-11-25"
	for _, c := range []struct{ name, cancelID string }{{"first call's id", `"k1-a"`}, {"retry's id", `"k1-b"`}} {
		t.Run(c.name, func(t *testing.T) {
			key := `"toolhost/idempotency_key":"key-` + strings.Trim(c.cancelID, `"`) + `"`
			run, hangUp := hangingCall(t, h.Srv.URL, h.Runs, "ed-token", v, `"k1-a"`, key)
			hangUp()
			if !goesOn(run) {
				t.Fatal("a call with an idempotency key was cancelled when its client hung up")
			}
			// The retry attaches to the same run.
			before := runIDs(h.Runs)
			retry := make(chan []message, 1)
			go func() {
				resp, err := post2(context.Background(), h.Srv.URL, "ed-token", v,
					rpcBody(v, `"k1-b"`, "tools/call", `"name":"block","arguments":{},"_meta":{`+key+`}`))
				if err != nil {
					retry <- nil
					return
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				retry <- []message{{Result: raw}}
			}()
			time.Sleep(100 * time.Millisecond)
			for id := range runIDs(h.Runs) {
				if !before[id] {
					t.Errorf("the retry started a run %s; it should attach to %s", id, run.ID)
				}
			}
			send(context.Background(), t, h.Srv.URL, "ed-token", v, rpcBody(v, "", "notifications/cancelled", `"requestId":`+c.cancelID))
			if code, msg := ended(t, run); code != "cancelled" || !strings.Contains(msg, "notifications/cancelled") {
				t.Errorf("the run ended with %q %q, want cancelled by notifications/cancelled", code, msg)
			}
			select {
			case msgs := <-retry:
				if len(msgs) == 0 {
					t.Errorf("the retry got no answer")
				}
			case <-time.After(10 * time.Second):
				t.Error("the retry went on after its run ended")
			}
		})
	}
}

// The capabilities say tools and logging, and what they don't say is not
// served.
func TestMCPCapabilitiesAndMethods(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	const v = "2025-11-25"
	_, msgs := send(context.Background(), t, h.Srv.URL, "ed-token", v, rpcBody(v, "1", "initialize",
		`"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}`))
	if len(msgs) != 1 || msgs[0].Result == nil {
		t.Fatalf("initialize: %+v", msgs)
	}
	var init struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(msgs[0].Result, &init)
	var caps []string
	for c := range init.Capabilities {
		caps = append(caps, c)
	}
	sort.Strings(caps)
	if strings.Join(caps, ",") != "logging,tools" || init.ProtocolVersion != v {
		t.Errorf("initialize: version %s, capabilities %s, want logging and tools", init.ProtocolVersion, msgs[0].Result)
	}
	for _, m := range []string{"prompts/list", "resources/list", "resources/templates/list", "prompts/get", "resources/read", "completion/complete"} {
		_, msgs := send(context.Background(), t, h.Srv.URL, "ed-token", v, rpcBody(v, "2", m, ""))
		if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("%s: %+v, want -32601", m, msgs)
		}
	}
	_, msgs = send(context.Background(), t, h.Srv.URL, "ed-token", v, rpcBody(v, "3", "logging/setLevel", `"level":"warning"`))
	if len(msgs) != 1 || msgs[0].Error != nil || string(msgs[0].Result) != "{}" {
		t.Errorf("logging/setLevel: %+v", msgs)
	}
	_, msgs = send(context.Background(), t, h.Srv.URL, "ed-token", v, rpcBody(v, "4", "logging/setLevel", `"level":"loud"`))
	if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("logging/setLevel loud: %+v, want -32602", msgs)
	}
	_, msgs = send(context.Background(), t, h.Srv.URL, "ed-token", v, rpcBody(v, "5", "ping", ""))
	if len(msgs) != 1 || msgs[0].Error != nil {
		t.Errorf("ping: %+v", msgs)
	}
}

// listHost serves a bare MCP handler for the local caller, with the
// specs given and calls going to d.
func listHost(t testing.TB, specs []tools.FunctionSpec, opts mcp.Options) *httptest.Server {
	t.Helper()
	opts.Tools = func(auth.Identity) []tools.FunctionSpec { return specs }
	h := mcp.New(opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Serve(w, r, auth.Local()) }))
	t.Cleanup(srv.Close)
	return srv
}

func manySpecs(n int) []tools.FunctionSpec {
	out := make([]tools.FunctionSpec, n)
	for i := range out {
		out[i] = tools.FunctionSpec{Type: "function", Effect: "read", Kind: "http",
			Function: tools.Function{Name: fmt.Sprintf("tool_%03d", i), Description: "A tool.", Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}}
	}
	return out
}

// tools/list comes in pages when there are many tools, each marked for the
// caller alone (cacheScope private: the list depends on the token).
func TestMCPListPages(t *testing.T) {
	srv := listHost(t, manySpecs(250), mcp.Options{})
	const v = "2025-11-25"
	var names []string
	cursor := ""
	for page := 0; ; page++ {
		params := ""
		if cursor != "" {
			params = `"cursor":"` + cursor + `"`
		}
		_, msgs := send(context.Background(), t, srv.URL, "", v, rpcBody(v, "1", "tools/list", params))
		if len(msgs) != 1 || msgs[0].Result == nil {
			t.Fatalf("page %d: %+v", page, msgs)
		}
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
			CacheScope *string `json:"cacheScope"`
		}
		_ = json.Unmarshal(msgs[0].Result, &res)
		if res.CacheScope == nil || *res.CacheScope != "private" {
			t.Errorf("page %d: cacheScope %v in %s, want private", page, res.CacheScope, msgs[0].Result)
		}
		if want := min(100, 250-100*page); len(res.Tools) != want {
			t.Errorf("page %d has %d tools, want %d", page, len(res.Tools), want)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if res.NextCursor == nil {
			break
		}
		if *res.NextCursor == "" || page > 3 {
			t.Fatalf("page %d: cursor %q", page, *res.NextCursor)
		}
		cursor = *res.NextCursor
	}
	if len(names) != 250 || names[0] != "tool_000" || names[249] != "tool_249" || !sort.StringsAreSorted(names) {
		t.Errorf("the pages hold %d tools, %v … %v", len(names), names[:1], names[len(names)-1:])
	}
	_, msgs := send(context.Background(), t, srv.URL, "", v, rpcBody(v, "1", "tools/list", `"cursor":"!!"`))
	if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a bad cursor: %+v, want -32602", msgs)
	}

	// The SDK's client reads every page.
	c := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "t", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdkmcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for _, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 250 {
		t.Errorf("the SDK's client read %d tools, want 250", n)
	}
}

// A call of a session tool without a session says how to give one over
// MCP, not over the HTTP API.
func TestMCPSessionHint(t *testing.T) {
	srv := listHost(t, manySpecs(1), mcp.Options{NeedsSession: func(tool string) bool { return tool == "tool_000" }})
	const v = "2025-06-18"
	_, msgs := send(context.Background(), t, srv.URL, "", v, rpcBody(v, "1", "tools/call", `"name":"tool_000","arguments":{}`))
	if len(msgs) != 1 || msgs[0].Result == nil {
		t.Fatalf("%+v", msgs)
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(msgs[0].Result, &res)
	if !res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s", msgs[0].Result)
	}
	text := res.Content[0].Text
	if !strings.HasPrefix(text, "bad_args: ") || !strings.Contains(text, `"toolhost/session"`) || !strings.Contains(text, "Toolhost-Session") || strings.Contains(text, "?session=") {
		t.Errorf("the hint: %q", text)
	}
}

// A 401 tells OAuth clients where the resource's metadata is (RFC 9728),
// and the metadata and the authorization server's well-known documents
// say that the host takes bearer tokens only, so a client never goes on
// to /authorize or /register.
func TestMCPUnauthorizedTellsBearerOnly(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	base := h.Srv.URL
	for _, c := range []struct {
		token, wantError string
	}{{"", ""}, {"nobody-token", `error="invalid_token"`}} {
		status, hdr := post(t, base+"/mcp", c.token, "")
		www := hdr.Get("WWW-Authenticate")
		if status != http.StatusUnauthorized || !strings.HasPrefix(www, "Bearer ") ||
			!strings.Contains(www, `resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("token %q: %d %q", c.token, status, www)
		}
		if (c.wantError == "") == strings.Contains(www, "error=") || !strings.Contains(www, c.wantError) {
			t.Errorf("token %q: %q, want error %q", c.token, www, c.wantError)
		}
	}
	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		return resp.StatusCode, body
	}
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource/mcp": base + "/mcp",
		"/.well-known/oauth-protected-resource":     base,
	} {
		status, body := get(path)
		methods, _ := json.Marshal(body["bearer_methods_supported"])
		if status != http.StatusOK || body["resource"] != resource || string(methods) != `["header"]` {
			t.Errorf("%s: %d %v", path, status, body)
		}
		if _, ok := body["authorization_servers"]; ok {
			t.Errorf("%s names authorization servers: %v", path, body)
		}
	}
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp", "/.well-known/openid-configuration"} {
		status, body := get(path)
		e, _ := body["error"].(map[string]any)
		if status != http.StatusNotImplemented || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "bearer tokens only") {
			t.Errorf("%s: %d %v, want 501 saying bearer tokens only", path, status, body)
		}
	}
	if status, _ := get("/.well-known/something-else"); status != http.StatusNotFound {
		t.Errorf("another well-known path: %d, want 404", status)
	}
}

// A caller signed out mid-call (its token taken away) is not a client
// that hung up: the call ends, and its run goes on, on every version.
func TestMCPSignedOutRunGoesOnEveryVersion(t *testing.T) {
	h := startHost(t, tokens("ed", auth.Editor))
	for _, v := range servedVersions {
		t.Run(v, func(t *testing.T) {
			h.API.SetTokens(tokens("ed", auth.Editor))
			before := runIDs(h.Runs)
			answered := make(chan struct{})
			go func() {
				defer close(answered)
				resp, err := post2(context.Background(), h.Srv.URL, "ed-token", v, rpcBody(v, "1", "tools/call", `"name":"block","arguments":{}`))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			run := newRun(t, h.Runs, "block", before)
			h.API.SetTokens(tokens("ad", auth.Admin))
			select {
			case <-answered:
			case <-time.After(10 * time.Second):
				t.Fatal("the call went on after its token was taken away")
			}
			if !goesOn(run) {
				code, msg := ended(t, run)
				t.Fatalf("the run ended with the call (%s %s); it should go on, for an admin to read", code, msg)
			}
			run.Cancel()
		})
	}
}
