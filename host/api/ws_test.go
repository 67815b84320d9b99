package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api/apitest"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
)

// fakeTools are the tools of apitest.Kind and one of a kind not running.
func fakeTools() []*tools.Tool {
	return append(apitest.Tools(),
		&tools.Tool{Tool: config.Tool{Name: "ghost", Description: "Of a kind not running.", Effect: "read"}, Kind: "ghost", Run: json.RawMessage(`{"type":"ghost"}`)})
}

type testHost struct {
	srv  *httptest.Server
	api  *Server
	runs *runs.Dispatcher
	url  string // ws://…/api/v1/ws
}

// newTestHost serves the API with apitest.Kind, whose lines start with
// the time they were printed, and runs that spill past 64 KiB.
func newTestHost(t testing.TB, opts Options) *testHost {
	t.Helper()
	h := apitest.Start(t, apitest.Setup{Kind: apitest.Kind{Stamp: true}, Tools: fakeTools(), Spill: 64 << 10}, func(reg *tools.Registry, d *runs.Dispatcher) *Server {
		opts.Registry, opts.Dispatcher = reg, d
		if opts.Kinds == nil {
			opts.Kinds = testKinds
		}
		return New(opts)
	})
	return &testHost{srv: h.Srv, api: h.API, runs: h.Runs, url: "ws" + strings.TrimPrefix(h.Srv.URL, "http") + "/api/v1/ws"}
}

type wsClient struct {
	t    testing.TB
	conn *websocket.Conn
}

// dial opens a websocket whose socket reads little at a time, with the
// given header.
func (h *testHost) dial(t testing.TB, header http.Header) *wsClient {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(64 << 10)
		}
		return c, err
	}}
	conn, resp, err := d.Dial(h.url, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dialling: %v (status %d)", err, status)
	}
	t.Cleanup(func() { conn.Close() })
	return &wsClient{t: t, conn: conn}
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	if err := c.conn.WriteJSON(v); err != nil {
		c.t.Fatalf("sending: %v", err)
	}
}

// frame is any frame of the host, read through the protocol's types: a
// run's event (Seq set), an error that ends no run, behind, or a reply.
type frame struct {
	wire.Event
	// Seq is nil on frames that are not a run's event.
	Seq     *int64      `json:"seq"`
	LastSeq int64       `json:"last_seq"` // behind
	Tools   []wire.Tool `json:"tools"`
	hello   wire.HelloReply
	at      time.Time
}

func (c *wsClient) read(timeout time.Duration) frame {
	c.t.Helper()
	f, err := c.tryRead(timeout)
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return f
}

func (c *wsClient) tryRead(timeout time.Duration) (frame, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	_, data, err := c.conn.ReadMessage()
	if err != nil {
		return frame{}, err
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return frame{}, fmt.Errorf("a frame isn't JSON: %v: %s", err, data)
	}
	if f.Type == "hello" {
		_ = json.Unmarshal(data, &f.hello)
	}
	f.at = time.Now()
	return f, nil
}

// follow reads the frames of one run (by client id) until its end,
// re-attaching after behind, and checks each seq comes once, in order.
func (c *wsClient) follow(id string, timeout time.Duration) (frames []frame, behinds int) {
	c.t.Helper()
	last := int64(-1)
	for {
		f := c.read(timeout)
		if f.ID != id {
			continue
		}
		if f.Type == "behind" {
			behinds++
			if f.LastSeq != last {
				c.t.Fatalf("behind says last_seq %d, but the last event received was %d", f.LastSeq, last)
			}
			c.send(map[string]any{"type": "attach", "id": id, "run": f.Run, "after_seq": last})
			continue
		}
		if f.Seq == nil {
			c.t.Fatalf("frame without seq while following %s: %+v", id, f)
		}
		if *f.Seq != last+1 {
			c.t.Fatalf("got seq %d after %d", *f.Seq, last)
		}
		last = *f.Seq
		frames = append(frames, f)
		if f.Type == "result" || f.Type == "error" {
			return frames, behinds
		}
	}
}

func TestEveryEventTypeReachesTheClientInOrder(t *testing.T) {
	h := newTestHost(t, Options{})
	c := h.dial(t, nil)
	c.send(map[string]any{"type": "hello", "id": "h", "protocol": 1, "client": "test"})
	if f := c.read(5 * time.Second); f.Type != "hello" || f.hello.Protocol != ProtocolVersion || f.hello.AuthRequired || f.hello.Principal != "local" || f.hello.Role != "admin" {
		t.Fatalf("hello reply = %+v", f)
	}
	c.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": 4, "stderr": true}})
	frames, _ := c.follow("c", 10*time.Second)
	var types []string
	for _, f := range frames {
		types = append(types, f.Type)
	}
	want := "started stdout stderr stdout stderr stdout stderr progress stdout stderr result"
	if strings.Join(types, " ") != want {
		t.Fatalf("event types = %v, want %s", types, want)
	}
	if string(frames[len(frames)-1].Result) != `{"lines":4}` {
		t.Fatalf("result = %s", frames[len(frames)-1].Result)
	}
}

func TestASlowClientFallsBehindWithoutSlowingTheRunOrAFastClient(t *testing.T) {
	h := newTestHost(t, Options{ConnBuffer: 512 << 10})
	slow := h.dial(t, nil)
	fast := h.dial(t, nil)
	const n, size = 2000, 1000 // 2 MB of output per run
	args := map[string]any{"n": n, "size": size}
	slow.send(map[string]any{"type": "call", "id": "s", "tool": "lines", "args": args})
	// Let the slow client's queue fill: it reads nothing.
	fast.send(map[string]any{"type": "call", "id": "f", "tool": "lines", "args": args})
	// The fast client reads everything while the slow one reads nothing.
	// (A burst can put even a reading client behind for a moment; then it
	// re-attaches, as clients should.)
	frames, _ := fast.follow("f", 30*time.Second)
	if len(frames) != n+2 {
		t.Fatalf("the fast client got %d events, want %d", len(frames), n+2)
	}
	// The slow client's run ends on its own, though nobody reads it.
	sr := h.otherRun(frames[0].Run)
	if sr == nil {
		t.Fatal("the slow client's run was not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sr.Wait(ctx); err != nil {
		t.Fatalf("the slow client's run did not end while the client read nothing: %v", err)
	}
	// Now the slow client reads: everything up to behind, then the rest
	// after re-attaching, each event once, in order.
	got, behinds := slow.follow("s", 30*time.Second)
	if len(got) != n+2 || behinds == 0 {
		t.Fatalf("the slow client got %d events and fell behind %d times; want %d events and at least one behind", len(got), behinds, n+2)
	}
}

// otherRun returns a run of the dispatcher that is not id.
func (h *testHost) otherRun(id string) *runs.Run {
	for _, r := range h.runs.List() {
		if r.ID != id {
			return r
		}
	}
	return nil
}

func TestReattachAfterADroppedConnectionGetsEveryEventOnce(t *testing.T) {
	h := newTestHost(t, Options{})
	c := h.dial(t, nil)
	const n = 60
	c.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": n, "delay_ms": 5}})
	var got []frame
	last := int64(-1)
	run := ""
	for drops := 0; ; {
		f, err := c.tryRead(10 * time.Second)
		if err != nil || (drops < 3 && last >= int64(10*(drops+1))) {
			// Drop the connection hard, then come back and attach.
			_ = c.conn.UnderlyingConn().Close()
			drops++
			time.Sleep(20 * time.Millisecond)
			c = h.dial(t, nil)
			c.send(map[string]any{"type": "attach", "id": "c", "run": run, "after_seq": last})
			continue
		}
		if f.ID != "c" || f.Seq == nil {
			t.Fatalf("unexpected frame %+v", f)
		}
		if *f.Seq != last+1 {
			t.Fatalf("seq %d after %d", *f.Seq, last)
		}
		last, run = *f.Seq, f.Run
		got = append(got, f)
		if f.Type == "result" {
			break
		}
	}
	if len(got) != n+2 {
		t.Fatalf("got %d events, want %d", len(got), n+2)
	}
	for i, f := range got[1 : n+1] {
		if fields := strings.Fields(f.Data); len(fields) < 2 || fields[1] != fmt.Sprint(i) {
			t.Fatalf("line %d is %q", i, f.Data)
		}
	}
}

func TestAttachToARunThatSpilledToDiskReplaysItAll(t *testing.T) {
	h := newTestHost(t, Options{})
	c := h.dial(t, nil)
	c.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": 3000, "size": 200}})
	first, _ := c.follow("c", 30*time.Second)
	r, _ := h.runs.Get(first[0].Run)
	if n, err := r.Spilled(); n == 0 || err != nil {
		t.Fatalf("600 KB of output with a 64 KiB memory budget: %d events on disk (%v)", n, err)
	}
	c.send(map[string]any{"type": "attach", "id": "again", "run": first[0].Run, "after_seq": 99})
	again, _ := c.followFrom("again", 99, 30*time.Second)
	if len(again) != len(first)-100 || again[0].Data != first[100].Data {
		t.Fatalf("re-attach after 99 gave %d events, want %d", len(again), len(first)-100)
	}
}

// followFrom is follow for an attach after seq last.
func (c *wsClient) followFrom(id string, last int64, timeout time.Duration) ([]frame, int) {
	c.t.Helper()
	var out []frame
	for {
		f := c.read(timeout)
		if f.ID != id {
			continue
		}
		if f.Seq == nil || *f.Seq != last+1 {
			c.t.Fatalf("after seq %d got %+v", last, f)
		}
		last = *f.Seq
		out = append(out, f)
		if f.Type == "result" || f.Type == "error" {
			return out, 0
		}
	}
}

func sum(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

func TestTokensOverTheWebsocket(t *testing.T) {
	h := newTestHost(t, Options{Tokens: auth.New([]config.Token{
		{Name: "ed", SHA256: sum("ed-token"), Role: "editor"},
		{Name: "vic", SHA256: sum("vic-token"), Role: "viewer"},
	})})

	// A wrong header token is refused before the upgrade.
	if _, resp, err := websocket.DefaultDialer.Dial(h.url, http.Header{"Authorization": {"Bearer nope"}}); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong header token: err %v, resp %v; want 401", err, resp)
	}

	// Without a token, only hello is taken; it says a token is needed.
	c := h.dial(t, nil)
	c.send(map[string]any{"type": "hello", "id": "h"})
	if f := c.read(5 * time.Second); f.Type != "hello" || !f.hello.AuthRequired || f.hello.Principal != "" {
		t.Fatalf("hello without token = %+v", f)
	}
	c.send(map[string]any{"type": "list_tools", "id": "t"})
	if f := c.read(5 * time.Second); f.Type != "error" || f.ID != "t" || f.Error.Code != "unauthorized" {
		t.Fatalf("list_tools before sign-in = %+v", f)
	}
	c.expectClosing("unauthorized", "sign in first")

	// A wrong token in hello: an error, then the connection closes.
	c = h.dial(t, nil)
	c.send(map[string]any{"type": "hello", "id": "h", "token": "wrong"})
	if f := c.read(5 * time.Second); f.Type != "error" || f.ID != "h" || f.Error.Code != "unauthorized" {
		t.Fatalf("hello with a wrong token = %+v", f)
	}
	c.expectClosing("unauthorized", "not one this host knows")

	// A viewer lists tools but may not call.
	v := h.dial(t, nil)
	v.send(map[string]any{"type": "hello", "id": "h", "token": "vic-token"})
	if f := v.read(5 * time.Second); f.hello.Principal != "vic" || f.hello.Role != "viewer" {
		t.Fatalf("viewer hello = %+v", f)
	}
	v.send(map[string]any{"type": "list_tools", "id": "t"})
	if f := v.read(5 * time.Second); f.Type != "tools" || len(f.Tools) != len(fakeTools()) {
		t.Fatalf("viewer list_tools = %+v", f)
	}
	v.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": 1}})
	if f := v.read(5 * time.Second); f.Type != "error" || f.Error.Code != "forbidden" {
		t.Fatalf("viewer call = %+v", f)
	}

	// An editor (header token) calls; the run is recorded as theirs; the
	// viewer may not attach to it or cancel it.
	e := h.dial(t, http.Header{"Authorization": {"Bearer ed-token"}})
	e.send(map[string]any{"type": "call", "id": "c", "tool": "block", "session": "conv-1", "idempotency_key": "k-1"})
	started := e.read(5 * time.Second)
	r, ok := h.runs.Get(started.Run)
	if !ok || r.Principal != "ed" || r.Session != "conv-1" || r.IdempotencyKey != "k-1" {
		t.Fatalf("run record = %+v", r)
	}
	v.send(map[string]any{"type": "attach", "id": "a", "run": started.Run})
	if f := v.read(5 * time.Second); f.Error == nil || f.Error.Code != "forbidden" {
		t.Fatalf("viewer attach to another's run = %+v", f)
	}
	v.send(map[string]any{"type": "cancel", "id": "x", "run": started.Run})
	if f := v.read(5 * time.Second); f.Error == nil || f.Error.Code != "forbidden" {
		t.Fatalf("viewer cancel of another's run = %+v", f)
	}
	e.send(map[string]any{"type": "cancel", "id": "c"})
	if f := e.read(5 * time.Second); f.Type != "error" || f.Error.Code != "cancelled" || f.Seq == nil {
		t.Fatalf("cancel by the owner = %+v", f)
	}
}

func TestOriginCheck(t *testing.T) {
	h := newTestHost(t, Options{AllowedOrigins: []string{"https://chat.example.com"}})
	for origin, want := range map[string]int{"https://evil.example.com": http.StatusForbidden, "https://chat.example.com": http.StatusSwitchingProtocols, h.srv.URL: http.StatusSwitchingProtocols} {
		conn, resp, err := websocket.DefaultDialer.Dial(h.url, http.Header{"Origin": {origin}})
		if resp == nil || resp.StatusCode != want {
			t.Errorf("origin %s: %v, %v; want status %d", origin, resp, err, want)
		}
		if conn != nil {
			conn.Close()
		}
	}
}

func TestConcurrentCallsOnOneConnectionAllEnd(t *testing.T) {
	h := newTestHost(t, Options{})
	c := h.dial(t, nil)
	const calls = 50
	for i := range calls {
		c.send(map[string]any{"type": "call", "id": fmt.Sprint(i), "tool": "lines", "args": map[string]any{"n": 20}})
	}
	last := map[string]int64{}
	ended := 0
	for ended < calls {
		f := c.read(30 * time.Second)
		prev, seen := last[f.ID]
		if !seen {
			prev = -1
		}
		if *f.Seq != prev+1 {
			t.Fatalf("call %s: seq %d after %d", f.ID, *f.Seq, prev)
		}
		last[f.ID] = *f.Seq
		if f.Type == "result" {
			ended++
		}
	}
}

func TestAClientThatReadsNothingIsCutOffWhenRepliesPileUp(t *testing.T) {
	h := newTestHost(t, Options{ConnBuffer: 16 << 10})
	c := h.dial(t, nil)
	// list_tools replies pile up; past twice the buffer the host hangs up.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5000 {
			if err := c.conn.WriteJSON(map[string]any{"type": "list_tools"}); err != nil {
				return
			}
		}
	}()
	wg.Wait()
	n := 0
	for {
		if _, err := c.tryRead(20 * time.Second); err != nil {
			break
		}
		n++
	}
	if n >= 5000 {
		t.Fatalf("all %d replies were delivered to a client that read nothing; want it cut off", n)
	}
}
