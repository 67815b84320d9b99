package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
)

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

// inMessage is every field a client frame may carry; which are needed
// depends on its type.
type inMessage struct {
	Type           string          `json:"type"`
	ID             string          `json:"id"`
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	Run            string          `json:"run"`
	AfterSeq       *int64          `json:"after_seq"`
	Session        string          `json:"session"`
	IdempotencyKey string          `json:"idempotency_key"`
	Client         string          `json:"client"`
	Token          string          `json:"token"`
	Protocol       int             `json:"protocol"`
}

// outEvent is a run's event as one client sees it: with that client's id.
type outEvent struct {
	ID string `json:"id,omitempty"`
	runs.Event
}

// frameError is the reply to a frame that can't be acted on.
type frameError struct {
	Type  string         `json:"type"`
	ID    string         `json:"id,omitempty"`
	Run   string         `json:"run,omitempty"`
	Error runs.ErrorBody `json:"error"`
}

// closingFrame tells a client why the host closes its connection; the
// close frame follows.
type closingFrame struct {
	Type  string         `json:"type"`
	Error runs.ErrorBody `json:"error"`
}

// behindFrame tells a client the host stopped sending it a run's events.
type behindFrame struct {
	Type    string `json:"type"`
	ID      string `json:"id,omitempty"`
	Run     string `json:"run"`
	LastSeq int64  `json:"last_seq"`
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
		out: outbox{limit: s.opts.ConnBuffer, wake: make(chan struct{}, 1)},
	}
	c.signedIn.Store(signedIn)
	// The tokens may have changed since the check above.
	defer s.track(c)()
	if !signedIn {
		t := time.AfterFunc(signInWait, func() {
			if !c.signedIn.Load() {
				c.closeWith(frameError{Type: "error", Error: runs.ErrorBody{Code: "unauthorized", Message: "the connection did not sign in (hello with a token) in time"}})
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
	out    outbox
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

// outFrame is a frame waiting for the writer.
type outFrame struct {
	b     []byte
	final bool   // close the connection once it is written
	why   string // the close frame's reason, with final
}

// outbox is the frames waiting for one connection's writer, with their
// size bounded: a run's events stop at the limit (the forwarder is told,
// and queues a behind frame instead); other frames go on until twice the
// limit, past which the client reads nothing and is cut off.
type outbox struct {
	mu     sync.Mutex
	q      []outFrame
	bytes  int
	limit  int
	closed bool
	wake   chan struct{}
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// pushEvent queues a run's event unless that would pass the limit (an
// empty queue takes any one frame, so a big event still goes). When it
// would, it queues behind instead, and returns false: the forwarder stops.
func (o *outbox) pushEvent(b []byte, behind func() []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	if o.bytes > 0 && o.bytes+len(b) > o.limit {
		bb := behind()
		o.q = append(o.q, outFrame{b: bb})
		o.bytes += len(bb)
		o.signal()
		return false
	}
	o.q = append(o.q, outFrame{b: b})
	o.bytes += len(b)
	o.signal()
	return true
}

// push queues a reply; it returns false if the client has let more than
// twice the limit pile up, and the connection must end.
func (o *outbox) push(f outFrame) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return true
	}
	if o.bytes > 2*o.limit {
		return false
	}
	o.q = append(o.q, f)
	o.bytes += len(f.b)
	if f.final {
		o.closed = true
	}
	o.signal()
	return true
}

// take returns every frame waiting.
func (o *outbox) take() []outFrame {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.q
	o.q = nil
	return q
}

func (o *outbox) written(n int) {
	o.mu.Lock()
	o.bytes -= n
	o.mu.Unlock()
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
	c.closeWith(closingFrame{Type: "closing", Error: runs.ErrorBody{Code: change.Code, Message: change.Message}}, change.Code)
	// A client that reads nothing is cut off all the same.
	time.AfterFunc(closeWait, func() {
		c.cancel()
		_ = c.ws.NetConn().Close()
	})
}

func (c *wsConn) sendError(id, run, code, message string) {
	c.send(frameError{Type: "error", ID: id, Run: run, Error: runs.ErrorBody{Code: code, Message: message}})
}

// messageTypes are the frames a client may send.
var messageTypes = map[string]bool{"hello": true, "ping": true, "list_tools": true, "call": true, "cancel": true, "attach": true}

// decodeFrame reads one client frame, or says what is wrong with it (with
// the frame's id when one can be read).
func decodeFrame(data []byte) (inMessage, *frameError) {
	var m inMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var loose struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &loose)
		return m, badFrame(loose.ID, "the frame is not a JSON object of the protocol: "+describeJSONError(err))
	}
	if dec.More() {
		return m, badFrame(m.ID, "the frame holds more than one JSON value")
	}
	switch {
	case m.Type == "":
		return m, badFrame(m.ID, "the frame has no \"type\" (call, cancel, attach, list_tools, hello or ping)")
	case !messageTypes[m.Type]:
		return m, badFrame(m.ID, fmt.Sprintf("%q is not a message type (call, cancel, attach, list_tools, hello or ping)", m.Type))
	case m.Type == "call" && m.ID == "":
		return m, badFrame("", "a call needs an \"id\" of your choosing, to match its events")
	case m.Type == "call" && m.Tool == "":
		return m, badFrame(m.ID, "a call needs a \"tool\" to run")
	case m.Type == "attach" && m.Run == "":
		return m, badFrame(m.ID, "attach needs the \"run\" to attach to")
	case m.Type == "cancel" && m.Run == "" && m.ID == "":
		return m, badFrame("", "cancel needs the \"run\" to cancel, or the \"id\" of your call")
	}
	return m, nil
}

func badFrame(id, message string) *frameError {
	return &frameError{Type: "error", ID: id, Error: runs.ErrorBody{Code: "bad_frame", Message: message}}
}

// handle acts on one frame; it returns false when the connection must
// close (the writer closes it after the last frame).
func (c *wsConn) handle(data []byte) bool {
	if c.closing.Load() {
		return true // the connection is closing: nothing more is done for it
	}
	m, bad := decodeFrame(data)
	if !c.signedIn.Load() && (bad != nil || m.Type != "hello") {
		c.closeWith(frameError{Type: "error", ID: m.ID, Error: runs.ErrorBody{Code: "unauthorized",
			Message: "sign in first: send {\"type\":\"hello\",\"token\":\"…\"} (or an Authorization: Bearer header)"}})
		return false
	}
	if bad != nil {
		c.send(bad)
		return true
	}
	switch m.Type {
	case "hello":
		return c.hello(m)
	case "ping":
		c.send(map[string]any{"type": "pong", "id": m.ID})
	case "list_tools":
		c.send(map[string]any{"type": "tools", "id": m.ID, "tools": c.s.specs()})
	case "call":
		c.call(m)
	case "cancel":
		c.cancelRun(m)
	case "attach":
		c.attach(m)
	}
	return true
}

func (c *wsConn) hello(m inMessage) bool {
	if m.Protocol != 0 && m.Protocol != ProtocolVersion {
		c.sendError(m.ID, "", "unsupported_protocol", fmt.Sprintf("this host speaks protocol %d, not %d", ProtocolVersion, m.Protocol))
		return true
	}
	if m.Token != "" {
		// Under connsMu: a change of tokens comes wholly before or after.
		c.s.connsMu.Lock()
		tokens := c.s.tokens.Load()
		id, ok := tokens.Check(m.Token)
		if ok {
			c.mu.Lock()
			c.id = id
			c.mu.Unlock()
			c.signedIn.Store(true)
		}
		c.s.connsMu.Unlock()
		if !ok && tokens.Required() {
			c.s.opts.Logger.Warn("refused a websocket sign-in with a wrong token", "peer", c.peer, "client", m.Client)
			c.closeWith(frameError{Type: "error", ID: m.ID, Error: runs.ErrorBody{Code: "unauthorized", Message: "the token is not one this host knows"}})
			return false
		}
	}
	who := c.who()
	if c.signedIn.Load() {
		c.s.opts.Logger.Debug("websocket client said hello", "principal", who.Name, "role", who.Role, "client", m.Client, "peer", c.peer)
	}
	c.send(map[string]any{
		"type": "hello", "id": m.ID, "protocol": ProtocolVersion, "server": "toolhost", "version": c.s.opts.Version,
		"auth_required": c.s.tokens.Load().Required(), "principal": who.Name, "role": who.Role,
	})
	return true
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("it isn't valid JSON (at byte %d: %v)", se.Offset, se)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ")
	case errors.Is(err, io.EOF):
		return "it is empty"
	}
	return err.Error()
}

func (c *wsConn) call(m inMessage) {
	who := c.who()
	if !who.CanCall() {
		c.sendError(m.ID, "", "forbidden", fmt.Sprintf("%s is a %s and may not run tools", who.Name, who.Role))
		return
	}
	c.mu.Lock()
	if prev, busy := c.calls[m.ID]; busy && !prev.Done() {
		c.mu.Unlock()
		c.sendError(m.ID, "", "bad_frame", fmt.Sprintf("the id %q is already used by a run that is going on", m.ID))
		return
	}
	c.mu.Unlock()
	run, err := c.s.opts.Dispatcher.Start(runs.Request{Tool: m.Tool, Args: m.Args, Principal: who.Name, Session: m.Session, IdempotencyKey: m.IdempotencyKey})
	if err != nil {
		code := "failed"
		var ce *runs.CallError
		if errors.As(err, &ce) {
			code = ce.Code
		}
		c.sendError(m.ID, "", code, err.Error())
		return
	}
	c.mu.Lock()
	c.calls[m.ID] = run
	c.mu.Unlock()
	go c.forward(m.ID, run, 0)
}

// forward sends a run's events from seq from on, live, until the run ends,
// the connection does, or the client falls too far behind (then it is
// told so). The run goes on whatever happens here.
func (c *wsConn) forward(id string, run *runs.Run, from uint64) {
	for {
		evs, err := run.Next(c.ctx, from)
		if err != nil && c.ctx.Err() == nil {
			c.sendError(id, run.ID, "unknown_run", "the run's events can no longer be read: "+err.Error())
		}
		if err != nil {
			return
		}
		if evs == nil {
			// The run ended and the client has all of it: the call's id
			// is free again, and the run can be forgotten in time.
			c.mu.Lock()
			if c.calls[id] == run {
				delete(c.calls, id)
			}
			c.mu.Unlock()
			return
		}
		for _, e := range evs {
			b := c.encode(outEvent{ID: id, Event: e})
			if b == nil {
				return
			}
			last := int64(from) - 1
			if !c.out.pushEvent(b, func() []byte {
				return c.encode(behindFrame{Type: "behind", ID: id, Run: run.ID, LastSeq: last})
			}) {
				c.s.opts.Logger.Debug("a client fell behind a run", "run", run.ID, "principal", c.who().Name, "last_seq", last)
				return
			}
			from = e.Seq + 1
		}
	}
}

func (c *wsConn) cancelRun(m inMessage) {
	run := c.findRun(m)
	if run == nil {
		c.sendError(m.ID, m.Run, "unknown_run", "cancel names no run of yours: give \"run\" (the run id) or the \"id\" of your call")
		return
	}
	if who := c.who(); !who.CanSee(run.Principal) || !who.CanCall() {
		c.sendError(m.ID, run.ID, "forbidden", "you may cancel only runs you started")
		return
	}
	run.Cancel()
}

func (c *wsConn) findRun(m inMessage) *runs.Run {
	if m.Run != "" {
		if r, ok := c.s.opts.Dispatcher.Get(m.Run); ok {
			return r
		}
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[m.ID]
}

func (c *wsConn) attach(m inMessage) {
	run, ok := c.s.opts.Dispatcher.Get(m.Run)
	if !ok {
		c.sendError(m.ID, m.Run, "unknown_run", "there is no run with that id (runs are kept for a while after they end)")
		return
	}
	if !c.who().CanSee(run.Principal) {
		c.sendError(m.ID, m.Run, "forbidden", "that run was started by someone else")
		return
	}
	from := uint64(0)
	if m.AfterSeq != nil && *m.AfterSeq >= 0 {
		from = uint64(*m.AfterSeq) + 1
	}
	if m.ID != "" {
		c.mu.Lock()
		c.calls[m.ID] = run
		c.mu.Unlock()
	}
	go c.forward(m.ID, run, from)
}
