package host

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/internal/pgtest"
)

// TestHostsHoldLeasesUnderTheirClusterIDs: two hosts on one PostgreSQL
// store each hold a live lease under their [cluster] host_id and address
// once their state is ready; the one stopped gives its lease up, the other
// keeps it.
func TestHostsHoldLeasesUnderTheirClusterIDs(t *testing.T) {
	ctx := context.Background()
	url, err := pgtest.Start(t).NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var hosts [2]*Host
	for i := range hosts {
		dir := t.TempDir()
		src := fmt.Sprintf("[server]\nstate_dir = \"state\"\n[plugins]\ndir = %q\n[store]\nurl = %q\n[cluster]\nhost_id = \"web-%d\"\naddress = \"10.0.0.%d:8080\"\n",
			t.TempDir(), url, i+1, i+5)
		hosts[i] = New(loadConfig(t, dir, src), hclog.NewNullLogger())
		if err := hosts[i].PrepareState(); err != nil {
			t.Fatal(err)
		}
	}
	defer hosts[1].Stop()
	st, err := sessions.OpenPostgres(ctx, url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	leases := func() map[string]sessions.Host {
		t.Helper()
		list, err := st.Hosts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]sessions.Host{}
		for _, h := range list {
			m[h.ID] = h
		}
		return m
	}
	got := leases()
	if len(got) != 2 || !got["web-1"].Live || got["web-1"].Address != "10.0.0.5:8080" || !got["web-2"].Live || got["web-2"].Address != "10.0.0.6:8080" {
		t.Fatalf("the leases: %+v; want web-1 at 10.0.0.5:8080 and web-2 at 10.0.0.6:8080, live", got)
	}
	hosts[0].Stop()
	got = leases()
	if got["web-1"].Live || !got["web-2"].Live {
		t.Errorf("after web-1 stopped, the leases: %+v; want web-1's given up, web-2's live", got)
	}
}
