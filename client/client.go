// Package client is a Go client of a toolhost host. The types of its
// protocol (docs/protocol.md: the frames on the websocket, a run's events,
// the error object and its codes, the records of the HTTP endpoints) are
// declared once in package wire, which the host encodes; client names them
// by alias (client.Event is wire.Event). A chat backend written in Go
// imports this package to list the tools, call them and follow their
// output.
//
// Dial opens a websocket and signs in; Call runs a tool and streams its
// events to a callback, picking the run up again after a dropped
// connection or a slow read (behind) from the last event it got, so no
// event is lost or given twice. One Conn carries many calls at once.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/client/wire"
)

// Options say how to reach and sign in to a host.
type Options struct {
	// Token is the caller's bearer token; "" for a host with no tokens.
	Token string
	// Origin, when set, is sent as the Origin header of the websocket
	// upgrade (a host admits only its own and its allowed origins).
	Origin string
	// Client names the client in the host's logs.
	Client string
	// Header is added to the websocket upgrade and HTTP requests.
	Header http.Header
	// Dialer opens the websocket; nil is websocket.DefaultDialer.
	Dialer *websocket.Dialer
	// HTTPClient makes the HTTP requests; nil is http.DefaultClient.
	HTTPClient *http.Client
	// Redials is how many times in a row a call reconnects after the
	// connection drops before it gives up; 0 means 5, -1 never.
	Redials int
	// RedialWait is the pause before the first reconnection (then twice,
	// three times as long …); 0 means 500ms.
	RedialWait time.Duration
}

// Conn is a websocket to a host, signed in. It is safe for concurrent use:
// any number of calls may go on at once. After the connection drops, the
// next call (and every call following a run) opens a new one.
type Conn struct {
	opts Options
	ws   string // ws://…/api/v1/ws
	base string // http://…

	// Hello is the host's answer to the first hello.
	Hello HelloReply

	nextID atomic.Uint64

	mu     sync.Mutex
	cur    *socket
	closed error // set once the host or Close ended the Conn for good
	subs   map[string]*sub
}

// socket is one websocket: a reader goroutine hands each frame to the
// subscriber of its id.
type socket struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	done chan struct{}
	err  error // why the reader stopped; set before done is closed
	// said is the host's closing frame when it closed the connection for
	// a while (shutting_down, timeout, too_slow); set before done.
	said *Error
}

// frame is one frame of the host as read, with the fields that route it.
type frame struct {
	Type string  `json:"type"`
	ID   string  `json:"id"`
	Seq  *uint64 `json:"seq"`
	raw  []byte
}

// sub is the frames of one id waiting for their reader, unbounded so that
// a slow callback of one call holds up no other call.
type sub struct {
	mu   sync.Mutex
	q    []frame
	wake chan struct{}
}

func (s *sub) push(f frame) {
	s.mu.Lock()
	s.q = append(s.q, f)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sub) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q) > 0
}

func (s *sub) take() []frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.q
	s.q = nil
	return q
}

// errDropped says the websocket ended; a caller may redial.
var errDropped = errors.New("the connection to the host dropped")

// Dial opens a websocket to the host at addr and signs in. addr is the
// host's base URL (http://127.0.0.1:8080, https://…), its websocket URL
// (ws://…/api/v1/ws), or host:port.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	wsURL, base, err := urls(addr)
	if err != nil {
		return nil, err
	}
	if opts.Client == "" {
		opts.Client = "toolhost-go-client"
	}
	c := &Conn{opts: opts, ws: wsURL, base: base, subs: map[string]*sub{}}
	s, hello, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	c.Hello = hello
	c.cur = s
	go c.read(s)
	return c, nil
}

// urls gives the websocket URL and the HTTP base URL of addr.
func urls(addr string) (wsURL, base string, err error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", "", fmt.Errorf("%q is not the address of a host (give http://HOST:PORT): %w", addr, err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "http"
	case "https", "wss":
		u.Scheme = "https"
	default:
		return "", "", fmt.Errorf("%q is not the address of a host: the scheme must be http, https, ws or wss", addr)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/api/v1/ws"), "/")
	u.RawQuery, u.Fragment = "", ""
	base = u.String()
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	return u.String() + "/api/v1/ws", base, nil
}

func (c *Conn) header() http.Header {
	h := http.Header{}
	for k, v := range c.opts.Header {
		h[k] = append([]string(nil), v...)
	}
	if c.opts.Token != "" {
		h.Set("Authorization", "Bearer "+c.opts.Token)
	}
	return h
}

// open dials a websocket and says hello.
func (c *Conn) open(ctx context.Context) (*socket, HelloReply, error) {
	d := c.opts.Dialer
	if d == nil {
		d = websocket.DefaultDialer
	}
	h := c.header()
	if c.opts.Origin != "" {
		h.Set("Origin", c.opts.Origin)
	}
	ws, resp, err := d.DialContext(ctx, c.ws, h)
	if err != nil {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				return nil, HelloReply{}, &Error{Code: wire.CodeUnauthorized, Message: fmt.Sprintf("the host at %s refused the token: give a good one", c.base)}
			case http.StatusForbidden:
				return nil, HelloReply{}, &Error{Code: wire.CodeForbidden, Message: fmt.Sprintf("the host at %s refused the connection (%s)", c.base, resp.Status)}
			}
		}
		return nil, HelloReply{}, fmt.Errorf("the websocket at %s can't be opened: %w", c.ws, err)
	}
	s := &socket{ws: ws, done: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { _ = ws.NetConn().Close() })
	defer stop()
	hello := Message{Type: wire.TypeHello, ID: "hello", Client: c.opts.Client, Protocol: ProtocolVersion, Token: c.opts.Token}
	if c.header().Get("Authorization") != "" {
		hello.Token = "" // the header signed in already
	}
	if err := ws.WriteJSON(hello); err != nil {
		ws.Close()
		return nil, HelloReply{}, fmt.Errorf("the host at %s can't be greeted: %w", c.base, err)
	}
	_, data, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		if ctx.Err() != nil {
			return nil, HelloReply{}, fmt.Errorf("the host at %s did not answer hello in time: %w", c.base, ctx.Err())
		}
		return nil, HelloReply{}, fmt.Errorf("the host at %s did not answer hello: %w", c.base, err)
	}
	var reply struct {
		HelloReply
		Error *Error `json:"error"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		ws.Close()
		return nil, HelloReply{}, fmt.Errorf("the host at %s answered hello with a frame that isn't JSON: %w", c.base, err)
	}
	switch {
	case reply.Error != nil:
		ws.Close()
		return nil, HelloReply{}, reply.Error
	case reply.Type != wire.TypeHello || reply.Protocol != ProtocolVersion:
		ws.Close()
		return nil, HelloReply{}, fmt.Errorf("the host at %s speaks protocol %d, not %d as this client does", c.base, reply.Protocol, ProtocolVersion)
	case reply.AuthRequired && reply.Principal == "":
		ws.Close()
		return nil, HelloReply{}, &Error{Code: wire.CodeUnauthorized, Message: fmt.Sprintf("the host at %s needs a token: give one", c.base)}
	}
	return s, reply.HelloReply, nil
}

// read hands each frame of s to the subscriber of its id, until s ends.
func (c *Conn) read(s *socket) {
	defer close(s.done)
	for {
		_, data, err := s.ws.ReadMessage()
		if err != nil {
			if s.said != nil {
				err = s.said // why the host closed it says more than the close
			}
			s.err = fmt.Errorf("%w: %w", errDropped, err)
			c.wakeAll()
			return
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			continue // not a frame of the protocol: nothing to route it by
		}
		f.raw = data
		if f.Type == wire.TypeClosing {
			var cl Closing
			_ = json.Unmarshal(data, &cl)
			e := cl.Error
			if !closesForGood(e.Code) {
				// A client gone silent or too slow, or a host stopping: a
				// new connection may do better, and calls re-attach.
				s.said = &e
				continue
			}
			c.mu.Lock()
			if c.closed == nil {
				c.closed = &e
			}
			c.mu.Unlock()
			continue // the close frame follows, and wakes everyone
		}
		c.mu.Lock()
		sb := c.subs[f.ID]
		c.mu.Unlock()
		if sb != nil {
			sb.push(f)
		}
	}
}

// closesForGood says whether the host's closing of a connection, with this
// code, ends the Conn: the token no longer signs in, or the client broke
// the protocol. After any other (timeout, too_slow, shutting_down) the Conn
// dials again.
func closesForGood(code string) bool {
	return code != wire.CodeTimeout && code != wire.CodeTooSlow && code != wire.CodeShuttingDown
}

func (c *Conn) wakeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sb := range c.subs {
		select {
		case sb.wake <- struct{}{}:
		default:
		}
	}
}

// socket gives the current websocket, opening a new one if the last one
// dropped (dead is the one the caller saw drop, or nil).
func (c *Conn) socket(ctx context.Context, dead *socket) (*socket, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != nil {
		return nil, c.closed
	}
	if c.cur != nil && c.cur != dead {
		select {
		case <-c.cur.done:
		default:
			return c.cur, nil
		}
	}
	s, _, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	if c.cur != nil {
		_ = c.cur.ws.Close()
	}
	c.cur = s
	go c.read(s)
	return s, nil
}

func (s *socket) send(ctx context.Context, m Message) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.ws.SetWriteDeadline(dl)
	} else {
		_ = s.ws.SetWriteDeadline(time.Now().Add(75 * time.Second))
	}
	if err := s.ws.WriteJSON(m); err != nil {
		_ = s.ws.NetConn().Close() // the reader sees it and ends the socket
		return fmt.Errorf("%w: %w", errDropped, err)
	}
	return nil
}

func (c *Conn) subscribe(id string) *sub {
	sb := &sub{wake: make(chan struct{}, 1)}
	c.mu.Lock()
	c.subs[id] = sb
	c.mu.Unlock()
	return sb
}

func (c *Conn) unsubscribe(id string) {
	c.mu.Lock()
	delete(c.subs, id)
	c.mu.Unlock()
}

func (c *Conn) newID(prefix string) string {
	return prefix + strconv.FormatUint(c.nextID.Add(1), 10)
}

// Close closes the connection; runs it started go on (cancel them first
// to stop them).
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed == nil {
		c.closed = errors.New("the connection was closed")
	}
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	s.wmu.Lock()
	_ = s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	s.wmu.Unlock()
	return s.ws.Close()
}

// request sends m and waits for the first frame with its id that done
// accepts.
func (c *Conn) request(ctx context.Context, m Message, done func(frame) (bool, error)) error {
	sb := c.subscribe(m.ID)
	defer c.unsubscribe(m.ID)
	s, err := c.socket(ctx, nil)
	if err != nil {
		return err
	}
	if err := s.send(ctx, m); err != nil {
		return err
	}
	for {
		for _, f := range sb.take() {
			if f.Type == TypeError && f.Seq == nil {
				var ef ErrorFrame
				if err := json.Unmarshal(f.raw, &ef); err != nil {
					return fmt.Errorf("the host sent an error that can't be read: %w", err)
				}
				return &ef.Error
			}
			if ok, err := done(f); ok || err != nil {
				return err
			}
		}
		select {
		case <-sb.wake:
		case <-s.done:
			if !sb.pending() {
				return c.ended(s)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ended says why socket s is over: the host closed the Conn for good,
// or the connection dropped.
func (c *Conn) ended(s *socket) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != nil {
		return c.closed
	}
	return s.err
}

// ListTools lists the tools the host serves, as function specs.
func (c *Conn) ListTools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	err := c.request(ctx, Message{Type: wire.TypeListTools, ID: c.newID("t")}, func(f frame) (bool, error) {
		if f.Type != wire.TypeTools {
			return false, nil
		}
		var r ToolsReply
		if err := json.Unmarshal(f.raw, &r); err != nil {
			return true, fmt.Errorf("the host's tool list can't be read: %w", err)
		}
		tools = r.Tools
		return true, nil
	})
	return tools, err
}

// ToolSpecs lists the tools the host serves in a format (FormatOpenAI,
// FormatAnthropic, FormatMCP; "" or FormatToolhost for the default) and,
// with FormatOpenAI, in OpenAI's strict mode. Each of its Tools is a
// tool's spec to hand to that provider as it is. A format the host does
// not know gives an *Error with code "bad_frame" saying which it knows.
func (c *Conn) ToolSpecs(ctx context.Context, format string, strict bool) (ToolSpecs, error) {
	var specs ToolSpecs
	err := c.request(ctx, Message{Type: wire.TypeListTools, ID: c.newID("t"), Format: format, Strict: strict}, func(f frame) (bool, error) {
		if f.Type != wire.TypeTools {
			return false, nil
		}
		if err := json.Unmarshal(f.raw, &specs); err != nil {
			return true, fmt.Errorf("the host's tool list can't be read: %w", err)
		}
		return true, nil
	})
	return specs, err
}

// Approve decides a run's pending approval (the Approval of an
// approval_required event): decision is "approve" or "decline". It returns
// once the host took it. An approval decided already gives an *Error with
// code "already_decided"; one the caller may not decide, "forbidden" or
// "not_found". It may be called from a Call's onEvent.
func (c *Conn) Approve(ctx context.Context, approval, decision string) (Decided, error) {
	var d Decided
	err := c.request(ctx, Message{Type: wire.TypeApprove, ID: c.newID("a"), Approval: approval, Decision: decision}, func(f frame) (bool, error) {
		if f.Type != wire.TypeDecided {
			return false, nil
		}
		if err := json.Unmarshal(f.raw, &d); err != nil {
			return true, fmt.Errorf("the host's answer to approve can't be read: %w", err)
		}
		return true, nil
	})
	return d, err
}

// Ping checks the host answers.
func (c *Conn) Ping(ctx context.Context) error {
	return c.request(ctx, Message{Type: wire.TypePing, ID: c.newID("p")}, func(f frame) (bool, error) { return f.Type == wire.TypePong, nil })
}

// Cancel stops a run (of the caller's, or any for an admin). It returns
// once the host has acted on it; the run then ends with an error event
// whose code is "cancelled" (a run that had ended stays as it was). An
// unknown run gives an *Error with code "unknown_run", someone else's
// run one with "forbidden".
func (c *Conn) Cancel(ctx context.Context, run string) error {
	id := c.newID("x")
	// The host acts on frames in order and has no reply to cancel but
	// its errors: a ping with the same id marks the end.
	sb := c.subscribe(id)
	defer c.unsubscribe(id)
	s, err := c.socket(ctx, nil)
	if err != nil {
		return err
	}
	if err := s.send(ctx, Message{Type: wire.TypeCancel, ID: id, Run: run}); err != nil {
		return err
	}
	if err := s.send(ctx, Message{Type: wire.TypePing, ID: id}); err != nil {
		return err
	}
	for {
		for _, f := range sb.take() {
			switch f.Type {
			case wire.TypePong:
				return nil
			case TypeError:
				var ef ErrorFrame
				_ = json.Unmarshal(f.raw, &ef)
				return &ef.Error
			}
		}
		select {
		case <-sb.wake:
		case <-s.done:
			if !sb.pending() {
				return c.ended(s)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// CallOptions are call's optional fields.
type CallOptions struct {
	// ID is the call's id on the wire, which its events carry; "" picks
	// one. Ids of calls going on at once on one Conn must differ.
	ID string
	// Session is the conversation the call belongs to: its conversation
	// sandbox for run_python and run_bash, and what its approvals' taint
	// is kept by.
	Session string
	// IdempotencyKey names the call so that a retry runs it once: the same
	// key and call from the same token within the host's keep_minutes
	// follows the first run (or gets its recorded outcome), even across a
	// host restart; the same key for another call is an
	// idempotency_conflict error.
	IdempotencyKey string
}

// Call runs a tool with args (a JSON object: json.RawMessage, a map or a
// struct; nil for none) and calls onEvent (if not nil) with each of the
// run's events in seq order, each once, from started to the terminal
// one. It returns the run's result, or an *Error: the run's error (code
// "cancelled", "timeout", a kind's code …), the call refused before it
// ran ("unknown_tool", "bad_args", "forbidden" …), or the host closing the
// connection ("token_revoked", "token_downgraded"). After a dropped
// connection, or when the host says the client fell behind, it picks the
// run up again from the last event it got.
//
// onEvent runs on the call's own goroutine: a slow one holds up this call
// only. When ctx ends first, Call cancels the run and returns ctx's error.
func (c *Conn) Call(ctx context.Context, tool string, args any, onEvent func(Event)) (json.RawMessage, error) {
	return c.CallWith(ctx, tool, args, CallOptions{}, onEvent)
}

// CallWith is Call with the call's optional fields.
func (c *Conn) CallWith(ctx context.Context, tool string, args any, opts CallOptions, onEvent func(Event)) (json.RawMessage, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	id := opts.ID
	if id == "" {
		id = c.newID("c")
	}
	return c.follow(ctx, Message{Type: wire.TypeCall, ID: id, Tool: tool, Args: raw, Session: opts.Session, IdempotencyKey: opts.IdempotencyKey}, onEvent)
}

// Attach follows a run from after seq afterSeq (-1 for all of it): it
// replays the events the host kept, goes on live, and returns as Call
// does. When ctx ends first, Attach returns ctx's error and the run goes
// on.
func (c *Conn) Attach(ctx context.Context, run string, afterSeq int64, onEvent func(Event)) (json.RawMessage, error) {
	after := afterSeq
	return c.follow(ctx, Message{Type: wire.TypeAttach, ID: c.newID("a"), Run: run, AfterSeq: &after}, onEvent)
}

func encodeArgs(args any) (json.RawMessage, error) {
	switch a := args.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return a, nil
	case []byte:
		return json.RawMessage(a), nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("the arguments can't be made JSON: %w", err)
	}
	return b, nil
}

// follow sends first (a call or an attach) and follows its run to the end.
func (c *Conn) follow(ctx context.Context, first Message, onEvent func(Event)) (json.RawMessage, error) {
	id := first.ID
	sb := c.subscribe(id)
	defer c.unsubscribe(id)
	f := c.newFollower(first, sb, onEvent)
	msg := first
	for {
		// (Re)connect and send the call, or the attach that picks it up.
		err := f.connect(ctx, msg)
		if err != nil && !errors.Is(err, errDropped) {
			return nil, err
		}
		if err == nil {
			res, done, rerr := f.read(ctx)
			if done {
				return res, rerr
			}
			err = rerr
		}
		if !errors.Is(err, errDropped) {
			return nil, err // the host closed the connection for good
		}
		if err := f.waitToRedial(ctx, err); err != nil {
			return nil, err
		}
		after := f.last
		msg = Message{Type: wire.TypeAttach, ID: id, Run: f.run, AfterSeq: &after}
	}
}

// follower is where follow is in a run: the run, the last event it had,
// the connection it reads and how many times it has reopened it.
type follower struct {
	c       *Conn
	first   Message
	sb      *sub
	onEvent func(Event)

	run        string
	last       int64
	s          *socket
	redials    int
	maxRedials int
	wait       time.Duration
	// stopped is the host's word that it was stopping, if it closed a
	// connection of this call saying so.
	stopped *Error
}

// newFollower is where follow starts: the run and the event first names,
// with the redials of c's options.
func (c *Conn) newFollower(first Message, sb *sub, onEvent func(Event)) *follower {
	f := &follower{c: c, first: first, sb: sb, onEvent: onEvent, run: first.Run, last: -1}
	if first.AfterSeq != nil {
		f.last = *first.AfterSeq
	}
	f.maxRedials = c.opts.Redials
	if f.maxRedials == 0 {
		f.maxRedials = 5
	}
	f.wait = c.opts.RedialWait
	if f.wait <= 0 {
		f.wait = 500 * time.Millisecond
	}
	return f
}

// connect (re)opens the connection and sends msg on it. A connection that
// can't be reopened after a redial is an errDropped, to try again, unless
// the host refused it.
func (f *follower) connect(ctx context.Context, msg Message) error {
	next, err := f.c.socket(ctx, f.s)
	if err == nil {
		f.s = next
		return f.s.send(ctx, msg)
	}
	if refused := (*Error)(nil); f.redials > 0 && ctx.Err() == nil && !errors.As(err, &refused) {
		// Reopening failed (the host may be restarting): try again.
		return fmt.Errorf("%w: %w", errDropped, err)
	}
	return err
}

// read handles the frames of the run that come on the connection until
// the call is done (its result, or its error, with done true) or the
// connection ends (its error, with done false). A call whose ctx ends is
// done, and its run is cancelled.
func (f *follower) read(ctx context.Context) (res json.RawMessage, done bool, err error) {
	for {
		for _, fr := range f.sb.take() {
			if r, over, herr := f.handle(ctx, fr); over {
				return r, true, herr
			}
		}
		select {
		case <-f.sb.wake:
		case <-f.s.done:
			if !f.sb.pending() {
				if err := f.c.ended(f.s); err != nil {
					return nil, false, err
				}
			}
		case <-ctx.Done():
			if f.first.Type == wire.TypeCall && f.run != "" {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = f.c.Cancel(cctx, f.run)
				cancel()
			}
			return nil, true, ctx.Err()
		}
	}
}

// handle takes one frame of the run: an event (passed to onEvent once,
// the last one ending the call), the host's error (ending it), or word
// that the connection fell behind (asking for the events missed).
func (f *follower) handle(ctx context.Context, fr frame) (res json.RawMessage, done bool, err error) {
	switch {
	case fr.Seq != nil:
		var e Event
		if err := json.Unmarshal(fr.raw, &e); err != nil {
			return nil, true, fmt.Errorf("the host sent an event that can't be read: %w", err)
		}
		if int64(e.Seq) <= f.last {
			return nil, false, nil // had it already
		}
		f.last, f.run, f.redials = int64(e.Seq), e.Run, 0
		if f.onEvent != nil {
			f.onEvent(e)
		}
		if e.Terminal() {
			if e.Error != nil {
				return nil, true, e.Error
			}
			return e.Result, true, nil
		}
	case fr.Type == TypeError:
		var ef ErrorFrame
		if err := json.Unmarshal(fr.raw, &ef); err != nil {
			return nil, true, fmt.Errorf("the host sent an error that can't be read: %w", err)
		}
		return nil, true, &ef.Error
	case fr.Type == wire.TypeBehind:
		var b Behind
		_ = json.Unmarshal(fr.raw, &b)
		if b.Run != "" {
			f.run = b.Run
		}
		after := f.last
		if err := f.s.send(ctx, Message{Type: wire.TypeAttach, ID: f.first.ID, Run: f.run, AfterSeq: &after}); err != nil && !errors.Is(err, errDropped) {
			return nil, true, err
		}
	}
	return nil, false, nil
}

// waitToRedial decides, after the connection dropped with err, whether the
// run is worth reopening it for, and waits before the redial, longer each
// time; it returns the call's error when it is not.
func (f *follower) waitToRedial(ctx context.Context, err error) error {
	if said := (*Error)(nil); errors.As(err, &said) && said.Code == wire.CodeShuttingDown {
		f.stopped = said
	}
	if f.run == "" {
		return fmt.Errorf("the connection ended before the run started; the call may or may not have run: %w", err)
	}
	if (f.maxRedials < 0 || f.redials >= f.maxRedials) && f.stopped != nil {
		return fmt.Errorf("the host stopped before the run %s ended, and could not be reached again (%w): %w", f.run, err, f.stopped)
	}
	if f.maxRedials < 0 || f.redials >= f.maxRedials {
		return fmt.Errorf("the connection ended before the run did, and could not be opened again; the run %s goes on: %w", f.run, err)
	}
	f.redials++
	select {
	case <-time.After(time.Duration(f.redials) * f.wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
