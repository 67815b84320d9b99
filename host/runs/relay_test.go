package runs

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/tools"
)

// The relay's own rules, against a stand-in for the other host (the real
// hosts are in integration/multihost_sessions_test.go): events copied in
// order under the other host's run id, a broken stream followed again
// from the next seq with nothing twice, a cancel passed on with its
// reason, and a host that can't be reached ending the run interrupted.

// otherHost is another host as the relay sees it: a run whose events it
// sends from a list, breaking its first stream after breakAfter events.
type otherHost struct {
	events     []Event
	breakAfter int
	reachable  bool

	mu        sync.Mutex
	follows   []uint64
	cancelled string
}

func (h *otherHost) Name() string { return `"web-2" (10.0.0.2:8080)` }

func (h *otherHost) stream(from uint64, stopAt int) *listStream {
	return &listStream{events: h.events, next: int(from), stopAt: stopAt}
}

func (h *otherHost) Start(context.Context, Request) (RunInfo, Stream, error) {
	return RunInfo{Run: "r-there", Tool: "run_python", Principal: "ed", Session: "chat"}, h.stream(0, h.breakAfter), nil
}

func (h *otherHost) Follow(_ context.Context, id string, from uint64) (RunInfo, Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.follows = append(h.follows, from)
	if !h.reachable {
		return RunInfo{}, nil, errors.New("connection refused")
	}
	return RunInfo{Run: id}, h.stream(0, len(h.events)), nil // from 0 on purpose: the relay skips what it has
}

func (h *otherHost) Cancel(_ context.Context, _, reason string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancelled = reason
	return nil
}

type listStream struct {
	events       []Event
	next, stopAt int
}

func (s *listStream) Next() (Event, error) {
	if s.next >= s.stopAt || s.next >= len(s.events) {
		return Event{}, io.ErrUnexpectedEOF
	}
	e := s.events[s.next]
	e.Seq = uint64(s.next)
	s.next++
	return e, nil
}

func (s *listStream) Close() error { return nil }

type oneRoute struct{ up Upstream }

func (r oneRoute) Route(context.Context, Request) (Upstream, error) { return r.up, nil }
func (r oneRoute) Find(context.Context, string, uint64) (Upstream, RunInfo, Stream, error) {
	return nil, RunInfo{}, nil, nil
}

func relayDispatcher(up Upstream) *Dispatcher {
	d := NewDispatcher(tools.NewRegistry(), func(string) (Invoker, bool) { return nil, false }, nil, time.Hour)
	d.SetRouter(oneRoute{up})
	return d
}

func waitRelayed(t *testing.T, run *Run) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end, err := run.Wait(ctx)
	if err != nil {
		t.Fatalf("the relayed run did not end: %v", err)
	}
	return end
}

func TestRelayCopiesTheOtherHostsRunAcrossABreak(t *testing.T) {
	h := &otherHost{reachable: true, breakAfter: 2, events: []Event{
		{Type: wire.TypeStarted, Tool: "run_python"},
		{Type: wire.TypeStdout, Data: "one\n"},
		{Type: wire.TypeStdout, Data: "two\n"},
		{Type: wire.TypeResult, Result: []byte(`2`)},
	}}
	d := relayDispatcher(h)
	run, err := d.Start(Request{Tool: "run_python", Principal: "ed", Session: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != "r-there" || run.Principal != "ed" {
		t.Errorf("the relay run is %s of %s; want the other host's r-there, of ed", run.ID, run.Principal)
	}
	end := waitRelayed(t, run)
	if end.Type != wire.TypeResult || string(end.Result) != "2" || end.Seq != 3 {
		t.Errorf("the relay ended %+v; want the result, at seq 3", end)
	}
	if out, _, _ := run.Printed(); out != "one\ntwo\n" {
		t.Errorf("the relay printed %q; want each line once, in order", out)
	}
	if len(h.follows) != 1 || h.follows[0] != 2 {
		t.Errorf("after the break the relay followed from %v; want once, from seq 2", h.follows)
	}
	if got, ok := d.Get("r-there"); !ok || got != run {
		t.Error("the relay run is not kept under the other host's id")
	}
}

func TestRelayPassesOnACancelAndEndsInterruptedWhenTheHostIsGone(t *testing.T) {
	h := &otherHost{reachable: false, breakAfter: 2, events: []Event{
		{Type: wire.TypeStarted, Tool: "run_python"},
		{Type: wire.TypeStdout, Data: "going\n"},
		{Type: wire.TypeResult},
	}}
	d := relayDispatcher(h)
	run, err := d.Start(Request{Tool: "run_python", Principal: "ed", Session: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	run.CancelBecause("the caller went on to something else")
	end := waitRelayed(t, run)
	if end.Type != wire.TypeError || end.Error.Code != wire.CodeInterrupted || !strings.Contains(end.Error.Message, "web-2") {
		t.Errorf("the relay of an unreachable host ended %+v; want interrupted, naming the host", end)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancelled != "the caller went on to something else" {
		t.Errorf("the other host was told to cancel with %q; want the caller's reason", h.cancelled)
	}
	if len(h.follows) != relayRetries {
		t.Errorf("the relay tried to follow the run %d times; want %d", len(h.follows), relayRetries)
	}
}
