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
	"time"

	"github.com/gorilla/websocket"

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
	writeWait      = 10 * time.Second
	// outQueue is how many frames wait for a slow client.
	outQueue = 4096
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

func (s *Server) upgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize:  16 << 10,
		WriteBufferSize: 16 << 10,
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
	ws, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &wsConn{s: s, ws: ws, out: make(chan []byte, outQueue), ctx: ctx, cancel: cancel, calls: map[string]*runs.Run{}}
	go c.writeLoop()
	c.readLoop()
}

// wsConn is one websocket client. One goroutine reads, one writes; runs'
// events reach the writer through out, each run's through its own
// forwarder, so a slow client holds up nothing but itself.
type wsConn struct {
	s      *Server
	ws     *websocket.Conn
	out    chan []byte
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	calls map[string]*runs.Run // client id -> run
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
		c.handle(data)
	}
}

func (c *wsConn) writeLoop() {
	ping := time.NewTicker(pingEvery)
	defer func() {
		ping.Stop()
		_ = c.ws.Close()
	}()
	for {
		select {
		case b := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				c.cancel()
				return
			}
		case <-ping.C:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := c.ws.WriteMessage(websocket.PingMessage, nil); err != nil {
				c.cancel()
				return
			}
		case <-c.ctx.Done():
			_ = c.ws.SetWriteDeadline(time.Now().Add(time.Second))
			_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			return
		}
	}
}

// send queues a frame for the writer; it waits while the client is slow,
// and gives up when the connection ends.
func (c *wsConn) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.s.opts.Logger.Error("a frame could not be encoded", "error", err)
		return
	}
	select {
	case c.out <- b:
	case <-c.ctx.Done():
	}
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

func (c *wsConn) handle(data []byte) {
	m, bad := decodeFrame(data)
	if bad != nil {
		c.send(bad)
		return
	}
	switch m.Type {
	case "hello":
		c.send(map[string]any{"type": "hello", "id": m.ID, "protocol": ProtocolVersion, "server": "toolhost", "version": c.s.opts.Version})
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
	c.mu.Lock()
	if prev, busy := c.calls[m.ID]; busy && !prev.Done() {
		c.mu.Unlock()
		c.sendError(m.ID, "", "bad_frame", fmt.Sprintf("the id %q is already used by a run that is going on", m.ID))
		return
	}
	c.mu.Unlock()
	run, err := c.s.opts.Dispatcher.Start(runs.Request{Tool: m.Tool, Args: m.Args, Principal: "local", Session: m.Session})
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

// forward sends a run's events from seq from on, live, until the run ends
// or the connection does. The run goes on either way.
func (c *wsConn) forward(id string, run *runs.Run, from uint64) {
	for {
		evs, err := run.Next(c.ctx, from)
		if err != nil || evs == nil {
			return
		}
		for _, e := range evs {
			c.send(outEvent{ID: id, Event: e})
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
