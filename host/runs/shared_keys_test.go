package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/sdk"
)

// Idempotency keys shared by hosts that hold leases: two dispatchers, each
// with a store of its own on one PostgreSQL database (two hosts), each
// holding its lease as the host does (host/cluster.go).

// refused fails t unless err is a refusal of code saying each of says.
func refused(t *testing.T, err error, code string, says ...string) {
	t.Helper()
	var se *sdk.Error
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("got %v; want a refusal with code %s", err, code)
	}
	for _, s := range says {
		if !strings.Contains(se.Message, s) {
			t.Errorf("the refusal %q does not say %q", se.Message, s)
		}
	}
}

// TestAKeyRunningOnAHostWithALiveLeaseIsInProgress: while the host that
// claimed a key holds its lease, another host answers in_progress naming
// it; once the lease ran out, interrupted, and that stays once the lapse
// was noticed, even should the host renew.
func TestAKeyRunningOnAHostWithALiveLeaseIsInProgress(t *testing.T) {
	ctx := context.Background()
	url, err := pgtest.Start(t).NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var st [2]*sessions.Store
	var ds [2]*runs.Dispatcher
	release := func() {}
	for i := range st {
		st[i], err = sessions.OpenPostgres(ctx, url, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st[i].Close() })
		var rel func()
		ds[i], rel = runs.AcctDispatcher(t, st[i])
		if i == 0 {
			release = rel
		}
	}
	ids := [2]runs.HostID{{ID: "web-1", Instance: "a"}, {ID: "web-2", Instance: "b"}}
	addrs := [2]string{"10.0.0.5:8080", "10.0.0.6:8080"}
	for i := range ds {
		ds[i].SetHost(ids[i])
		if err := st[i].TakeLease(ctx, ids[i].ID, addrs[i], ids[i].Instance, sessions.LeaseTTL); err != nil {
			t.Fatal(err)
		}
	}
	req := runs.Request{Tool: "hold", Args: json.RawMessage(`{"n":1}`), Principal: "ed", IdempotencyKey: "k"}
	run, err := ds[0].Start(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ds[1].Start(req)
	refused(t, err, wire.CodeInProgress, run.ID, "web-1", "10.0.0.5:8080")
	// On its own host, the retry gets the run.
	if again, err := ds[0].Start(req); err != nil || again.ID != run.ID {
		t.Fatalf("the retry on the run's host: %v, %v; want run %s", again, err, run.ID)
	}
	// web-1's renewals stop: its lease runs out.
	if err := st[0].RenewLease(ctx, "web-1", addrs[0], "a", -time.Second); err != nil {
		t.Fatal(err)
	}
	_, err = ds[1].Start(req)
	refused(t, err, wire.CodeInterrupted, run.ID, "web-1", "whether it acted is unknown")
	if n, err := st[1].InterruptLapsed(ctx); err != nil || n != 1 {
		t.Fatalf("web-2 marking web-1's key: %d, %v; want 1", n, err)
	}
	if err := st[0].RenewLease(ctx, "web-1", addrs[0], "a", sessions.LeaseTTL); err != nil {
		t.Fatal(err)
	}
	_, err = ds[1].Start(req)
	refused(t, err, wire.CodeInterrupted, run.ID)
	release()
	runs.End(t, run)
}
