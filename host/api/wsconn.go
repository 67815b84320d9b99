package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
)

// This file is one websocket connection: the upgrade and sign-in by
// header, the read loop with its limits, the single writer with pings,
// and closing. frame.go decodes what a client sends, outbox.go queues
// what goes out, handlers.go acts on each frame.

const (
	// maxFrame is the largest frame read; a larger one is skipped and
	// answered with an error, and the connection goes on.
	maxFrame = 1 << 20
	// hardFrameLimit closes a connection sending more than this at once.
	hardFrameLimit = 64 << 20
	pingEvery      = 30 * time.Second
	pongWait       = 75 * time.Second
	// writeWait is how long one frame may take to go out: as long as a
	// client may stay silent, so a client that pauses reading is not cut off
	// sooner than one that pauses talking.
	writeWait = pongWait
	// signInWait is how long a connection may go without signing in.
	signInWait = 30 * time.Second
	// DefaultConnBuffer is how many bytes of frames wait for one slow
	// client before its runs' events stop and it is told it fell behind.
	DefaultConnBuffer = 8 << 20
	// closeWait is how long a connection being closed by the host may
	// take to read its last frames before it is cut off.
	closeWait = 5 * time.Second
)

func (s *Server) upgrader() *websocket.Upgrader {
	// The read buffer is the HTTP server's own (4 KiB), reused; write
	// buffers come from a pool, so an idle connection holds none.
	return &websocket.Upgrader{
		WriteBufferSize: 4 << 10,
		WriteBufferPool: s.writePool,
		CheckOrigin:     s.checkOrigin,
	}
}

// checkOrigin admits clients that send no Origin (not browsers), the
// host's own pages, and the configured origins.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return slices.Contains(s.opts.AllowedOrigins, origin)
}

func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	// A token in the header signs the connection in at once; a wrong one
	// is refused before the upgrade. Browsers sign in with hello instead.
	id, signedIn := auth.Identity{}, false
	if tokens := s.tokens.Load(); !tokens.Required() {
		id, signedIn = auth.Local(), true
	} else if tok, present := auth.Bearer(r); present {
		var ok bool
		if id, ok = tokens.Check(tok); !ok {
			s.unauthorized(w, r)
			return
		}
		signedIn = true
	}
	ws, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &wsConn{
		s: s, ws: ws, ctx: ctx, cancel: cancel, calls: map[string]*runs.Run{}, id: id, peer: r.RemoteAddr,
		out: newOutbox(s.opts.ConnBuffer),
	}
	c.signedIn.Store(signedIn)
	// The tokens may have changed since the check above.
	defer s.track(c)()
	if !signedIn {
		t := time.AfterFunc(signInWait, func() {
			if !c.signedIn.Load() {
				c.closeWith(errorFrame("", "", "unauthorized", "the connection did not sign in (hello with a token) in time"))
			}
		})
		defer t.Stop()
	}
	go c.writeLoop()
	c.readLoop()
}

// wsConn is one websocket client. One goroutine reads, one writes; runs'
// events reach the writer through out, each run's through its own
// forwarder, so a slow client holds up nothing but itself.
type wsConn struct {
	s      *Server
	ws     *websocket.Conn
	out    *outbox
	ctx    context.Context
	cancel context.CancelFunc
	peer   string

	signedIn atomic.Bool
	// closing is set once the host has decided to close the connection:
	// frames from the client are no longer acted on.
	closing atomic.Bool

	mu    sync.Mutex
	id    auth.Identity        // who the connection is signed in as
	calls map[string]*runs.Run // client id -> run
}

// who is who the connection is signed in as.
func (c *wsConn) who() auth.Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

func (c *wsConn) readLoop() {
	defer c.cancel()
	c.ws.SetReadLimit(hardFrameLimit)
	_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		kind, r, err := c.ws.NextReader()
		if err != nil {
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
		data, err := io.ReadAll(io.LimitReader(r, maxFrame+1))
		if err != nil {
			return
		}
		if len(data) > maxFrame {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return
			}
			c.sendError("", "", "too_large", fmt.Sprintf("a frame must be at most %d bytes; this one was skipped", maxFrame))
			continue
		}
		if kind != websocket.TextMessage {
			c.sendError("", "", "bad_frame", "frames are JSON text; a binary frame was skipped")
			continue
		}
		if !c.handle(data) {
			// Wait for the writer to send the last frame and close.
			<-c.ctx.Done()
			return
		}
	}
}

func (c *wsConn) writeLoop() {
	ping := time.NewTicker(pingEvery)
	defer func() {
		ping.Stop()
		c.cancel()
		_ = c.ws.Close()
	}()
	for {
		select {
		case <-c.out.wake:
			for _, f := range c.out.take() {
				_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
				if err := c.ws.WriteMessage(websocket.TextMessage, f.b); err != nil {
					return
				}
				c.out.written(len(f.b))
				if f.final {
					_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, f.why))
					return
				}
			}
		case <-ping.C:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := c.ws.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		case <-c.ctx.Done():
			_ = c.ws.SetWriteDeadline(time.Now().Add(time.Second))
			_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			return
		}
	}
}

func (c *wsConn) encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		c.s.opts.Logger.Error("a frame could not be encoded", "error", err)
		return nil
	}
	return b
}

// send queues a reply for the writer. A client that reads nothing while
// replies pile up is disconnected.
func (c *wsConn) send(v any) {
	b := c.encode(v)
	if b == nil {
		return
	}
	if !c.out.push(outFrame{b: b}) {
		c.s.opts.Logger.Warn("a client read nothing while replies piled up; disconnected", "principal", c.who().Name, "peer", c.peer)
		c.cancel()
	}
}

func (c *wsConn) sendError(id, run, code, message string) {
	c.send(errorFrame(id, run, code, message))
}

// closeWith sends a last frame and closes the connection (with why as
// the close frame's reason).
func (c *wsConn) closeWith(v any, why ...string) {
	c.closing.Store(true)
	b := c.encode(v)
	if b == nil || !c.out.push(outFrame{b: b, final: true, why: strings.Join(why, " ")}) {
		c.cancel()
	}
}

// recheck checks the connection's sign-in against tokens put in force:
// one that no longer holds is told why and closed; the runs it started go
// on. Called with s.connsMu held.
func (c *wsConn) recheck(tokens *auth.Tokens) {
	if !c.signedIn.Load() || c.closing.Load() {
		return
	}
	c.mu.Lock()
	id, change := tokens.Recheck(c.id)
	if change == nil {
		c.id = id
		c.mu.Unlock()
		return
	}
	old := c.id
	c.id = auth.Identity{}
	c.mu.Unlock()
	c.s.opts.Logger.Info("closing a websocket: its sign-in no longer holds", "principal", old.Name, "peer", c.peer, "why", change.Code)
	c.closeWith(client.Closing{Type: "closing", Error: client.Error{Code: change.Code, Message: change.Message}}, change.Code)
	// A client that reads nothing is cut off all the same.
	time.AfterFunc(closeWait, func() {
		c.cancel()
		_ = c.ws.NetConn().Close()
	})
}
