package runs

import (
	"context"
	"sync"
	"time"
)

// UsageEntry is what the ledger of budgets keeps of one run: every run,
// top-level or nested, is counted against its principal.
type UsageEntry struct {
	Run       string
	Principal string
	Tool      string
	// Parent is the run that made a nested call; "" for a top-level one.
	Parent  string
	Started time.Time
	// Sandbox says the run's tool runs in a sandbox (the python kind):
	// its seconds count against sandbox_cpu_seconds_per_hour.
	Sandbox bool
}

// Use is what a principal used since a time.
type Use struct {
	Runs int
	// SandboxSeconds are the seconds of the sandboxed runs that ended
	// (wall-clock seconds: the plugins report no CPU time).
	SandboxSeconds float64
	// OldestRun and OldestSandbox are the starts of the oldest run and of
	// the oldest sandboxed run counted; zero when there is none.
	OldestRun, OldestSandbox time.Time
}

// KeyEntry is an idempotency key as kept: who sent it for which call,
// the run it started, and, once the run ended, its outcome.
type KeyEntry struct {
	Principal string
	Key       string
	Tool      string
	// ArgsHash is the SHA-256 of the call's tool, session and canonical
	// arguments.
	ArgsHash string
	Run      string
	Created  time.Time
	Done     bool
	// Outcome is the run's end as JSON (keyOutcome), once Done.
	Outcome []byte
}

// Ledger keeps the usage of runs and the idempotency keys, so that
// neither a budget nor a key is forgotten when the host restarts. The
// host's is its store (package sessions: SQLite or PostgreSQL);
// MemoryLedger keeps them in memory.
type Ledger interface {
	StartUsage(ctx context.Context, e UsageEntry) error
	EndUsage(ctx context.Context, run string, seconds float64) error
	// DropUsage removes a run's usage: the run was refused after all.
	DropUsage(ctx context.Context, run string) error
	Usage(ctx context.Context, principal string, since time.Time) (Use, error)
	// Key returns the key's entry, if there is one.
	Key(ctx context.Context, principal, key string) (KeyEntry, bool, error)
	// PutKey records a key, replacing an entry of the same key.
	PutKey(ctx context.Context, e KeyEntry) error
	// EndKey records the outcome of the key's run.
	EndKey(ctx context.Context, principal, key, run string, outcome []byte) error
	// Forget removes the usage of runs started before usageBefore and the
	// keys made before keysBefore.
	Forget(ctx context.Context, usageBefore, keysBefore time.Time) error
}

// MemoryLedger is a Ledger in memory, for a host without a state folder
// and for tests.
type MemoryLedger struct {
	mu    sync.Mutex
	usage map[string]*memUse
	keys  map[[2]string]KeyEntry
}

type memUse struct {
	UsageEntry
	seconds float64
}

// NewMemoryLedger returns an empty MemoryLedger.
func NewMemoryLedger() *MemoryLedger {
	return &MemoryLedger{usage: map[string]*memUse{}, keys: map[[2]string]KeyEntry{}}
}

// StartUsage records a run's start.
func (m *MemoryLedger) StartUsage(_ context.Context, e UsageEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.usage[e.Run]; !ok {
		m.usage[e.Run] = &memUse{UsageEntry: e}
	}
	return nil
}

// EndUsage records a run's seconds.
func (m *MemoryLedger) EndUsage(_ context.Context, run string, seconds float64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u, ok := m.usage[run]; ok {
		u.seconds = seconds
	}
	return nil
}

// DropUsage removes a run's usage.
func (m *MemoryLedger) DropUsage(_ context.Context, run string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.usage, run)
	return nil
}

// Usage sums a principal's use after a time.
func (m *MemoryLedger) Usage(_ context.Context, principal string, since time.Time) (Use, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var u Use
	for _, e := range m.usage {
		if e.Principal != principal || !e.Started.After(since) {
			continue
		}
		u.Runs++
		if u.OldestRun.IsZero() || e.Started.Before(u.OldestRun) {
			u.OldestRun = e.Started
		}
		if e.Sandbox {
			u.SandboxSeconds += e.seconds
			if u.OldestSandbox.IsZero() || e.Started.Before(u.OldestSandbox) {
				u.OldestSandbox = e.Started
			}
		}
	}
	return u, nil
}

// Key returns a key's entry.
func (m *MemoryLedger) Key(_ context.Context, principal, key string) (KeyEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.keys[[2]string{principal, key}]
	return e, ok, nil
}

// PutKey records a key.
func (m *MemoryLedger) PutKey(_ context.Context, e KeyEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[[2]string{e.Principal, e.Key}] = e
	return nil
}

// EndKey records the outcome of a key's run.
func (m *MemoryLedger) EndKey(_ context.Context, principal, key, run string, outcome []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{principal, key}
	if e, ok := m.keys[k]; ok && e.Run == run {
		e.Done, e.Outcome = true, outcome
		m.keys[k] = e
	}
	return nil
}

// Forget removes old usage and keys.
func (m *MemoryLedger) Forget(_ context.Context, usageBefore, keysBefore time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, e := range m.usage {
		if e.Started.Before(usageBefore) {
			delete(m.usage, id)
		}
	}
	for k, e := range m.keys {
		if e.Created.Before(keysBefore) {
			delete(m.keys, k)
		}
	}
	return nil
}
