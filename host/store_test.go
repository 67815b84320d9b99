package host

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// TestAHostStartedWhileItsDatabaseIsDownPicksItUp: a host whose [store]
// PostgreSQL server is down when it starts serves all the same: what needs
// the store answers store_unavailable (503) and /healthz 503 saying so.
// Once the server is started, with no restart of the host, /healthz
// answers 200 (the schema is made then) and the store's calls work.
func TestAHostStartedWhileItsDatabaseIsDownPicksItUp(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := New(loadConfig(t, dir, fmt.Sprintf("[server]\nstate_dir = \"state\"\n[plugins]\ndir = %q\n[store]\nurl = %q\n", t.TempDir(), url)), hclog.NewNullLogger())
	defer h.Stop()
	if err := h.PrepareState(); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if pr := h.Start(sctx); !pr.Empty() {
		t.Fatalf("the host did not start: %+v", pr)
	}
	hs := httptest.NewServer(h.Handler())
	defer hs.Close()
	th := &testHost{h: h, srv: hs, dir: dir}

	if status, body := th.do(t, "GET", "/healthz", "", ""); status != http.StatusServiceUnavailable || body["store"] != "unavailable" {
		t.Fatalf("/healthz while the database is down: %d %v", status, body)
	}
	if status, body := th.do(t, "GET", "/api/v1/me", "", ""); status != http.StatusServiceUnavailable || body["error"].(map[string]any)["code"] != "store_unavailable" {
		t.Fatalf("/api/v1/me while the database is down: %d %v", status, body)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var status int
	var body map[string]any
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(200 * time.Millisecond) {
		// A try within a second of a failed one is not made again.
		if status, body = th.do(t, "GET", "/healthz", "", ""); status == http.StatusOK {
			break
		}
	}
	if status != http.StatusOK || body["store"] != "ok" {
		t.Fatalf("/healthz once the database is back: %d %v", status, body)
	}
	if status, body := th.do(t, "GET", "/api/v1/me", "", ""); status != http.StatusOK {
		t.Fatalf("/api/v1/me once the database is back: %d %v", status, body)
	}
	if v, err := h.store.Load().Version(ctx); err != nil || v == 0 {
		t.Errorf("the schema once the database is back: version %d, %v", v, err)
	}
}
