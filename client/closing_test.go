package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/client"
)

// closingHost is a fake host whose first connection, once signed in, is
// closed the host's way: a closing frame with code, then 1008. Later
// connections answer pings. conns counts the connections.
func closingHost(t *testing.T, code string) (url string, conns *atomic.Int32) {
	t.Helper()
	conns = &atomic.Int32{}
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		n := conns.Add(1)
		for {
			var m client.Message
			if err := ws.ReadJSON(&m); err != nil {
				return
			}
			switch {
			case m.Type == "hello":
				_ = ws.WriteJSON(client.HelloReply{Type: "hello", ID: m.ID, Protocol: 1, Server: "toolhost", Principal: "ed", Role: "editor"})
				if n == 1 {
					_ = ws.WriteJSON(client.Closing{Type: "closing", Error: client.Error{Code: code, Message: "closed by the test"}})
					_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, code))
				}
			case m.Type == "ping":
				_ = ws.WriteJSON(client.Pong{Type: "pong", ID: m.ID})
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, conns
}

// pingUntil pings until a ping succeeds or fails otherwise than by the
// dropped connection, for at most 5 s, and returns the last error.
func pingUntil(t *testing.T, c *client.Conn) error {
	t.Helper()
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err = c.Ping(ctx(t)); err == nil || !strings.Contains(err.Error(), "dropped") {
			return err
		}
	}
	return err
}

// TestAConnClosedForTimeoutOrSlownessDialsAgain: a closing of the host's
// for timeout, too_slow or shutting_down is taken as a dropped connection (the Conn
// dials again and works on); one for a token that no longer holds ends
// the Conn with the host's reason.
func TestAConnClosedForTimeoutOrSlownessDialsAgain(t *testing.T) {
	for _, code := range []string{"timeout", "too_slow", "shutting_down"} {
		url, conns := closingHost(t, code)
		c, err := client.Dial(ctx(t), url, client.Options{RedialWait: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := pingUntil(t, c); err != nil || conns.Load() != 2 {
			t.Errorf("closed for %s: ping %v, %d connections; want it to dial again", code, err, conns.Load())
		}
		_ = c.Close()
	}
	url, conns := closingHost(t, "token_revoked")
	c, err := client.Dial(ctx(t), url, client.Options{RedialWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ce *client.Error
	if err := pingUntil(t, c); !errors.As(err, &ce) || ce.Code != "token_revoked" || conns.Load() != 1 {
		t.Errorf("closed for token_revoked: ping %v, %d connections; want the host's reason and no new connection", err, conns.Load())
	}
}

// TestACallCutOffByAStoppingHostSaysSo: a host that stops closes the
// connection of a call in progress (closing frame shutting_down, then
// 1001) and can't be reached again: the call ends with an error that
// names the run and gives the host's own words, not a dropped socket.
func TestACallCutOffByAStoppingHostSaysSo(t *testing.T) {
	up := websocket.Upgrader{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			var m client.Message
			if err := ws.ReadJSON(&m); err != nil {
				return
			}
			switch m.Type {
			case "hello":
				_ = ws.WriteJSON(client.HelloReply{Type: "hello", ID: m.ID, Protocol: 1, Server: "toolhost", Principal: "ed", Role: "editor"})
			case "call":
				_ = ws.WriteJSON(client.Event{Type: "started", ID: m.ID, Run: "r1", Tool: m.Tool})
				_ = ws.WriteJSON(client.Closing{Type: "closing", Error: client.Error{Code: "shutting_down", Message: "the host is stopping; connect again once it is back"}})
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "shutting_down"))
				go srv.Close() // and nobody answers again
				return
			}
		}
	}))
	defer srv.Close()
	c, err := client.Dial(ctx(t), srv.URL, client.Options{RedialWait: 10 * time.Millisecond, Redials: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Call(ctx(t), "slow", nil, nil)
	var ce *client.Error
	if err == nil || !errors.As(err, &ce) || ce.Code != "shutting_down" ||
		!strings.Contains(err.Error(), "the host stopped before the run r1 ended") || !strings.Contains(err.Error(), "the host is stopping") {
		t.Fatalf("the cut-off call: %v; want it to say the host stopped before run r1 ended, in the host's words", err)
	}
}
