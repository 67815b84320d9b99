package runs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/host/tools"
)

// This file is taint: which conversations read outside text, text that
// someone other than the caller and the host's operator wrote (a web
// page, a server's error, a package, an uploaded file) and that may hold
// instructions aimed at the model. A tainted conversation's change calls
// ask a person first even when [approvals] change is "auto", and its
// sandbox tools ask while its sandbox has a network (approvals.go).
//
// The sources (docs/protocol.md, Taint):
//   - a run of a tool whose kind says its runs bring outside text
//     (sdk.OutsideTextAlways in Describe; a plugin built before kinds said
//     counts as one), whether it succeeded or failed: an error carries the
//     server's words too;
//   - any run in a session whose sandbox reaches the network ("web" or
//     "packages": anyone can publish a package);
//   - a file uploaded into a session, unless [approvals] taint_uploads is
//     false.
//
// A conversation is (principal, session); the calls made in no session
// are one conversation per principal, as the host can't tell them apart.
// Taint is kept in the host's store (TaintStore), so a restart forgets
// none: a session's taint lasts as long as the session (deleting it, or
// its expiry, clears it). Where no session is kept behind the name (the
// calls in no session, or a session that never had a sandbox) the taint
// lasts NoSessionTaintKeep, or NamedTaintKeep, after the conversation
// last read outside text.

// NoSessionTaintKeep is how long the taint of a principal's calls in no
// session lasts after they last read outside text. Those calls share one
// conversation per principal, so their taint is everyone's of that token:
// an hour covers a model's turn of calls without making every later
// change call ask.
const NoSessionTaintKeep = time.Hour

// NamedTaintKeep is how long the taint of a named session that the store
// keeps no session for (its tools never ran in a sandbox) lasts after it
// last read outside text: longer than any conversation goes on.
const NamedTaintKeep = 7 * 24 * time.Hour

// forgetTaintEvery is how often a taint also removes the taint that ran
// out (at most).
const forgetTaintEvery = 10 * time.Minute

// TaintStore keeps which conversations read outside text; the host's is
// its store (package sessions). Without one, the dispatcher keeps taint in
// memory.
type TaintStore interface {
	// Taint records that principal's session read outside text at now;
	// a second taint keeps the first why.
	Taint(ctx context.Context, principal, session, why string, now time.Time) error
	// Tainted says why principal's session is tainted ("" when it is
	// not): a session the store keeps until it is deleted, another
	// conversation when it read outside text at or after since.
	Tainted(ctx context.Context, principal, session string, since time.Time) (string, error)
	// ForgetTaint removes the taint of conversations with no session
	// behind them that last read outside text before the times given.
	ForgetTaint(ctx context.Context, noSessionBefore, namedBefore time.Time) error
}

// SetTaintStore sets where taint is kept (the host's store; nil keeps it
// in memory) and the clock it is counted by (the store's, which is the
// database's on PostgreSQL; nil is the approvals' clock).
func (d *Dispatcher) SetTaintStore(s TaintStore, now func() time.Time) {
	a := d.approvals()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.store, a.taintNow = s, now
}

// taintClock returns the clock taint is counted by. Called with a.mu held;
// read it after letting go: the store's clock may ask the database.
func (a *approvals) taintClock() func() time.Time {
	if a.taintNow != nil {
		return a.taintNow
	}
	return a.clock.Now
}

// memoryTaint is a TaintStore in memory: a host with no store, and tests.
// It keeps no sessions, so every conversation's taint lasts its keep.
type memoryTaint struct {
	mu  sync.Mutex
	all map[string]memTaint
}

type memTaint struct {
	why string
	at  time.Time
}

func newMemoryTaint() *memoryTaint { return &memoryTaint{all: map[string]memTaint{}} }

func (m *memoryTaint) Taint(_ context.Context, principal, session, why string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := taintKey(principal, session)
	if old, ok := m.all[k]; ok {
		why = old.why
		if old.at.After(now) {
			now = old.at
		}
	}
	m.all[k] = memTaint{why: why, at: now}
	return nil
}

func (m *memoryTaint) Tainted(_ context.Context, principal, session string, since time.Time) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.all[taintKey(principal, session)]
	if !ok || t.at.Before(since) {
		return "", nil
	}
	return t.why, nil
}

func (m *memoryTaint) ForgetTaint(_ context.Context, noSessionBefore, namedBefore time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, t := range m.all {
		before := namedBefore
		if strings.HasSuffix(k, "\x00") {
			before = noSessionBefore
		}
		if t.at.Before(before) {
			delete(m.all, k)
		}
	}
	return nil
}

// taintKey names a conversation: a session id is the caller's own, so two
// principals' sessions of one name are two conversations, and one's
// reading taints only its own.
func taintKey(principal, session string) string { return principal + "\x00" + session }

// taintStore is where taint is kept. Called with a.mu held.
func (a *approvals) taintStore() TaintStore {
	if a.store == nil {
		a.store = newMemoryTaint()
	}
	return a.store
}

// since is the oldest outside read that still taints a conversation with
// no session kept behind it.
func taintSince(session string, now time.Time) time.Time {
	if session == "" {
		return now.Add(-NoSessionTaintKeep)
	}
	return now.Add(-NamedTaintKeep)
}

// tainted says why principal's session is tainted, "" when it is not. A
// taint that can't be read counts as one: the call then asks.
func (a *approvals) tainted(ctx context.Context, principal, session string) string {
	a.mu.Lock()
	st, clock := a.taintStore(), a.taintClock()
	a.mu.Unlock()
	now := clock()
	why, err := st.Tainted(ctx, principal, session, taintSince(session, now))
	if err != nil {
		return fmt.Sprintf("whether it did can't be read, so the host takes it that it did: %v", err)
	}
	return why
}

// taint records that principal's session read outside text (why). A
// taint the store can't keep is logged; the dispatcher's memory keeps it
// for as long as the host runs.
func (d *Dispatcher) taint(ctx context.Context, principal, session, why string) {
	a := d.approvals()
	a.mu.Lock()
	st, clock := a.taintStore(), a.taintClock()
	a.mu.Unlock()
	now := clock()
	ctx = context.WithoutCancel(ctx) // see noteOutside
	err := st.Taint(ctx, principal, session, why, now)
	if err == nil {
		a.mu.Lock()
		forget := now.Sub(a.forgotTaint) >= forgetTaintEvery
		if forget {
			a.forgotTaint = now
		}
		a.mu.Unlock()
		if !forget {
			return
		}
		if err := st.ForgetTaint(ctx, now.Add(-NoSessionTaintKeep), now.Add(-NamedTaintKeep)); err != nil {
			d.log.Warn("old taint could not be forgotten", "error", err)
		}
		return
	}
	d.log.Error("a conversation's taint could not be stored; it is kept in memory until the host stops", "principal", principal, "session", session, "error", err)
	a.mu.Lock()
	if a.fallback == nil {
		a.fallback = newMemoryTaint()
	}
	fb := a.fallback
	a.mu.Unlock()
	_ = fb.Taint(ctx, principal, session, why, now)
}

// noteOutside taints the run's conversation when what it read was outside
// text: its kind says its runs bring some, or its session's sandbox
// reaches the network. It is called once the plugin was invoked, whatever
// the outcome: an error, or a cut-off run's output, carries the same text.
func (d *Dispatcher) noteOutside(ctx context.Context, run *Run, tool *tools.Tool, failed bool) {
	// A run cut off (cancelled, timed out) read what it read: its
	// session's network is looked up all the same.
	ctx = context.WithoutCancel(ctx)
	a := d.approvals()
	a.mu.Lock()
	p := a.policy
	a.mu.Unlock()
	what := "answer"
	if failed {
		what = "error"
	}
	why := ""
	switch {
	case p.OutsideText != nil && p.OutsideText(tool):
		why = fmt.Sprintf("%s's %s", tool.Name, what)
	case run.Session != "" && p.SessionNetwork != nil:
		switch network := p.SessionNetwork(ctx, run.Principal, run.Session); network {
		case "web", "packages":
			why = fmt.Sprintf("%s's output, from a session with the %s network", tool.Name, network)
		}
	}
	if why != "" {
		d.taint(ctx, run.Principal, run.Session, why)
	}
}

// NoteUpload taints principal's session for a file uploaded into it
// (path), unless [approvals] taint_uploads is false. Call it before the
// file is written: an upload that fails halfway may have left its text.
func (d *Dispatcher) NoteUpload(ctx context.Context, principal, session, path string) {
	if d == nil {
		return
	}
	a := d.approvals()
	a.mu.Lock()
	on := a.policy.TaintUploads
	a.mu.Unlock()
	if on {
		d.taint(ctx, principal, session, fmt.Sprintf("the file %s uploaded into it", path))
	}
}

// Tainted says why the change calls of principal's session ask: what
// outside text it read; "" when it read none.
func (d *Dispatcher) Tainted(principal, session string) string {
	return d.approvals().taintedAll(context.Background(), principal, session)
}

// taintedAll is tainted, with the taint kept in memory when the store
// failed.
func (a *approvals) taintedAll(ctx context.Context, principal, session string) string {
	if why := a.tainted(ctx, principal, session); why != "" {
		return why
	}
	a.mu.Lock()
	fb, clock := a.fallback, a.taintClock()
	a.mu.Unlock()
	if fb == nil {
		return ""
	}
	now := clock()
	why, _ := fb.Tainted(ctx, principal, session, taintSince(session, now))
	return why
}
