package runs

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client/wire"
)

// ApprovalStore keeps the approvals, waiting and decided, for every host
// that shares it: an approval asked on one host is listed and decided on
// any, decided once, and the host whose run waits hears the decision. The
// host's is its store when [store] is PostgreSQL (package sessions);
// MemoryApprovals keeps them in memory, for one host.
//
// The times it is given (now, before) are the approvals' clock: the
// store's clock when it is shared, so that an approval expires at the same
// instant for every host.
type ApprovalStore interface {
	// Put records a waiting approval (its Decision "").
	Put(ctx context.Context, a Approval) error
	// Get returns an approval, waiting or decided.
	Get(ctx context.Context, id string) (Approval, bool, error)
	// Pending lists the approvals waiting at now (not expired), of every
	// host, oldest first.
	Pending(ctx context.Context, now time.Time) ([]Approval, error)
	// Decide records decision, by the decider named by, for an approval
	// still waiting, as one step: of any number of decisions at once, on
	// one host or several, one is recorded. One that comes at or after
	// the approval expires records "expired" instead. It returns the
	// approval as it then is, and whether this call's decision is the one
	// recorded; an approval there is not is not found (false, no error).
	Decide(ctx context.Context, id, decision, by string, now time.Time) (a Approval, decided bool, err error)
	// Watch returns a channel that gets the decision of the approval id
	// once it is decided, on any host, and stop, which ends the watch.
	Watch(id string) (decided <-chan string, stop func())
	// Forget removes the approvals that expired before before.
	Forget(ctx context.Context, before time.Time) error
}

// SortApprovals sorts approvals oldest first, as Pending lists them.
func SortApprovals(list []Approval) {
	slices.SortFunc(list, func(x, y Approval) int {
		if c := x.Asked.Compare(y.Asked); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
}

// MemoryApprovals is an ApprovalStore in memory: the approvals of one
// host.
type MemoryApprovals struct {
	mu       sync.Mutex
	all      map[string]*Approval
	watchers map[string][]chan string
}

// NewMemoryApprovals returns an empty MemoryApprovals.
func NewMemoryApprovals() *MemoryApprovals {
	return &MemoryApprovals{all: map[string]*Approval{}, watchers: map[string][]chan string{}}
}

// Put records a waiting approval.
func (m *MemoryApprovals) Put(_ context.Context, a Approval) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.all[a.ID] = &a
	return nil
}

// Get returns an approval.
func (m *MemoryApprovals) Get(_ context.Context, id string) (Approval, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.all[id]
	if !ok {
		return Approval{}, false, nil
	}
	return *a, true, nil
}

// Pending lists the approvals waiting at now, oldest first.
func (m *MemoryApprovals) Pending(_ context.Context, now time.Time) ([]Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Approval{}
	for _, a := range m.all {
		if a.Decision == "" && a.Expires.After(now) {
			out = append(out, *a)
		}
	}
	SortApprovals(out)
	return out, nil
}

// Decide records a decision for an approval still waiting.
func (m *MemoryApprovals) Decide(_ context.Context, id, decision, _ string, now time.Time) (Approval, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.all[id]
	if !ok {
		return Approval{}, false, nil
	}
	if a.Decision != "" {
		return *a, false, nil
	}
	a.Decision = decision
	if !a.Expires.After(now) {
		a.Decision = wire.DecisionExpired
	}
	for _, ch := range m.watchers[id] {
		ch <- a.Decision
	}
	delete(m.watchers, id)
	return *a, a.Decision == decision, nil
}

// Watch returns a channel that gets the approval's decision.
func (m *MemoryApprovals) Watch(id string) (<-chan string, func()) {
	ch := make(chan string, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.all[id]; ok && a.Decision != "" {
		ch <- a.Decision
		return ch, func() {}
	}
	m.watchers[id] = append(m.watchers[id], ch)
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.watchers[id] = slices.DeleteFunc(m.watchers[id], func(c chan string) bool { return c == ch })
		if len(m.watchers[id]) == 0 {
			delete(m.watchers, id)
		}
	}
}

// Forget removes the approvals that expired before before.
func (m *MemoryApprovals) Forget(_ context.Context, before time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, a := range m.all {
		if a.Expires.Before(before) {
			delete(m.all, id)
		}
	}
	return nil
}
