package runs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
)

// MaxKeyLength bounds an idempotency key, in bytes.
const MaxKeyLength = 255

// maxRecorded bounds each of the printed streams a key's outcome keeps.
const maxRecorded = 1 << 20

// keyOutcome is the end of a key's run as the ledger keeps it.
type keyOutcome struct {
	Stdout  string          `json:"stdout,omitempty"`
	Stderr  string          `json:"stderr,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Content []wire.Content  `json:"content,omitempty"`
	Error   *ErrorBody      `json:"error,omitempty"`
}

// SetKeyKeep sets how long an idempotency key holds after its call
// started ([runs] keep_minutes); 0 is the dispatcher's keep time.
func (d *Dispatcher) SetKeyKeep(keep time.Duration) {
	d.acct.mu.Lock()
	defer d.acct.mu.Unlock()
	d.acct.keep = keep
}

// startKeyed starts a call with an idempotency key, once: the same key
// from the same principal for the same call (tool, session and arguments,
// compared as canonical JSON) within the keep time returns the run it
// started, going on or ended, or, once that is forgotten or the host
// restarted, a run made from its recorded outcome. The same key for
// another call is refused (wire.CodeIdempotencyConflict). The key is
// claimed in the ledger before its run starts, with this host's id
// (SetHost), so of the hosts sharing a ledger one runs it; another, while
// the run goes on there, answers wire.CodeInProgress as long as the
// claiming host holds its lease, and wire.CodeInterrupted once it ran out,
// as after a restart.
func (d *Dispatcher) startKeyed(req Request) (*Run, error) {
	a := &d.acct
	a.keyMu.Lock()
	defer a.keyMu.Unlock()
	l, now, keep := d.keyLedger()
	if len(req.IdempotencyKey) > MaxKeyLength {
		return nil, &sdk.Error{Code: wire.CodeBadArgs, Message: fmt.Sprintf("the idempotency key is %d bytes long; a key may be at most %d: use a shorter one, e.g. a UUID", len(req.IdempotencyKey), MaxKeyLength)}
	}
	hash, err := callHash(req)
	if err != nil {
		return nil, &sdk.Error{Code: wire.CodeBadArgs, Message: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t := now()
	// The key is claimed for the run before it starts, in one step of the
	// ledger: of the hosts sharing it, one starts the run.
	id := newRunID()
	host := d.hostOf()
	e := KeyEntry{Principal: req.Principal, Key: req.IdempotencyKey, Tool: req.Tool, ArgsHash: hash, Run: id, Created: t,
		Host: host.ID, Instance: host.Instance}
	prev, claimed, err := l.ClaimKey(ctx, e, t.Add(-keep))
	if err != nil {
		return nil, fmt.Errorf("the idempotency key %q can't be looked up, so the call was not run: %w", req.IdempotencyKey, err)
	}
	if !claimed {
		if prev.ArgsHash != hash {
			return nil, &sdk.Error{Code: wire.CodeIdempotencyConflict, Message: fmt.Sprintf(
				"the idempotency key %q was already used %s ago for another call (of %s, or with other arguments or session); a key names one call: send a new key for a new call",
				req.IdempotencyKey, t.Sub(prev.Created).Round(time.Second), prev.Tool)}
		}
		if run, ok := d.Get(prev.Run); ok {
			return run, nil
		}
		if !prev.Done {
			return nil, d.unfinishedKey(req, prev)
		}
		return d.replay(req, prev)
	}
	run, err := d.start(context.Background(), req, false, id)
	if err != nil {
		// Refused before it ran: the key stays unused.
		if derr := l.DropKey(ctx, req.Principal, req.IdempotencyKey, id); derr != nil {
			d.log.Warn("a refused call's idempotency key stays claimed: a retry within the keep time is told it was interrupted", "run", id, "error", derr)
		}
		return nil, err
	}
	return run, nil
}

// HostID names this host to the others sharing its ledger: its [cluster]
// host_id, and the instance (process) of it that runs now.
type HostID struct {
	ID, Instance string
}

// SetHost sets the host and instance the idempotency keys claimed from now
// on name, so that the other hosts sharing the ledger can tell, by this
// host's lease, whether their runs may still go on here.
func (d *Dispatcher) SetHost(h HostID) {
	d.acct.mu.Lock()
	defer d.acct.mu.Unlock()
	d.acct.host = h
}

func (d *Dispatcher) hostOf() HostID {
	d.acct.mu.Lock()
	defer d.acct.mu.Unlock()
	return d.acct.host
}

// keyLedger is the ledger keys are claimed in, its clock, and how long a
// key is kept (SetKeyKeep, or the runs' keep time).
func (d *Dispatcher) keyLedger() (Ledger, func() time.Time, time.Duration) {
	a := &d.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	l, now := a.ledgerOf()
	keep := a.keep
	if keep == 0 {
		keep = d.keep
	}
	return l, now, keep
}

// recordedKey is what the ledger says of req's key when the host that
// would run req can't be reached (relay.go): the run's recorded end, or
// in_progress or interrupted while it did not end. ok is false when the
// ledger has no fresh entry of the key for this same call: the call's
// own refusal stands.
func (d *Dispatcher) recordedKey(req Request) (run *Run, ok bool, err error) {
	l, now, keep := d.keyLedger()
	hash, herr := callHash(req)
	if herr != nil {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prev, found, lerr := l.Key(ctx, req.Principal, req.IdempotencyKey)
	if lerr != nil || !found || prev.ArgsHash != hash || prev.Created.Before(now().Add(-keep)) {
		return nil, false, nil
	}
	if !prev.Done {
		return nil, true, d.unfinishedKey(req, prev)
	}
	run, err = d.replay(req, prev)
	return run, true, err
}

// unfinishedKey is the refusal of a key whose run did not end and is not
// this process's: wire.CodeInProgress while the host that claimed it holds
// its lease (its run may still go on there), or wire.CodeInterrupted when
// that host's lease ran out, another instance of it (a restart) holds it,
// or this very instance claimed it and forgot the run.
func (d *Dispatcher) unfinishedKey(req Request, prev KeyEntry) error {
	me := d.hostOf()
	if prev.HostLive && !prev.Interrupted && prev.Instance != me.Instance {
		return &sdk.Error{Code: wire.CodeInProgress, Message: fmt.Sprintf(
			"the call with the idempotency key %q (run %s) is running on the host %s (at %s), which holds its lease; "+
				"wait for it to end and send the key again (to that host, or to any: the outcome is recorded), or follow the run there",
			req.IdempotencyKey, prev.Run, prev.Host, prev.HostAddress)}
	}
	where := "the host"
	if prev.Host != "" {
		where = "its host " + prev.Host
	}
	return &sdk.Error{Code: wire.CodeInterrupted, Message: fmt.Sprintf(
		"the call with the idempotency key %q (run %s) was running when %s stopped, so whether it acted is unknown; check, then send a new key to run it again",
		req.IdempotencyKey, prev.Run, where)}
}

// keyEnded records the outcome of a keyed run.
func (d *Dispatcher) keyEnded(ctx context.Context, l Ledger, run *Run, end Event) {
	d.acct.keyMu.Lock() // after startKeyed recorded the key
	defer d.acct.keyMu.Unlock()
	stdout, stderr, err := run.Printed()
	if err != nil {
		d.log.Warn("a keyed run's output can't be read back for its record", "run", run.ID, "error", err)
	}
	out := keyOutcome{Stdout: cut(stdout), Stderr: cut(stderr), Result: end.Result, Content: end.Content, Error: end.Error}
	b, err := json.Marshal(out)
	if err == nil {
		err = l.EndKey(ctx, run.Principal, run.IdempotencyKey, run.ID, b)
	}
	if err != nil {
		d.log.Warn("the outcome of a keyed run is not recorded: a retry after a restart is told it was interrupted", "run", run.ID, "error", err)
	}
}

func cut(s string) string {
	if len(s) <= maxRecorded {
		return s
	}
	return s[:maxRecorded] + "\n[the recorded output keeps its first MiB only]"
}

// replay makes an ended run from a key's recorded outcome, under the
// first run's id, and keeps it like a run.
func (d *Dispatcher) replay(req Request, prev KeyEntry) (*Run, error) {
	var out keyOutcome
	if err := json.Unmarshal(prev.Outcome, &out); err != nil {
		return nil, fmt.Errorf("the recorded outcome of the idempotency key %q can't be read: %w", prev.Key, err)
	}
	req.Tool = prev.Tool
	run := newRun(prev.Run, req, spillConfig{}, func(error) {})
	run.Started = prev.Created
	if out.Stdout != "" {
		run.append(Event{Type: wire.TypeStdout, Data: out.Stdout})
	}
	if out.Stderr != "" {
		run.append(Event{Type: wire.TypeStderr, Data: out.Stderr})
	}
	if out.Error != nil {
		run.append(Event{Type: wire.TypeError, Error: out.Error})
	} else {
		run.append(Event{Type: wire.TypeResult, Result: out.Result, Content: out.Content})
	}
	d.mu.Lock()
	d.runs[run.ID] = run
	d.mu.Unlock()
	return run, nil
}

// callHash names a call by its tool, session and canonical arguments
// (objects' keys sorted, no spaces, numbers as written).
func callHash(req Request) (string, error) {
	args := req.Args
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("the arguments must be JSON: %w", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("the arguments can't be compared: %w", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(req.Tool), []byte(req.Session), canon} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
