package sessions_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
)

const testFile = "/etc/toolhost/toolhost.toml"

// setCaps puts [sessions] in force with the caps given, as a reload does.
func (f *fixture) setCaps(perPrincipal, all, transfersPerPrincipal, transfers int) {
	c := enabled()
	c.MaxSessionsPerPrincipal, c.MaxSessions = perPrincipal, all
	c.MaxTransfersPerPrincipal, c.MaxTransfers = transfersPerPrincipal, transfers
	f.svc.SetConfig(c, testFile)
}

// untouchable is a body a refused upload must never read.
type untouchable struct{ t *testing.T }

func (u untouchable) Read([]byte) (int, error) {
	u.t.Error("the body of a refused upload was read")
	return 0, errors.New("read")
}

// refusedLeavesNothing checks that principal's session is in neither the
// store nor the backend.
func (f *fixture) refusedLeavesNothing(t *testing.T, principal, session string) {
	t.Helper()
	if _, err := f.svc.Get(context.Background(), principal, session); code(err) != wire.CodeNotFound {
		t.Errorf("a refused %s of %s is in the store: %v", session, principal, err)
	}
	if f.back.Has(sessions.BackendID(principal, session)) {
		t.Errorf("a refused %s of %s has a workspace", session, principal)
	}
}

// TestSessionCaps: a new session past max_sessions_per_principal or
// max_sessions is refused with too_many_sessions, saying which cap, by
// every way a session is made (upload, network change, run), and nothing
// of it is made; sessions already there keep working, and a delete makes
// room.
func TestSessionCaps(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.setCaps(2, 3, 4, 16)
	kind := &sessionstest.Kind{Backend: f.back}
	inv := f.svc.Invoker(kind)
	for _, s := range []string{"a", "b"} {
		if _, err := f.svc.WriteFile(ctx, "ann", s, "x.txt", strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	writes := f.back.Writes()
	wantAnn := `the session "c" can't be started: the token "ann" already has 2 sessions, the most one token may have ` +
		`([sessions] max_sessions_per_principal in /etc/toolhost/toolhost.toml); delete one it no longer needs ` +
		`(DELETE /api/v1/sessions/ID), or wait for one to go unused for 24 hours`
	_, err := f.svc.WriteFile(ctx, "ann", "c", "x.txt", untouchable{t})
	if code(err) != wire.CodeTooManySessions || err.Error() != wantAnn {
		t.Errorf("ann's third session by upload: %v", err)
	}
	if f.back.Writes() != writes {
		t.Error("a refused upload reached the backend")
	}
	if _, err := f.svc.SetNetwork(ctx, "ann", "c", "web"); code(err) != wire.CodeTooManySessions {
		t.Errorf("ann's third session by a network change: %v", err)
	}
	if _, err := inv.Invoke(ctx, invocation("r1", "ann", "c", "run_python", `{"code":"1"}`), nil); code(err) != wire.CodeTooManySessions {
		t.Errorf("ann's third session by a run: %v", err)
	}
	if n := len(kind.Invocations()); n != 0 {
		t.Errorf("a refused run reached the kind %d times", n)
	}
	f.refusedLeavesNothing(t, "ann", "c")
	// ann's sessions already there keep working.
	if _, err := f.svc.WriteFile(ctx, "ann", "a", "y.txt", strings.NewReader("y")); err != nil {
		t.Errorf("ann's own session at her cap: %v", err)
	}
	if _, err := inv.Invoke(ctx, invocation("r2", "ann", "b", "run_python", `{"code":"1"}`), nil); err != nil {
		t.Errorf("a run in ann's own session at her cap: %v", err)
	}

	// The host's cap: bob's first is the third session, his second passes it.
	if _, err := f.svc.SetNetwork(ctx, "bob", "x", "web"); err != nil {
		t.Fatal(err)
	}
	wantHost := `the session "y" can't be started: this host already keeps 3 sessions, the most it may ` +
		`([sessions] max_sessions in /etc/toolhost/toolhost.toml); try again once sessions were deleted or went unused for 24 hours`
	if _, err := f.svc.WriteFile(ctx, "bob", "y", "x.txt", untouchable{t}); code(err) != wire.CodeTooManySessions || err.Error() != wantHost {
		t.Errorf("bob's session past the host's cap: %v", err)
	}
	f.refusedLeavesNothing(t, "bob", "y")

	got := f.svc.Refusals()
	if got[sessions.CapSessionsPerPrincipal] != 3 || got[sessions.CapSessions] != 1 || got[sessions.CapTransfers] != 0 || len(got) != len(sessions.Caps) {
		t.Errorf("refusals %v", got)
	}

	// A delete makes room again.
	if err := f.svc.Delete(ctx, "ann", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.WriteFile(ctx, "ann", "c", "x.txt", strings.NewReader("x")); err != nil {
		t.Errorf("ann's session after a delete: %v", err)
	}
}

// TestCheckNew: the check before a call of a session tool passes a
// session that is there or one that fits, making nothing, and refuses one
// past a cap, counted.
func TestCheckNew(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.setCaps(1, 200, 4, 16)
	if err := f.svc.CheckNew(ctx, "ann", "a"); err != nil {
		t.Errorf("ann's first session: %v", err)
	}
	f.refusedLeavesNothing(t, "ann", "a")
	if _, err := f.svc.WriteFile(ctx, "ann", "a", "x.txt", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.CheckNew(ctx, "ann", "a"); err != nil {
		t.Errorf("ann's session that is there: %v", err)
	}
	err := f.svc.CheckNew(ctx, "ann", "b")
	if code(err) != wire.CodeTooManySessions || !strings.HasPrefix(err.Error(), `the session "b" can't be started: the token "ann" already has 1 sessions`) {
		t.Errorf("ann's second session: %v", err)
	}
	if got := f.svc.Refusals()[sessions.CapSessionsPerPrincipal]; got != 1 {
		t.Errorf("refusals %d", got)
	}
}

// TestLoweredSessionCapsSpareSessionsThere: caps lowered by a reload
// refuse new sessions only; those already there keep every operation.
func TestLoweredSessionCapsSpareSessionsThere(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.setCaps(5, 10, 4, 16)
	for _, s := range []string{"a", "b", "c"} {
		if _, err := f.svc.WriteFile(ctx, "ann", s, "x.txt", strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	f.setCaps(1, 1, 4, 16)
	inv := f.svc.Invoker(&sessionstest.Kind{Backend: f.back})
	for _, s := range []string{"a", "b", "c"} {
		if _, err := f.svc.WriteFile(ctx, "ann", s, "y.txt", strings.NewReader("y")); err != nil {
			t.Errorf("upload to %s after the reload: %v", s, err)
		}
		if data, err := readAll(f.svc.OpenFile(ctx, "ann", s, "x.txt", 10)); err != nil || string(data) != "x" {
			t.Errorf("download from %s after the reload: %q, %v", s, data, err)
		}
		if _, err := f.svc.SetNetwork(ctx, "ann", s, "web"); err != nil {
			t.Errorf("network of %s after the reload: %v", s, err)
		}
		if _, err := inv.Invoke(ctx, invocation("r-"+s, "ann", s, "run_bash", `{"command":"ls"}`), nil); err != nil {
			t.Errorf("run in %s after the reload: %v", s, err)
		}
	}
	_, err := f.svc.WriteFile(ctx, "ann", "d", "x.txt", untouchable{t})
	if code(err) != wire.CodeTooManySessions || !strings.Contains(err.Error(), `already has 3 sessions, the most one token may have`) {
		t.Errorf("a new session after the reload: %v", err)
	}
	if _, err := f.svc.WriteFile(ctx, "bob", "d", "x.txt", untouchable{t}); code(err) != wire.CodeTooManySessions ||
		!strings.Contains(err.Error(), "this host already keeps 3 sessions") {
		t.Errorf("bob's first session after the reload: %v", err)
	}
	f.refusedLeavesNothing(t, "ann", "d")
	f.refusedLeavesNothing(t, "bob", "d")
}

// TestTransferCaps: a transfer past max_transfers_per_principal or
// max_transfers is refused at once with too_many_transfers, saying which;
// a place given back (once, however often) is taken again.
func TestTransferCaps(t *testing.T) {
	f := newFixture(t)
	f.setCaps(20, 200, 2, 3)
	a1, err := f.svc.Transfer("ann")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := f.svc.Transfer("ann")
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := `the token "ann" already has 2 file transfers going, the most one token may have at once ` +
		`([sessions] max_transfers_per_principal in /etc/toolhost/toolhost.toml); try again once one has finished`
	if _, err := f.svc.Transfer("ann"); code(err) != wire.CodeTooManyTransfers || err.Error() != wantAnn {
		t.Errorf("ann's third transfer: %v", err)
	}
	b1, err := f.svc.Transfer("bob")
	if err != nil {
		t.Fatalf("bob's first transfer: %v", err)
	}
	wantHost := `this host already has 3 file transfers going, the most it allows at once ` +
		`([sessions] max_transfers in /etc/toolhost/toolhost.toml); try again in a moment`
	if _, err := f.svc.Transfer("bob"); code(err) != wire.CodeTooManyTransfers || err.Error() != wantHost {
		t.Errorf("bob's second transfer: %v", err)
	}
	a1()
	a1() // given back once only
	if mine, all := f.svc.Transfers("ann"); mine != 1 || all != 2 {
		t.Errorf("after ann gave one back: ann %d, all %d", mine, all)
	}
	b2, err := f.svc.Transfer("bob")
	if err != nil {
		t.Fatalf("bob's transfer once there was room: %v", err)
	}
	a2()
	b1()
	b2()
	if mine, all := f.svc.Transfers("bob"); mine != 0 || all != 0 {
		t.Errorf("after all were given back: bob %d, all %d", mine, all)
	}
	if got := f.svc.Refusals(); got[sessions.CapTransfersPerPrincipal] != 1 || got[sessions.CapTransfers] != 1 || got[sessions.CapSessions] != 0 {
		t.Errorf("refusals %v", got)
	}
	// Lowered by a reload: the transfers going on are left alone, new ones
	// are counted against the new cap.
	c1, _ := f.svc.Transfer("ann")
	c2, _ := f.svc.Transfer("ann")
	f.setCaps(20, 200, 1, 16)
	if _, err := f.svc.Transfer("ann"); code(err) != wire.CodeTooManyTransfers {
		t.Errorf("a transfer past the lowered cap: %v", err)
	}
	c1()
	if _, err := f.svc.Transfer("ann"); code(err) != wire.CodeTooManyTransfers {
		t.Errorf("one going, cap 1: %v", err)
	}
	c2()
	if _, err := f.svc.Transfer("ann"); err != nil {
		t.Errorf("none going, cap 1: %v", err)
	}
}

// TestStop: a session's sandbox is stopped, its files and record kept;
// another principal's session, or none, is not_found.
func TestStop(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.svc.WriteFile(ctx, "ann", "c", "x.txt", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Stop(ctx, "ann", "c"); err != nil {
		t.Fatal(err)
	}
	id := sessions.BackendID("ann", "c")
	if stopped := f.back.Stopped(); len(stopped) != 1 || stopped[0] != id {
		t.Errorf("stopped %v", stopped)
	}
	if !f.back.Has(id) {
		t.Error("the files went with the sandbox")
	}
	for _, p := range []string{"bob", "ann"} {
		s := map[string]string{"bob": "c", "ann": "nope"}[p]
		if err := f.svc.Stop(ctx, p, s); code(err) != wire.CodeNotFound || err.Error() != sessions.NotFound(s).Error() {
			t.Errorf("stop of %s by %s: %v", s, p, err)
		}
	}
	if len(f.back.Stopped()) != 1 {
		t.Errorf("stopped %v", f.back.Stopped())
	}
}

// failing is a body that breaks off.
type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("the caller went away") }

// TestAFailedUploadTakesBackTheSessionItMade: a session made by an upload
// that fails is deleted, so it holds no place under the caps; a session
// that was there before, or that anything else used meanwhile, stays.
func TestAFailedUploadTakesBackTheSessionItMade(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.setCaps(2, 200, 4, 16)
	if _, err := f.svc.WriteFile(ctx, "ann", "new", "x.txt", failing{}); err == nil {
		t.Fatal("the failed upload succeeded")
	}
	f.refusedLeavesNothing(t, "ann", "new")

	// Made by a good upload, then a failed one: it stays.
	if _, err := f.svc.WriteFile(ctx, "ann", "a", "x.txt", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.WriteFile(ctx, "ann", "a", "y.txt", failing{}); err == nil {
		t.Fatal("the failed upload succeeded")
	}
	if _, err := f.svc.Get(ctx, "ann", "a"); err != nil {
		t.Errorf("a session there before a failed upload: %v", err)
	}

	// Made by an upload that fails after a run used the session: it stays.
	entered, proceed := make(chan struct{}), make(chan struct{})
	f.back.BeforeTransfer = func(_, path string) {
		if path == "slow.txt" {
			entered <- struct{}{}
			<-proceed
		}
	}
	failed := make(chan error, 1)
	go func() {
		_, err := f.svc.WriteFile(ctx, "ann", "b", "slow.txt", failing{})
		failed <- err
	}()
	select {
	case <-entered:
	case err := <-failed:
		t.Fatalf("the upload ended before it wrote: %v", err)
	}
	inv := f.svc.Invoker(&sessionstest.Kind{Backend: f.back})
	if _, err := inv.Invoke(ctx, invocation("r1", "ann", "b", "run_python", `{"code":"1"}`), nil); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-failed; err == nil {
		t.Fatal("the failed upload succeeded")
	}
	if _, err := f.svc.Get(ctx, "ann", "b"); err != nil {
		t.Errorf("a session a run used while the upload that made it went on: %v", err)
	}
	// ann is at her cap with a and b: the session taken back held no place.
	if _, err := f.svc.WriteFile(ctx, "ann", "c", "x.txt", untouchable{t}); code(err) != wire.CodeTooManySessions {
		t.Errorf("a third session: %v", err)
	}
}

// readAll reads and closes what OpenFile opened.
func readAll(r io.ReadCloser, _ int64, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
