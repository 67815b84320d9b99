// Package runs starts tool runs and keeps each run's events: every event
// gets the next sequence number of its run, is kept in order, and can be
// read by any number of readers at their own pace, so a slow reader never
// slows the run or another reader, and a reader that comes back later
// reads what it missed.
package runs

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// Event is one event of a run, as clients see it.
type Event struct {
	Type string `json:"type"` // started, stdout, stderr, progress, log, result, error
	Run  string `json:"run"`
	Seq  uint64 `json:"seq"`
	// Tool is set on started.
	Tool string `json:"tool,omitempty"`
	// Data is set on stdout and stderr: text as printed.
	Data string `json:"data,omitempty"`
	// Fraction and Message are set on progress (Message also on log).
	Fraction *float64 `json:"fraction,omitempty"`
	Message  string   `json:"message,omitempty"`
	Level    string   `json:"level,omitempty"`
	// Result is set on result.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is set on error.
	Error *ErrorBody `json:"error,omitempty"`
}

// Terminal says whether the event ends its run.
func (e Event) Terminal() bool { return e.Type == "result" || e.Type == "error" }

// ErrorBody is a run's error: a short code and a sentence.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Run is one call of a tool.
type Run struct {
	ID        string
	Tool      string
	Principal string
	Session   string
	Started   time.Time

	cancel context.CancelFunc

	mu      sync.Mutex
	events  []Event
	ended   time.Time
	changed chan struct{} // closed and replaced on every append
}

func newRun(id, tool, principal, session string, cancel context.CancelFunc) *Run {
	r := &Run{ID: id, Tool: tool, Principal: principal, Session: session, Started: time.Now(), cancel: cancel, changed: make(chan struct{})}
	r.append(Event{Type: "started", Tool: tool})
	return r
}

// append adds an event with the run's next seq. Events after the terminal
// one are dropped.
func (r *Run) append(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended.IsZero() {
		return
	}
	e.Run = r.ID
	e.Seq = uint64(len(r.events))
	r.events = append(r.events, e)
	if e.Terminal() {
		r.ended = time.Now()
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// Cancel asks the run to stop; it ends with an error event.
func (r *Run) Cancel() { r.cancel() }

// Done says whether the run has ended.
func (r *Run) Done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.ended.IsZero()
}

// Ended is when the run ended (zero while it runs).
func (r *Run) Ended() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// Events returns a copy of the events with seq >= from, without waiting.
func (r *Run) Events(from uint64) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from >= uint64(len(r.events)) {
		return nil
	}
	return append([]Event(nil), r.events[from:]...)
}

// Next waits until the run has events with seq >= from, or ctx ends, and
// returns them. It returns nil with ctx's error when ctx ends first, and
// nil, nil when the run has ended and there is nothing more.
func (r *Run) Next(ctx context.Context, from uint64) ([]Event, error) {
	for {
		r.mu.Lock()
		if from < uint64(len(r.events)) {
			out := append([]Event(nil), r.events[from:]...)
			r.mu.Unlock()
			return out, nil
		}
		if !r.ended.IsZero() {
			r.mu.Unlock()
			return nil, nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Wait blocks until the run ends or ctx does, and returns its last event.
func (r *Run) Wait(ctx context.Context) (Event, error) {
	for {
		r.mu.Lock()
		if !r.ended.IsZero() {
			last := r.events[len(r.events)-1]
			r.mu.Unlock()
			return last, nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Printed is everything the run wrote to stdout, and to stderr.
func (r *Run) Printed() (stdout, stderr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var o, e strings.Builder
	for _, ev := range r.events {
		switch ev.Type {
		case "stdout":
			o.WriteString(ev.Data)
		case "stderr":
			e.WriteString(ev.Data)
		}
	}
	return o.String(), e.String()
}
