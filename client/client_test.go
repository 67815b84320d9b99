package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api"
	"github.com/toolhost/toolhost/host/api/apitest"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
)

type host struct {
	srv  *httptest.Server
	api  *api.Server
	runs *runs.Dispatcher
}

// newHost serves the real API with the in-process kind.
func newHost(t testing.TB, opts api.Options) *host {
	t.Helper()
	h := apitest.Start(t, apitest.Setup{Kind: apitest.Kind{Done: true}}, func(reg *tools.Registry, d *runs.Dispatcher) *api.Server {
		opts.Registry, opts.Dispatcher = reg, d
		return api.New(opts)
	})
	return &host{srv: h.Srv, api: h.API, runs: h.Runs}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func dial(t testing.TB, h *host, opts client.Options) *client.Conn {
	t.Helper()
	c, err := client.Dial(ctx(t), h.srv.URL, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// checkEvents checks a run's events came once each, in seq order, from
// started to the terminal one, and returns its stdout.
func checkEvents(t testing.TB, evs []client.Event) string {
	t.Helper()
	var out strings.Builder
	for i, e := range evs {
		if e.Seq != uint64(i) || e.Run != evs[0].Run {
			t.Fatalf("event %d is %+v", i, e)
		}
		if e.Type == client.TypeStdout {
			out.WriteString(e.Data)
		}
	}
	if len(evs) == 0 || evs[0].Type != client.TypeStarted || !evs[len(evs)-1].Terminal() {
		t.Fatalf("events %+v: want started first and a terminal event last", evs)
	}
	return out.String()
}

func lines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d \n", i)
	}
	return b.String()
}

func TestCallStreamsEveryEventAndReturnsTheResult(t *testing.T) {
	h := newHost(t, api.Options{})
	c := dial(t, h, client.Options{})
	if c.Hello.Principal != "local" || c.Hello.Protocol != client.ProtocolVersion {
		t.Fatalf("hello = %+v", c.Hello)
	}
	list, err := c.ListTools(ctx(t))
	if err != nil || len(list) != 3 || list[0].Function.Name != "block" || list[0].Type != "function" {
		t.Fatalf("ListTools = %+v, %v", list, err)
	}
	if err := c.Ping(ctx(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	var evs []client.Event
	res, err := c.Call(ctx(t), "lines", map[string]int{"n": 5}, func(e client.Event) { evs = append(evs, e) })
	if err != nil || string(res) != `{"lines":5}` {
		t.Fatalf("Call = %s, %v", res, err)
	}
	if out := checkEvents(t, evs); out != lines(5) || evs[len(evs)-2].Type != client.TypeStderr {
		t.Fatalf("stdout %q, events %+v", out, evs)
	}
	// The run's record over HTTP has the same output and events.
	rec, err := c.HTTP().Run(ctx(t), evs[0].Run, true)
	if err != nil || !rec.Done || rec.Stdout != lines(5) || rec.Stderr != "done\n" || string(rec.Result) != `{"lines":5}` ||
		rec.LastSeq != int64(len(evs)-1) || len(rec.Events) != len(evs) || rec.Principal != "local" || rec.Ended.IsZero() {
		t.Fatalf("Run = %+v, %v", rec, err)
	}
	if rec, err := c.HTTP().Run(ctx(t), evs[0].Run, false); err != nil || rec.Events != nil || rec.Stdout != lines(5) {
		t.Fatalf("Run without events = %+v, %v", rec, err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	h := newHost(t, api.Options{})
	c := dial(t, h, client.Options{})
	var ce *client.Error
	// Refused before it ran: no events.
	n := 0
	if _, err := c.Call(ctx(t), "nope", nil, func(client.Event) { n++ }); !errors.As(err, &ce) || ce.Code != "unknown_tool" || n != 0 {
		t.Fatalf("unknown tool: %v (%d events)", err, n)
	}
	if _, err := c.Call(ctx(t), "lines", map[string]any{"n": "many"}, nil); !errors.As(err, &ce) || ce.Code != "bad_args" {
		t.Fatalf("bad args: %v", err)
	}
	// The run's own error, after its events.
	var evs []client.Event
	if _, err := c.Call(ctx(t), "fail", nil, func(e client.Event) { evs = append(evs, e) }); !errors.As(err, &ce) || ce.Code != "no_luck" {
		t.Fatalf("failing run: %v", err)
	}
	if out := checkEvents(t, evs); out != "trying\n" {
		t.Fatalf("failing run printed %q", out)
	}
	// Over HTTP: the record and the error.
	res, err := c.HTTP().Call(ctx(t), "fail", nil, client.CallOptions{})
	if !errors.As(err, &ce) || ce.Code != "no_luck" || res == nil || res.Printed != "trying" || res.Run == "" {
		t.Fatalf("HTTP call of a failing tool = %+v, %v", res, err)
	}
	if _, err := c.HTTP().Call(ctx(t), "nope", nil, client.CallOptions{}); !errors.As(err, &ce) || ce.Code != "unknown_tool" {
		t.Fatalf("HTTP call of an unknown tool: %v", err)
	}
	if res, err := c.HTTP().Call(ctx(t), "lines", map[string]int{"n": 2}, client.CallOptions{Session: "s1"}); err != nil || string(res.Result) != `{"lines":2}` || res.Stderr != "done\n" {
		t.Fatalf("HTTP call = %+v, %v", res, err)
	}
	if err := c.Cancel(ctx(t), "rnope"); !errors.As(err, &ce) || ce.Code != "unknown_run" {
		t.Fatalf("cancel of an unknown run: %v", err)
	}
}

func TestManyCallsAtOnceOnOneConnection(t *testing.T) {
	h := newHost(t, api.Options{})
	c := dial(t, h, client.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			var evs []client.Event
			res, err := c.Call(ctx(t), "lines", map[string]int{"n": i, "delay_ms": 1}, func(e client.Event) { evs = append(evs, e) })
			switch {
			case err != nil:
				errs <- err
			case string(res) != fmt.Sprintf(`{"lines":%d}`, i) || len(evs) != i+3:
				errs <- fmt.Errorf("call %d: result %s after %d events", i, res, len(evs))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// heldConn is a client's socket whose reads the test can hold and whose
// writes it counts.
type heldConn struct {
	net.Conn
	d *dialer
}

func (h heldConn) Read(b []byte) (int, error) {
	if h.d.hold.Load() {
		<-h.d.release
	}
	return h.Conn.Read(b)
}

func (h heldConn) Write(b []byte) (int, error) {
	h.d.writes.Add(1)
	return h.Conn.Write(b)
}

// dialer records the client's sockets, whose reads wait for release while
// hold is set.
type dialer struct {
	mu      sync.Mutex
	conns   []net.Conn
	hold    atomic.Bool
	release chan struct{}
	writes  atomic.Int64
}

func (d *dialer) websocket() *websocket.Dialer {
	return &websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(32 << 10)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.conns = append(d.conns, c)
		return heldConn{Conn: c, d: d}, nil
	}}
}

func (d *dialer) dropLast() {
	d.mu.Lock()
	defer d.mu.Unlock()
	_ = d.conns[len(d.conns)-1].Close()
}

func TestACallGoesOnAfterTheConnectionDrops(t *testing.T) {
	h := newHost(t, api.Options{})
	d := &dialer{}
	c := dial(t, h, client.Options{Dialer: d.websocket(), RedialWait: 10 * time.Millisecond})
	const n = 60
	var evs []client.Event
	res, err := c.Call(ctx(t), "lines", map[string]int{"n": n, "delay_ms": 5}, func(e client.Event) {
		evs = append(evs, e)
		if e.Seq%15 == 10 {
			d.dropLast() // hard, as a network would
		}
	})
	if err != nil || string(res) != fmt.Sprintf(`{"lines":%d}`, n) {
		t.Fatalf("Call = %s, %v", res, err)
	}
	if out := checkEvents(t, evs); out != lines(n) {
		t.Fatalf("stdout %q", out)
	}
	if len(d.conns) != 5 {
		t.Fatalf("%d connections; want one more after each of the 4 drops", len(d.conns))
	}
	// The Conn works on.
	if err := c.Ping(ctx(t)); err != nil {
		t.Fatalf("Ping after the drops: %v", err)
	}
}

func TestACallThatFallsBehindReattaches(t *testing.T) {
	h := newHost(t, api.Options{ConnBuffer: 16 << 10})
	d := &dialer{release: make(chan struct{})}
	c := dial(t, h, client.Options{Dialer: d.websocket()})
	// The client stops reading: the host's queue for it fills, and the
	// host stops sending the run's events and says it fell behind.
	d.hold.Store(true)
	writes := d.writes.Load()
	const n, size = 2000, 1000 // 2 MB
	type answer struct {
		res json.RawMessage
		err error
		evs []client.Event
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.res, a.err = c.Call(ctx(t), "lines", map[string]int{"n": n, "size": size}, func(e client.Event) { a.evs = append(a.evs, e) })
		done <- a
	}()
	// The run ends though its client reads nothing; then the client reads.
	for len(h.runs.List()) == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := h.runs.List()[0].Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	close(d.release)
	a := <-done
	if a.err != nil || string(a.res) != fmt.Sprintf(`{"lines":%d}`, n) {
		t.Fatalf("Call = %s, %v", a.res, a.err)
	}
	if checkEvents(t, a.evs); len(a.evs) != n+3 {
		t.Fatalf("%d events, want %d", len(a.evs), n+3)
	}
	// The call, then at least one attach after behind.
	if w := d.writes.Load() - writes; w < 2 {
		t.Fatalf("the client wrote %d frames; want the call and an attach", w)
	}
}

func TestCancelAndContext(t *testing.T) {
	h := newHost(t, api.Options{})
	c := dial(t, h, client.Options{})
	started := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx(t), "block", nil, func(e client.Event) {
			if e.Type == client.TypeStarted {
				started <- e.Run
			}
		})
		errc <- err
	}()
	run := <-started
	if err := c.Cancel(ctx(t), run); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	var ce *client.Error
	if err := <-errc; !errors.As(err, &ce) || ce.Code != "cancelled" {
		t.Fatalf("a cancelled call returned %v", err)
	}
	// A call whose context ends cancels its run.
	cctx, cancel := context.WithCancel(ctx(t))
	go func() {
		_, err := c.Call(cctx, "block", nil, func(e client.Event) {
			if e.Type == client.TypeStarted {
				started <- e.Run
			}
		})
		errc <- err
	}()
	run = <-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("a call whose context ended returned %v", err)
	}
	r, _ := h.runs.Get(run)
	last, err := r.Wait(ctx(t))
	if err != nil || last.Error == nil || last.Error.Code != "cancelled" {
		t.Fatalf("the run of a call whose context ended: %+v, %v", last, err)
	}
	// Attach replays an ended run from a point.
	var evs []client.Event
	_, err = c.Attach(ctx(t), run, 0, func(e client.Event) { evs = append(evs, e) })
	if !errors.As(err, &ce) || ce.Code != "cancelled" || len(evs) != 1 || evs[0].Seq != 1 {
		t.Fatalf("Attach after seq 0 = %v, %+v", err, evs)
	}
}

func sum(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

func TestTokens(t *testing.T) {
	tokens := []config.Token{{Name: "ed", SHA256: sum("ed-token"), Role: "editor"}}
	h := newHost(t, api.Options{Tokens: auth.New(tokens)})
	var ce *client.Error
	if _, err := client.Dial(ctx(t), h.srv.URL, client.Options{}); !errors.As(err, &ce) || ce.Code != "unauthorized" {
		t.Fatalf("Dial without a token: %v", err)
	}
	if _, err := client.Dial(ctx(t), h.srv.URL, client.Options{Token: "nope"}); !errors.As(err, &ce) || ce.Code != "unauthorized" {
		t.Fatalf("Dial with a wrong token: %v", err)
	}
	if _, err := client.Dial(ctx(t), h.srv.URL, client.Options{Token: "ed-token", Origin: "https://evil.example.com"}); !errors.As(err, &ce) || ce.Code != "forbidden" {
		t.Fatalf("Dial from a foreign origin: %v", err)
	}
	c := dial(t, h, client.Options{Token: "ed-token", Origin: h.srv.URL})
	if c.Hello.Principal != "ed" || c.Hello.Role != "editor" {
		t.Fatalf("hello = %+v", c.Hello)
	}
	// Removing the token closes the connection for good: the call ends
	// with the host's reason, and the client does not come back.
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := c.Call(ctx(t), "block", nil, func(e client.Event) { close(started) })
		errc <- err
	}()
	<-started
	h.api.SetTokens(auth.New(nil))
	if err := <-errc; !errors.As(err, &ce) || ce.Code != "token_revoked" {
		t.Fatalf("a call when the token was removed: %v", err)
	}
	if err := c.Ping(ctx(t)); !errors.As(err, &ce) || ce.Code != "token_revoked" {
		t.Fatalf("Ping after the host closed the connection: %v", err)
	}
}

// TestToolSpecsInEachFormat: the tool list in a provider's format, over
// the websocket and over HTTP, decodes into that format's type; a format
// the host does not know is an *Error saying so.
func TestToolSpecsInEachFormat(t *testing.T) {
	h := newHost(t, api.Options{})
	c := dial(t, h, client.Options{})
	for name, list := range map[string]func(format string, strict bool) (client.ToolSpecs, error){
		"websocket": func(format string, strict bool) (client.ToolSpecs, error) { return c.ToolSpecs(ctx(t), format, strict) },
		"http": func(format string, strict bool) (client.ToolSpecs, error) {
			return c.HTTP().ToolSpecs(ctx(t), format, strict)
		},
	} {
		specs, err := list(client.FormatOpenAI, true)
		if err != nil || specs.Format != "openai" || !specs.Strict || len(specs.Tools) != 3 {
			t.Fatalf("%s: openai strict = %+v, %v", name, specs, err)
		}
		var openai client.OpenAITool
		if err := json.Unmarshal(specs.Tools[2], &openai); err != nil || openai.Type != "function" || openai.Function.Name != "lines" ||
			openai.Function.Strict == nil || !*openai.Function.Strict || len(openai.Function.Parameters["required"].([]any)) != 4 {
			t.Errorf("%s: openai strict lines = %+v, %v", name, openai, err)
		}
		if strings.Contains(string(specs.Tools[2]), `"effect"`) {
			t.Errorf("%s: the openai format carries effect: %s", name, specs.Tools[2])
		}
		specs, err = list(client.FormatAnthropic, false)
		var anthropic client.AnthropicTool
		if err != nil || len(specs.Tools) != 3 || json.Unmarshal(specs.Tools[0], &anthropic) != nil || anthropic.Name != "block" || anthropic.InputSchema["type"] != "object" {
			t.Errorf("%s: anthropic = %+v (%+v), %v", name, specs, anthropic, err)
		}
		specs, err = list(client.FormatMCP, false)
		var mcp client.MCPTool
		if err != nil || len(specs.Tools) != 3 || json.Unmarshal(specs.Tools[0], &mcp) != nil || mcp.Annotations == nil || !mcp.Annotations.ReadOnlyHint {
			t.Errorf("%s: mcp = %+v (%+v), %v", name, specs, mcp, err)
		}
		specs, err = list("", false)
		var def client.Tool
		if err != nil || specs.Format != "toolhost" || json.Unmarshal(specs.Tools[0], &def) != nil || def.Effect != "read" || def.Kind != "fake" {
			t.Errorf("%s: default = %+v (%+v), %v", name, specs, def, err)
		}
		_, err = list("yaml", false)
		var e *client.Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, `format must be one of toolhost, openai, anthropic, mcp, not "yaml"`) {
			t.Errorf("%s: a bad format: %v", name, err)
		}
	}
}
