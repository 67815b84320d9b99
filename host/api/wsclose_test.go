package api

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
)

// TestATextFrameNotUTF8ClosesWith1007: RFC 6455 8.1: a text frame that
// is not UTF-8 fails the connection, with 1007, after the closing frame
// saying where; the frames before it were served.
func TestATextFrameNotUTF8ClosesWith1007(t *testing.T) {
	h := newTestHost(t, Options{})
	c := h.dial(t, nil)
	c.send(map[string]any{"type": "ping", "id": "é"})
	if f := c.read(5 * time.Second); f.Type != "pong" || f.ID != "é" {
		t.Fatalf("a ping in UTF-8: %+v", f)
	}
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte("{\"type\":\"ping\",\"id\":\"\xff\xfe\"}")); err != nil {
		t.Fatal(err)
	}
	c.expectClose("bad_frame", "must be UTF-8 (RFC 6455); this one is not, from byte 21", websocket.CloseInvalidFramePayloadData)
}

// TestAFrameOver64MiBClosesWith1009: a frame past the hard limit is
// answered with the closing frame, then 1009; one over 1 MiB and under
// the limit is skipped and the connection goes on.
func TestAFrameOver64MiBClosesWith1009(t *testing.T) {
	h := newTestHost(t, Options{})
	c := h.dial(t, nil)
	if err := c.conn.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("a"), maxFrame+1)); err != nil {
		t.Fatal(err)
	}
	if f := c.read(5 * time.Second); f.Type != "error" || f.Error.Code != "too_large" {
		t.Fatalf("a frame of 1 MiB and a byte: %+v", f)
	}
	sent := make(chan error, 1)
	go func() {
		w, err := c.conn.NextWriter(websocket.TextMessage)
		if err != nil {
			sent <- err
			return
		}
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for i := 0; i <= hardFrameLimit>>20 && err == nil; i++ {
			_, err = w.Write(chunk)
		}
		if err == nil {
			err = w.Close()
		}
		sent <- err
	}()
	c.expectClose("too_large", "a frame over 64 MiB closes the connection", websocket.CloseMessageTooBig)
	<-sent // the host read it all before closing, or cut the writer off after: either ends it
}

// TestSignInClosesSayWhy: a connection that does not sign in in time,
// one that sends another frame first and one with a wrong token each get
// the closing frame, then 1008 with "unauthorized" as the reason.
func TestSignInClosesSayWhy(t *testing.T) {
	h := newTestHost(t, Options{Tokens: auth.New([]config.Token{{Name: "ed", SHA256: sum("ed-token"), Role: "editor"}})})
	h.api.waits.signIn = 200 * time.Millisecond
	quiet := h.dial(t, nil)
	quiet.expectClosing("unauthorized", "did not sign in (hello with a token) within 200ms")

	early := h.dial(t, nil)
	early.send(map[string]any{"type": "ping", "id": "p"})
	if f := early.read(5 * time.Second); f.Type != "error" || f.ID != "p" || f.Error.Code != "unauthorized" {
		t.Fatalf("a ping before sign-in: %+v", f)
	}
	early.expectClosing("unauthorized", "sign in first")

	// Signed in in time: the timer does nothing.
	ok := h.dial(t, nil)
	ok.send(map[string]any{"type": "hello", "id": "h", "token": "ed-token"})
	if f := ok.read(5 * time.Second); f.Type != "hello" || f.hello.Principal != "ed" {
		t.Fatalf("hello: %+v", f)
	}
	time.Sleep(400 * time.Millisecond)
	ok.send(map[string]any{"type": "ping", "id": "p"})
	if f := ok.read(5 * time.Second); f.Type != "pong" {
		t.Fatalf("a ping after the sign-in wait: %+v", f)
	}
}

// TestASilentClientIsToldWhy: a client that sends nothing, not even a
// pong, for pongWait gets the closing frame (timeout), then 1008.
func TestASilentClientIsToldWhy(t *testing.T) {
	h := newTestHost(t, Options{})
	h.api.waits.pong = 300 * time.Millisecond
	c := h.dial(t, nil)
	time.Sleep(600 * time.Millisecond)
	c.expectClosing("timeout", "sent nothing, not even a pong, for 300ms")
}

// TestCloseCodes: the one mapping from a closing frame's code to the
// close code.
func TestCloseCodes(t *testing.T) {
	for code, want := range map[string]int{
		"bad_frame": 1007, "too_large": 1009, "unauthorized": 1008, "token_revoked": 1008,
		"token_downgraded": 1008, "timeout": 1008, "too_slow": 1008, "shutting_down": 1001,
	} {
		if got := closeCode(code); got != want {
			t.Errorf("closeCode(%q) = %d; want %d", code, got, want)
		}
	}
}

// TestAStoppingHostClosesItsWebsockets: a host that stops cancels its
// runs, then closes every websocket, signed in or not, once it has sent
// each the ends of the runs it follows: the run's error saying why comes
// before the closing frame shutting_down and 1001 (going away), so
// clients know what became of their calls and to come back later. A
// connection opened while the host stops is closed the same way, and no
// call starts.
func TestAStoppingHostClosesItsWebsockets(t *testing.T) {
	h := newTestHost(t, Options{Tokens: auth.New([]config.Token{{Name: "ed", SHA256: sum("ed-token"), Role: "editor"}})})
	signed := h.dial(t, bearer("ed"))
	signed.send(map[string]any{"type": "call", "id": "c", "tool": "block"})
	if f := signed.read(5 * time.Second); f.Type != "started" {
		t.Fatalf("the call: %+v", f)
	}
	unsigned := h.dial(t, nil) // the host may track it before CloseWebsockets or after: closed either way

	h.runs.CancelAll("the host is stopping")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closed := make(chan struct{})
	go func() {
		h.api.CloseWebsockets(ctx, "the host is stopping")
		close(closed)
	}()

	end := signed.read(5 * time.Second)
	for end.Type != "error" && end.Type != "closing" {
		end = signed.read(5 * time.Second)
	}
	if end.Type != "error" || end.ID != "c" || end.Error == nil || !strings.Contains(end.Error.Message, "the host is stopping") {
		t.Fatalf("the cut-off run's end: %+v (error %+v); want its error saying the host is stopping, before the closing frame", end, end.Error)
	}
	signed.expectClose("shutting_down", "the host is stopping", websocket.CloseGoingAway)
	unsigned.expectClose("shutting_down", "the host is stopping", websocket.CloseGoingAway)
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("CloseWebsockets did not return once every client had answered the close")
	}

	late := h.dial(t, bearer("ed"))
	late.send(map[string]any{"type": "call", "id": "c", "tool": "block"})
	late.expectClose("shutting_down", "the host is stopping", websocket.CloseGoingAway)
	if _, err := h.runs.Start(runs.Request{Tool: "block", Principal: "ed"}); err == nil || !strings.Contains(err.Error(), "the host is stopping") {
		t.Errorf("a run started while the host stops: %v; want it refused, saying the host is stopping", err)
	}
}

// TestAClientThatReadsNothingIsToldWhy: a client that reads nothing while
// its replies pile up past twice its queue's limit is closed with the
// closing frame too_slow, then 1008, which it finds once it reads again.
func TestAClientThatReadsNothingIsToldWhy(t *testing.T) {
	h := newTestHost(t, Options{ConnBuffer: 4 << 10})
	c := h.dial(t, nil)
	// Replies of list_tools, unread, fill the sockets' buffers and then
	// the host's queue. The host reads on, so sending never blocks.
	for i := 0; i < 20000; i++ {
		if err := c.conn.WriteJSON(map[string]any{"type": "list_tools", "id": "t"}); err != nil {
			break // the host cut the connection off: its frames are still to read
		}
	}
	for {
		f, err := c.tryRead(5 * time.Second)
		if err != nil {
			t.Fatalf("no closing frame before %v", err)
		}
		if f.Type == "tools" {
			continue
		}
		if f.Type != "closing" || f.Error == nil || f.Error.Code != "too_slow" || !strings.Contains(f.Error.Message, "read nothing while more than") {
			t.Fatalf("got %+v (error %+v); want a closing frame too_slow", f, f.Error)
		}
		break
	}
	_, err := c.tryRead(5 * time.Second)
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != "too_slow" {
		t.Fatalf("after the closing frame: %v; want the close 1008 too_slow", err)
	}
}
