// Package runs starts tool runs and keeps each run's events: every event
// gets the next sequence number of its run, is kept in order, and can be
// read by any number of readers at their own pace, so a slow reader never
// slows the run or another reader, and a reader that comes back later
// reads what it missed.
package runs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client/wire"
)

// Event is one event of a run, as clients see it: the protocol's own
// type. A run keeps its events without an ID; each client's copy carries
// the id of that client's call.
type Event = wire.Event

// eventSize is roughly what an event holds in memory.
func eventSize(e Event) int {
	n := 96 + len(e.Type) + len(e.Run) + len(e.Tool) + len(e.Data) + len(e.Node) + len(e.Message) + len(e.Level) + len(e.Result) + len(e.Args) + len(e.Why) + len(e.Approval)
	if e.Error != nil {
		n += len(e.Error.Code) + len(e.Error.Message)
	}
	return n + contentSize(e.Content)
}

// ErrorBody is a run's error: a short code and a sentence.
type ErrorBody = wire.Error

// DefaultMemoryBytes is how much of a run's events stays in memory before
// the oldest move to the run's file.
const DefaultMemoryBytes = 1 << 20

// maxBatch bounds the events one read of the spill file returns.
const maxBatch = 1024

// Run is one call of a tool.
type Run struct {
	ID             string
	Tool           string
	Principal      string
	Session        string
	IdempotencyKey string
	Started        time.Time

	// kind is the kind of the run's tool: its plugin executes the run
	// (see ForKind). Set before the run is known to anyone.
	kind string
	// sandboxed is whether the run was charged as sandboxed code, whose
	// seconds its end records (charge). Set with kind.
	sandboxed bool
	// relayed says the run goes on on another host, and its events are
	// copies of that host's (relay.go). Set before the run is known.
	relayed bool

	cancel context.CancelCauseFunc

	// The run's place among its principal's runs (see Caller); guarded by
	// the dispatcher's mu.
	holds  bool // the run holds a place, its own or lent
	lender *Run // the run whose place it holds, if lent
	lentTo *Run // the nested run it lends its place to

	mu sync.Mutex
	n  uint64 // events appended
	// Events [0, spilled) are in the spill file, at offsets[seq] up to
	// offsets[seq+1]; events [spilled, n) are in mem.
	mem      []Event
	memBytes int
	spilled  uint64
	offsets  []int64
	file     *os.File
	spill    spillConfig
	spillErr error
	ended    time.Time
	changed  chan struct{} // closed and replaced on every append
}

// spillConfig says where a run's older events go once it holds too many.
type spillConfig struct {
	dir         *SpillDir // nil keeps everything in memory
	memoryBytes int
}

func newRun(id string, req Request, spill spillConfig, cancel context.CancelCauseFunc) *Run {
	r := &Run{
		ID: id, Tool: req.Tool, Principal: req.Principal, Session: req.Session, IdempotencyKey: req.IdempotencyKey,
		Started: time.Now(), cancel: cancel, spill: spill, changed: make(chan struct{}),
	}
	r.append(Event{Type: wire.TypeStarted, Tool: req.Tool})
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
	e.Seq = r.n
	r.n++
	r.mem = append(r.mem, e)
	r.memBytes += eventSize(e)
	if e.Terminal() {
		r.ended = time.Now()
	}
	if r.spill.dir != nil && r.spillErr == nil && r.memBytes > r.spill.memoryBytes {
		r.spillErr = r.spillOldest()
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// spillOldest moves the oldest events in memory to the run's file until
// half the memory budget is used; the newest event always stays, so live
// readers and Wait read memory. Called with mu held.
func (r *Run) spillOldest() error {
	if r.file == nil {
		f, err := r.spill.dir.create(r.spillName())
		if err != nil {
			return fmt.Errorf("the file for the output of run %s can't be made: %w", r.ID, err)
		}
		r.file = f
		r.offsets = []int64{0}
	}
	var buf bytes.Buffer
	end := r.offsets[len(r.offsets)-1]
	var offs []int64
	k := 0
	freed := 0
	for k < len(r.mem)-1 && r.memBytes-freed > r.spill.memoryBytes/2 {
		b, err := json.Marshal(r.mem[k])
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
		offs = append(offs, end+int64(buf.Len()))
		freed += eventSize(r.mem[k])
		k++
	}
	if k == 0 {
		return nil
	}
	if _, err := r.file.WriteAt(buf.Bytes(), end); err != nil {
		return fmt.Errorf("the output of run %s can't be written to %s: %w", r.ID, r.file.Name(), err)
	}
	r.offsets = append(r.offsets, offs...)
	r.spilled += uint64(k)
	r.mem = append([]Event(nil), r.mem[k:]...)
	r.memBytes -= freed
	return nil
}

// Cancel asks the run to stop; it ends with an error event.
func (r *Run) Cancel() { r.cancel(nil) }

// CancelBecause cancels the run, and its error says why: reason, in the
// user's words, instead of "the run was cancelled".
func (r *Run) CancelBecause(reason string) { r.cancel(cancelReason(reason)) }

// cancelReason is why a run was cancelled, as the cause of its context.
type cancelReason string

func (c cancelReason) Error() string { return string(c) }

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

// Len is the number of events the run has so far; the last one's seq is
// Len()-1.
func (r *Run) Len() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Spilled says how many of the run's events are kept on disk rather than
// in memory, and why spilling stopped if it did.
func (r *Run) Spilled() (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spilled, r.spillErr
}

// batch returns events with seq >= from that are there now, at most
// maxBatch of those on disk. Called with mu held; it unlocks mu.
func (r *Run) batch(from uint64) ([]Event, error) {
	if from >= r.spilled {
		out := append([]Event(nil), r.mem[from-r.spilled:]...)
		r.mu.Unlock()
		return out, nil
	}
	to := min(r.spilled, from+maxBatch)
	lo, hi, f := r.offsets[from], r.offsets[to], r.file
	r.mu.Unlock()
	buf := make([]byte, hi-lo)
	if _, err := f.ReadAt(buf, lo); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("the kept output of run %s can't be read: %w", r.ID, err)
	}
	out := make([]Event, 0, to-from)
	sc := bufio.NewScanner(bytes.NewReader(buf))
	sc.Buffer(make([]byte, 0, 64<<10), len(buf)+1)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("the kept output of run %s is damaged: %w", r.ID, err)
		}
		out = append(out, e)
	}
	if uint64(len(out)) != to-from {
		return nil, fmt.Errorf("the kept output of run %s is damaged: %d events read, %d expected", r.ID, len(out), to-from)
	}
	return out, nil
}

// Events returns the events with seq >= from that are there now, without
// waiting.
func (r *Run) Events(from uint64) ([]Event, error) {
	var out []Event
	for {
		r.mu.Lock()
		if from >= r.n {
			r.mu.Unlock()
			return out, nil
		}
		evs, err := r.batch(from)
		if err != nil {
			return out, err
		}
		out = append(out, evs...)
		from += uint64(len(evs))
	}
}

// Next waits until the run has events with seq >= from, or ctx ends, and
// returns some of them, in order. It returns nil with ctx's error when ctx
// ends first, and nil, nil when the run has ended and there is nothing
// more.
func (r *Run) Next(ctx context.Context, from uint64) ([]Event, error) {
	for {
		r.mu.Lock()
		if from < r.n {
			return r.batch(from)
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
			last := r.mem[len(r.mem)-1]
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

// Printed is everything the run wrote to stdout, and to stderr, so far.
func (r *Run) Printed() (stdout, stderr string, err error) {
	var o, e strings.Builder
	err = r.walk(func(ev Event) {
		switch ev.Type {
		case wire.TypeStdout:
			o.WriteString(ev.Data)
		case wire.TypeStderr:
			e.WriteString(ev.Data)
		}
	})
	return o.String(), e.String(), err
}

// Record is the run's record and output as GET /api/v1/runs/{id} gives
// it: who started it and when, what it printed and its last seq so far,
// its end once it has ended, and its events unless withEvents is false.
func (r *Run) Record(withEvents bool) (wire.RunRecord, error) {
	rec := wire.RunRecord{
		Run: r.ID, Tool: r.Tool, Principal: r.Principal, Session: r.Session, IdempotencyKey: r.IdempotencyKey,
		Started: r.Started.UTC(), LastSeq: -1,
	}
	// Read the end first: what is read after it is complete.
	ended := r.Ended()
	var o, e strings.Builder
	var last Event
	err := r.walk(func(ev Event) {
		switch ev.Type {
		case wire.TypeStdout:
			o.WriteString(ev.Data)
		case wire.TypeStderr:
			e.WriteString(ev.Data)
		}
		if withEvents {
			rec.Events = append(rec.Events, ev)
		}
		rec.LastSeq = int64(ev.Seq)
		last = ev
	})
	if err != nil {
		return rec, err
	}
	if withEvents && rec.Events == nil {
		rec.Events = []Event{}
	}
	rec.Stdout, rec.Stderr = o.String(), e.String()
	if !ended.IsZero() {
		rec.Done, rec.Ended = true, ended.UTC()
		rec.Result, rec.Content, rec.Error = last.Result, last.Content, last.Error
	}
	return rec, nil
}

// walk calls f with every event the run has now, in order, reading those
// on disk a batch at a time.
func (r *Run) walk(f func(Event)) error {
	from := uint64(0)
	for {
		r.mu.Lock()
		if from >= r.n {
			r.mu.Unlock()
			return nil
		}
		evs, err := r.batch(from)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			f(ev)
		}
		from += uint64(len(evs))
	}
}

// spillName is the name of the run's file in the spill folder.
func (r *Run) spillName() string { return r.ID + ".jsonl" }

// discard removes the run's file; the run must no longer be read.
func (r *Run) discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file != nil {
		_ = r.file.Close()
		r.spill.dir.remove(r.spillName())
		r.file = nil
	}
	if r.spilled > 0 && r.spillErr == nil {
		r.spillErr = errors.New("the run was forgotten")
	}
}
