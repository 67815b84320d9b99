package api

import (
	"fmt"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/runs"
)

// handle acts on one frame; it returns false when the connection must
// close (the writer closes it after the last frame).
func (c *wsConn) handle(data []byte) bool {
	if c.closing.Load() {
		return true // the connection is closing: nothing more is done for it
	}
	m, bad := decodeFrame(data)
	if !c.signedIn.Load() && (bad != nil || m.Type != wire.TypeHello) {
		why := "sign in first: send {\"type\":\"hello\",\"token\":\"…\"} (or an Authorization: Bearer header)"
		c.sendError(m.ID, "", wire.CodeUnauthorized, why)
		c.closeWith(wire.Error{Code: wire.CodeUnauthorized, Message: why})
		return false
	}
	if bad != nil {
		c.send(bad)
		return true
	}
	switch m.Type {
	case wire.TypeHello:
		return c.hello(m)
	case wire.TypePing:
		c.send(wire.Pong{Type: wire.TypePong, ID: m.ID})
	case wire.TypeListTools:
		c.listTools(m)
	case wire.TypeCall:
		c.call(m)
	case wire.TypeCancel:
		c.cancelRun(m)
	case wire.TypeAttach:
		c.attach(m)
	case wire.TypeApprove:
		c.decide(m)
	}
	return true
}

func (c *wsConn) hello(m wire.Message) bool {
	if m.Protocol != 0 && m.Protocol != ProtocolVersion {
		c.sendError(m.ID, "", wire.CodeUnsupportedProtocol, fmt.Sprintf("this host speaks protocol %d, not %d", ProtocolVersion, m.Protocol))
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
			why := "the token is not one this host knows"
			c.sendError(m.ID, "", wire.CodeUnauthorized, why)
			c.closeWith(wire.Error{Code: wire.CodeUnauthorized, Message: why})
			return false
		}
	}
	who := c.who()
	if c.signedIn.Load() {
		c.s.opts.Logger.Debug("websocket client said hello", "principal", who.Name, "role", who.Role, "client", m.Client, "peer", c.peer)
	}
	c.send(wire.HelloReply{
		Type: wire.TypeHello, ID: m.ID, Protocol: ProtocolVersion, Server: "toolhost", Version: c.s.opts.Version,
		AuthRequired: c.s.tokens.Load().Required(), Principal: who.Name, Role: who.Role,
	})
	return true
}

func (c *wsConn) call(m wire.Message) {
	who := c.who()
	if !who.CanCall() {
		c.sendError(m.ID, "", wire.CodeForbidden, fmt.Sprintf("%s is a %s and may not run tools", who.Name, who.Role))
		return
	}
	c.mu.Lock()
	if prev, busy := c.calls[m.ID]; busy && !prev.Done() {
		c.mu.Unlock()
		c.sendError(m.ID, "", wire.CodeBadFrame, fmt.Sprintf("the id %q is already used by a run that is going on", m.ID))
		return
	}
	c.mu.Unlock()
	run, err := c.s.opts.Dispatcher.Start(runs.Request{Tool: m.Tool, Args: m.Args, Principal: who.Name, Session: m.Session, IdempotencyKey: m.IdempotencyKey})
	if err != nil {
		we := wireError(err)
		c.sendError(m.ID, "", we.Code, we.Message)
		return
	}
	c.mu.Lock()
	c.calls[m.ID] = run
	c.mu.Unlock()
	c.startForward(m.ID, run, 0)
}

// forward sends a run's events from seq from on, live, until the run ends,
// the connection does, or the client falls too far behind (then it is
// told so). The run goes on whatever happens here.
func (c *wsConn) forward(id string, run *runs.Run, from uint64) {
	for {
		evs, err := run.Next(c.ctx, from)
		if err != nil && c.ctx.Err() == nil {
			c.sendError(id, run.ID, wire.CodeUnknownRun, "the run's events can no longer be read: "+err.Error())
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
			e.ID = id // this client's copy carries its call's id
			b := c.encode(e)
			if b == nil {
				return
			}
			last := int64(from) - 1
			if !c.out.pushEvent(b, func() []byte {
				return c.encode(wire.Behind{Type: wire.TypeBehind, ID: id, Run: run.ID, LastSeq: last})
			}) {
				c.s.opts.Logger.Debug("a client fell behind a run", "run", run.ID, "principal", c.who().Name, "last_seq", last)
				return
			}
			from = e.Seq + 1
		}
	}
}

func (c *wsConn) cancelRun(m wire.Message) {
	run := c.findRun(m)
	if run == nil {
		c.sendError(m.ID, m.Run, wire.CodeUnknownRun, "cancel names no run of yours: give \"run\" (the run id) or the \"id\" of your call")
		return
	}
	if who := c.who(); !who.CanSee(run.Principal) || !who.CanCall() {
		c.sendError(m.ID, run.ID, wire.CodeForbidden, "you may cancel only runs you started")
		return
	}
	run.Cancel()
}

func (c *wsConn) findRun(m wire.Message) *runs.Run {
	if m.Run != "" {
		if r, ok := c.s.opts.Dispatcher.Find(c.ctx, m.Run); ok {
			return r
		}
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[m.ID]
}

func (c *wsConn) attach(m wire.Message) {
	run, ok := c.s.opts.Dispatcher.Find(c.ctx, m.Run)
	if !ok {
		c.sendError(m.ID, m.Run, wire.CodeUnknownRun, "there is no run with that id (runs are kept for a while after they end)")
		return
	}
	if !c.who().CanSee(run.Principal) {
		c.sendError(m.ID, m.Run, wire.CodeForbidden, "that run was started by someone else")
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
	c.startForward(m.ID, run, from)
}
