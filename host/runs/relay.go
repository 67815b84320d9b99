package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/toolhost/toolhost/client/wire"
)

// Hosts sharing a store hold each conversation on one of them (its
// sandbox and files live there). A call in a conversation another host
// holds is relayed: the Router says which host, the call runs there, and
// this dispatcher keeps a relay run under the same id whose events are
// the other host's, copied as they come. Everything that reads runs (the
// websocket, plain HTTP, MCP, attach) reads a relay run as any other.
// A relay run holds no place and charges nothing here: the host that runs
// the call does both.

// Router says which host runs a call, and finds runs on other hosts.
type Router interface {
	// Route returns the host that runs req when another host holds its
	// conversation, nil when this host runs it, or why neither can (a
	// *wire.Error: session_unavailable, store_unavailable).
	Route(ctx context.Context, req Request) (Upstream, error)
	// Find returns the host running (or keeping) the run id when another
	// host has it, with the run's events from seq from on; nil when no
	// other host has it.
	Find(ctx context.Context, id string, from uint64) (Upstream, RunInfo, Stream, error)
}

// Upstream is another host, running calls for this one.
type Upstream interface {
	// Name is the host's id and address, for messages.
	Name() string
	// Start starts req there, and returns the run and its events from
	// the first on. A call the host refused returns its *wire.Error.
	Start(ctx context.Context, req Request) (RunInfo, Stream, error)
	// Follow returns the run's events from seq from on.
	Follow(ctx context.Context, id string, from uint64) (RunInfo, Stream, error)
	// Cancel cancels the run there, saying why.
	Cancel(ctx context.Context, id, reason string) error
}

// RunInfo is what another host says of a run it has.
type RunInfo struct {
	Run            string `json:"run"`
	Tool           string `json:"tool"`
	Principal      string `json:"principal"`
	Session        string `json:"session,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Len is how many events the run had when the host began to send
	// them.
	Len uint64 `json:"len"`
}

// Stream is a run's events as another host sends them, in order.
type Stream interface {
	// Next returns the next event; io.EOF once the run's end was sent.
	Next() (Event, error)
	Close() error
}

// relayRetries bounds how often a relay follows its run again after the
// other host's stream broke, relayWait apart, before it ends the run as
// interrupted: longer than a host's restart takes to refuse connections,
// shorter than its lease (an unreachable host is gone).
const (
	relayRetries = 5
	relayWait    = time.Second
)

// SetRouter makes the dispatcher relay calls in conversations other hosts
// hold; nil runs every call here.
func (d *Dispatcher) SetRouter(r Router) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.router = r
}

func (d *Dispatcher) routerNow() Router {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.router
}

// route starts req on the host holding its conversation when that is
// another host: the relay run, or the refusal; nil, nil when this host
// runs it.
func (d *Dispatcher) route(req Request) (*Run, error) {
	r := d.routerNow()
	if r == nil || req.Session == "" || req.Parent != "" || req.Forwarded {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	up, err := r.Route(ctx, req)
	cancel()
	if err != nil && req.IdempotencyKey != "" {
		// A retry of a keyed call is told what became of it, though its
		// conversation's host is gone.
		if run, ok, kerr := d.recordedKey(req); ok {
			return run, kerr
		}
	}
	if err != nil || up == nil {
		return nil, err
	}
	// The streams of the run's events live until its end, whatever
	// cancels it: its end (cancelled) comes through them.
	streams, endStreams := context.WithCancel(context.Background())
	info, st, err := up.Start(streams, req)
	if err != nil {
		endStreams()
		var we *wire.Error
		if errors.As(err, &we) {
			return nil, err
		}
		return nil, &wire.Error{Code: wire.CodeSessionUnavailable, Message: fmt.Sprintf(
			"the conversation %q is held by the host %s, which can't be reached now (%v); its files come back with that host: try again once it is back",
			req.Session, up.Name(), err)}
	}
	return d.relay(streams, endStreams, up, info, st), nil
}

// Find returns the run id: kept here, or, with a router, relayed from the
// other host that has it, with the events it had then. A run a router
// finds stays kept here as a relay.
func (d *Dispatcher) Find(ctx context.Context, id string) (*Run, bool) {
	if r, ok := d.Get(id); ok {
		return r, true
	}
	rt := d.routerNow()
	if rt == nil {
		return nil, false
	}
	streams, endStreams := context.WithCancel(context.Background())
	stopAsking := context.AfterFunc(ctx, endStreams)
	up, info, st, err := rt.Find(streams, id, 0)
	if !stopAsking() || err != nil || up == nil {
		endStreams()
		if err != nil {
			d.log.Debug("no host could be asked for a run", "run", id, "error", err)
		}
		return nil, false
	}
	run := d.relay(streams, endStreams, up, info, st)
	// What the other host had when asked is read here before the run is
	// given out: a record read now holds as much as it would there.
	for run.Len() < info.Len {
		if evs, err := run.Next(ctx, run.Len()); err != nil || evs == nil {
			break
		}
	}
	return run, true
}

// relay keeps a run whose events come from up's stream st (read under
// streams, ended by endStreams at the run's end), and copies them until
// its end. Cancelling the run cancels it there.
func (d *Dispatcher) relay(streams context.Context, endStreams context.CancelFunc, up Upstream, info RunInfo, st Stream) *Run {
	ctx, cancel := context.WithCancelCause(context.Background())
	run := &Run{
		ID: info.Run, Tool: info.Tool, Principal: info.Principal, Session: info.Session, IdempotencyKey: info.IdempotencyKey,
		Started: time.Now(), cancel: cancel, spill: d.spill, changed: make(chan struct{}), relayed: true,
	}
	d.mu.Lock()
	if kept, ok := d.runs[run.ID]; ok {
		// Found twice at once: the first relay serves both.
		d.mu.Unlock()
		cancel(nil)
		endStreams()
		_ = st.Close()
		return kept
	}
	d.runs[run.ID] = run
	d.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		reason := "cancelled by its caller"
		var why cancelReason
		if errors.As(context.Cause(ctx), &why) {
			reason = string(why)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		if err := up.Cancel(cctx, run.ID, reason); err != nil {
			d.log.Warn("a relayed run could not be cancelled on its host", "run", run.ID, "host", up.Name(), "error", err)
		}
	})
	go func() {
		defer endStreams()
		defer cancel(nil)
		defer stop()
		d.copyEvents(streams, run, up, st)
	}()
	return run
}

// copyEvents appends st's events to run until its end, following the run
// again when the stream breaks; when the other host can't be reached for
// relayRetries tries, the run ends interrupted.
func (d *Dispatcher) copyEvents(streams context.Context, run *Run, up Upstream, st Stream) {
	tries := 0
	for {
		e, err := st.Next()
		if err == nil {
			tries = 0
			if e.Seq != run.Len() {
				continue // one it has, after following again
			}
			run.append(e)
			if e.Terminal() {
				_ = st.Close()
				return
			}
			continue
		}
		_ = st.Close()
		why := err
		for {
			if errors.Is(why, io.EOF) {
				why = errors.New("the host ended the stream before the run's end")
			}
			var we *wire.Error
			if tries >= relayRetries || errors.As(why, &we) {
				msg := fmt.Sprintf("the host %s running this call went away before it ended (%v); it may have run in part: "+
					"check before calling again, or call again with the same idempotency key", up.Name(), why)
				d.log.Warn("a relayed run was cut off", "run", run.ID, "host", up.Name(), "error", why)
				run.append(Event{Type: wire.TypeError, Error: &ErrorBody{Code: wire.CodeInterrupted, Message: msg}})
				return
			}
			tries++
			time.Sleep(relayWait)
			_, st, err = up.Follow(streams, run.ID, run.Len())
			if err == nil {
				break
			}
			why = err
		}
	}
}
