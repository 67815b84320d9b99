package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
)

// This file is one websocket connection: the upgrade and sign-in by
// header, the read loop with its limits, the single writer with pings,
// and closing (closeWith, the one way the host closes a connection, and
// closeCode, the code of each reason). frame.go decodes what a client sends, outbox.go queues
// what goes out, wsmessages.go acts on each frame.

const (
	// maxFrame is the largest frame read; a larger one is skipped and
	// answered with an error, and the connection goes on.
	maxFrame = 1 << 20
	// hardFrameLimit closes a connection sending more than this at once
	// (1009). Counted here, not by the library, which would close with
	// no closing frame first.
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
	// take to read its last frames and answer the close frame before it
	// is cut off.
	closeWait = 5 * time.Second
)

// wsWaits are the waits of websockets that tests shorten; zero is the
// default.
type wsWaits struct {
	signIn, pong time.Duration
}

func (w wsWaits) signInWait() time.Duration { return cmp.Or(w.signIn, signInWait) }
func (w wsWaits) pongWait() time.Duration   { return cmp.Or(w.pong, pongWait) }

// closeCode is the close code (RFC 6455, 7.4.1) of a close the host makes,
// by the code of the closing frame's error; the code itself is the close
// frame's reason. docs/protocol.md, "Closing", has the table.
func closeCode(code string) int {
	switch code {
	case wire.CodeBadFrame:
		// Only a text frame that is not UTF-8 closes; other bad frames
		// are answered with an error and the connection goes on.
		return websocket.CloseInvalidFramePayloadData // 1007
	case wire.CodeTooLarge:
		return websocket.CloseMessageTooBig // 1009
	case wire.CodeShuttingDown:
		return websocket.CloseGoingAway // 1001
	default:
		// unauthorized, token_revoked, token_downgraded, timeout, too_slow.
		return websocket.ClosePolicyViolation // 1008
	}
}

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
		out: newOutbox(s.opts.ConnBuffer), readDone: make(chan struct{}), writeDone: make(chan struct{}),
	}
	c.signedIn.Store(signedIn)
	// The tokens may have changed since the check above.
	defer s.track(c)()
	if !signedIn {
		wait := s.waits.signInWait()
		t := time.AfterFunc(wait, func() {
			if !c.signedIn.Load() {
				c.closeWith(wire.Error{Code: wire.CodeUnauthorized, Message: fmt.Sprintf(
					"the connection did not sign in (hello with a token) within %v", wait)})
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
	// readDone is closed when the reader ends: the client closed, went,
	// or can't be read any more.
	readDone chan struct{}
	// writeDone is closed when the writer ends: the connection is over.
	writeDone chan struct{}

	mu    sync.Mutex
	id    auth.Identity        // who the connection is signed in as
	calls map[string]*runs.Run // client id -> run
	// forwarding counts the runs' forwarders at work; forwarded, when
	// set, is closed once it is zero (waitForwarded).
	forwarding int
	forwarded  chan struct{}
}

// who is who the connection is signed in as.
func (c *wsConn) who() auth.Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// readLoop reads the client's frames until it closes or goes. Once the
// host closes the connection it reads on, acting on nothing, until the
// client's close frame (or closeWait): a client cut off while it still
// sends could lose the closing frame to a reset.
func (c *wsConn) readLoop() {
	defer close(c.readDone)
	defer func() {
		if !c.closing.Load() {
			c.cancel() // the client closed or went: nothing is left to say
		}
	}()
	pong := c.s.waits.pongWait()
	c.ws.SetReadLimit(0) // hardFrameLimit is counted below
	_ = c.ws.SetReadDeadline(time.Now().Add(pong))
	c.ws.SetPongHandler(func(string) error {
		if c.closing.Load() {
			return nil
		}
		return c.ws.SetReadDeadline(time.Now().Add(pong))
	})
	for {
		kind, r, err := c.ws.NextReader()
		if err != nil {
			c.readFailed(err)
			return
		}
		if c.closing.Load() {
			continue // NextReader drops what is left of this frame
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(pong))
		data, err := io.ReadAll(io.LimitReader(r, maxFrame+1))
		if err != nil {
			c.readFailed(err)
			return
		}
		if len(data) > maxFrame {
			n, err := io.Copy(io.Discard, io.LimitReader(r, hardFrameLimit-int64(len(data))+1))
			if err != nil {
				c.readFailed(err)
				return
			}
			if int64(len(data))+n > hardFrameLimit {
				c.closeWith(wire.Error{Code: wire.CodeTooLarge, Message: fmt.Sprintf(
					"a frame over %d MiB closes the connection (frames over %d MiB are skipped)", hardFrameLimit>>20, maxFrame>>20)})
				continue
			}
			c.sendError("", "", wire.CodeTooLarge, fmt.Sprintf("a frame must be at most %d bytes; this one was skipped", maxFrame))
			continue
		}
		if kind != websocket.TextMessage {
			c.sendError("", "", wire.CodeBadFrame, "frames are JSON text; a binary frame was skipped")
			continue
		}
		if !utf8.Valid(data) {
			c.closeWith(wire.Error{Code: wire.CodeBadFrame, Message: fmt.Sprintf(
				"a text frame must be UTF-8 (RFC 6455); this one is not, from byte %d", invalidUTF8At(data))})
			continue
		}
		c.handle(data) // false: the host closes the connection; reading goes on until the client's close
	}
}

// readFailed ends reading on an error. A client silent past pongWait is
// told so; one that asked for a frame past what a length can hold is
// told it is too large; one that closed or went needs no word.
func (c *wsConn) readFailed(err error) {
	var ne net.Error
	switch {
	case c.closing.Load():
	case errors.Is(err, websocket.ErrReadLimit):
		c.closeWith(wire.Error{Code: wire.CodeTooLarge, Message: fmt.Sprintf("a frame over %d MiB closes the connection", hardFrameLimit>>20)})
	case errors.As(err, &ne) && ne.Timeout():
		c.closeWith(wire.Error{Code: wire.CodeTimeout, Message: fmt.Sprintf(
			"the client sent nothing, not even a pong, for %v", c.s.waits.pongWait())})
	}
}

// invalidUTF8At is the offset of the first byte of b that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func (c *wsConn) writeLoop() {
	ping := time.NewTicker(pingEvery)
	defer func() {
		ping.Stop()
		c.cancel()
		_ = c.ws.Close()
		close(c.writeDone)
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
					code := closeCode(f.why)
					_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(code, f.why))
					// The client answers with its close frame, which ends
					// the reader; closeWith's timer cuts off one that doesn't.
					select {
					case <-c.readDone:
					case <-c.ctx.Done():
					}
					return
				}
			}
		case <-ping.C:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := c.ws.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		case <-c.ctx.Done():
			// The client closed (the library answered its close frame)
			// or went, or the host cut it off: nothing can be said.
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
		c.closeWith(wire.Error{Code: wire.CodeTooSlow, Message: fmt.Sprintf(
			"the client read nothing while more than %d MiB of replies piled up", 2*c.s.opts.ConnBuffer>>20)})
	}
}

func (c *wsConn) sendError(id, run, code, message string) {
	c.send(errorFrame(id, run, code, message))
}

// closeWith is how the host closes a connection, for every reason of
// its own: it queues the closing frame saying why (after the frames
// already queued), then the close frame, with closeCode(why.Code) as its
// code and why.Code as its reason. From now on the client's frames are
// read and dropped until its own close frame; one that has not closed
// within closeWait (or reads nothing) is cut off. The first close wins.
func (c *wsConn) closeWith(why wire.Error) {
	if c.closing.Swap(true) {
		return
	}
	b := c.encode(wire.Closing{Type: wire.TypeClosing, Error: why})
	if b == nil || !c.out.push(outFrame{b: b, final: true, why: why.Code}) {
		c.cancel()
	}
	time.AfterFunc(closeWait, func() {
		c.cancel()
		_ = c.ws.NetConn().Close()
	})
}

// CloseWebsockets closes every open websocket the host's way, for a host
// that is stopping: each connection first gets the ends of the runs it
// follows (the caller has cancelled them), then the closing frame
// shutting_down and 1001. A connection opened from now on is closed the
// same way at once. It returns when every connection is over, or when ctx
// ends: then the ones left are cut off.
func (s *Server) CloseWebsockets(ctx context.Context, message string) {
	why := wire.Error{Code: wire.CodeShuttingDown, Message: message}
	s.connsMu.Lock()
	s.stopping = &why
	var open []*wsConn
	for c := range s.conns {
		if ws, ok := c.(*wsConn); ok {
			open = append(open, ws)
		}
	}
	s.connsMu.Unlock()
	var wg sync.WaitGroup
	for _, c := range open {
		wg.Go(func() {
			c.waitForwarded(ctx)
			c.closeWith(why)
			select {
			case <-c.writeDone:
			case <-ctx.Done():
				c.cancel()
				_ = c.ws.NetConn().Close()
			}
		})
	}
	wg.Wait()
}

// startForward forwards a run's events to the client (forward), counted
// for waitForwarded.
func (c *wsConn) startForward(id string, run *runs.Run, from uint64) {
	c.mu.Lock()
	c.forwarding++
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			c.forwarding--
			if c.forwarding == 0 && c.forwarded != nil {
				close(c.forwarded)
				c.forwarded = nil
			}
			c.mu.Unlock()
		}()
		c.forward(id, run, from)
	}()
}

// waitForwarded waits until no run's forwarder is at work (each has queued
// its run's last event, or stopped), or ctx ends.
func (c *wsConn) waitForwarded(ctx context.Context) {
	c.mu.Lock()
	if c.forwarding == 0 {
		c.mu.Unlock()
		return
	}
	if c.forwarded == nil {
		c.forwarded = make(chan struct{})
	}
	done := c.forwarded
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
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
	c.closeWith(wire.Error{Code: change.Code, Message: change.Message})
}
