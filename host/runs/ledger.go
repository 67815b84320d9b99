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

// Limits are the budgets a charge checks against the use counted since
// Since; 0 is no limit.
type Limits struct {
	Since          time.Time
	Runs           int
	SandboxSeconds int
}

// Allows says whether a run may start after use: every run is held to
// Runs, a sandboxed one (sandbox) to SandboxSeconds too.
func (l Limits) Allows(use Use, sandbox bool) bool {
	if l.Runs > 0 && use.Runs >= l.Runs {
		return false
	}
	return !(l.SandboxSeconds > 0 && sandbox && use.SandboxSeconds >= float64(l.SandboxSeconds))
}

// Counted says whether a charge against l counts the use first: whether
// it has a budget.
func (l Limits) Counted() bool { return l.Runs > 0 || l.SandboxSeconds > 0 }

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
	// Host is the id of the host that claimed the key ([cluster] host_id),
	// and Instance names that host's process (a host restarted under the
	// same id is another instance); "" in a ledger of one host.
	Host, Instance string
	// Interrupted says the key's run was marked cut off: its host's lease
	// ran out before the run ended (read only).
	Interrupted bool
	// HostAddress and HostLive are read with the entry, by the ledger's
	// clock: the claiming host's [cluster] address, and whether the lease
	// of the instance that claimed the key is live, so its run may still go
	// on there (read only; false in a ledger without leases).
	HostAddress string
	HostLive    bool
}

// Ledger keeps the usage of runs and the idempotency keys, so that
// neither a budget nor a key is forgotten when the host restarts. The
// host's is its store (package sessions: SQLite or PostgreSQL);
// MemoryLedger keeps them in memory.
//
// Its checks and their records are one step each, for every host sharing
// the ledger at once: ChargeUsage counts and records, ClaimKey looks up
// and records.
type Ledger interface {
	// ChargeUsage records the start of a run, top-level or nested, if
	// the use counted since lim.Since leaves room under lim, as one step
	// (two charges racing for the last run: one gets it). It returns the
	// use it counted (zero when lim has no budget, and nothing is
	// counted) and whether the run was charged; a run charged twice
	// keeps its first record.
	ChargeUsage(ctx context.Context, e UsageEntry, lim Limits) (Use, bool, error)
	EndUsage(ctx context.Context, run string, seconds float64) error
	// DropUsage removes a run's usage: the run was refused after all.
	DropUsage(ctx context.Context, run string) error
	Usage(ctx context.Context, principal string, since time.Time) (Use, error)
	// Key returns the key's entry, if there is one.
	Key(ctx context.Context, principal, key string) (KeyEntry, bool, error)
	// ClaimKey records e, a key and the run it is about to start, unless
	// the key has an entry made at or after fresh: that entry is returned
	// instead, and claimed is false. An older entry is replaced. Of
	// several claims of one key at once, one is claimed.
	ClaimKey(ctx context.Context, e KeyEntry, fresh time.Time) (prev KeyEntry, claimed bool, err error)
	// DropKey removes the key's entry if it names run: the run its claim
	// was for was refused, so the key is unused.
	DropKey(ctx context.Context, principal, key, run string) error
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

// ChargeUsage records a run's start if lim leaves room for it.
func (m *MemoryLedger) ChargeUsage(_ context.Context, e UsageEntry, lim Limits) (Use, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var use Use
	if lim.Counted() {
		use = m.usageLocked(e.Principal, lim.Since)
		if !lim.Allows(use, e.Sandbox) {
			return use, false, nil
		}
	}
	if _, ok := m.usage[e.Run]; !ok {
		m.usage[e.Run] = &memUse{UsageEntry: e}
	}
	return use, true, nil
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
	return m.usageLocked(principal, since), nil
}

func (m *MemoryLedger) usageLocked(principal string, since time.Time) Use {
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
	return u
}

// Key returns a key's entry.
func (m *MemoryLedger) Key(_ context.Context, principal, key string) (KeyEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.keys[[2]string{principal, key}]
	return e, ok, nil
}

// ClaimKey records a key unless it has an entry made at or after fresh.
func (m *MemoryLedger) ClaimKey(_ context.Context, e KeyEntry, fresh time.Time) (KeyEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{e.Principal, e.Key}
	if prev, ok := m.keys[k]; ok && !prev.Created.Before(fresh) {
		return prev, false, nil
	}
	m.keys[k] = e
	return KeyEntry{}, true, nil
}

// DropKey removes a key's entry if it names run.
func (m *MemoryLedger) DropKey(_ context.Context, principal, key, run string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{principal, key}
	if e, ok := m.keys[k]; ok && e.Run == run {
		delete(m.keys, k)
	}
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
