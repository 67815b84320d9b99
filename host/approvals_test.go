package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// startPostgresHost starts a host whose [store] is the PostgreSQL
// database at url, with the http kind's plugin, tokens, and extra config.
func startPostgresHost(t *testing.T, url, extra string) *testHost {
	t.Helper()
	pdir, err := httpPlugin()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(pdir, "toolhost-plugin-http"))
	if err != nil {
		t.Fatal(err)
	}
	pin := sha256.Sum256(b)
	dir := t.TempDir()
	text := fmt.Sprintf("[plugins]\ndir = %q\n[plugins.sha256]\nhttp = %q\n[http]\nallow_private = true\n", pdir, hex.EncodeToString(pin[:])) +
		fmt.Sprintf("[server]\nstate_dir = %q\n[store]\nurl = %q\n", filepath.Join(dir, "state"), url) + extra + "\n" +
		tokensTOML("ed", "editor", "eve", "editor", "ada", "admin")
	cfg := loadConfig(t, dir, text)
	h := New(cfg, hclog.NewNullLogger())
	if err := h.PrepareState(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pr := h.Start(ctx); !pr.Empty() {
		t.Fatalf("the test host did not start cleanly: %+v", pr)
	}
	th := &testHost{h: h, srv: httptest.NewServer(h.Handler()), dir: dir, file: cfg.File}
	t.Cleanup(th.stop)
	return th
}

// TestApprovalsAreSharedByHostsOnOnePostgresStore: two hosts on one
// PostgreSQL store. A change call on host A waits; host B lists its
// approval (to its caller and an admin, not to another editor) and
// approves it; the run on A runs the tool and ends with its result, and a
// second decision, on A, is already decided.
func TestApprovalsAreSharedByHostsOnOnePostgresStore(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"sent":true}`)
	}))
	t.Cleanup(up.Close)
	url, err := pgtest.Start(t).NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tool := fmt.Sprintf("[[tool]]\nname = \"send\"\ndescription = \"Send it.\"\neffect = \"change\"\n[tool.run]\ntype = \"http\"\nmethod = \"POST\"\nurl = \"%s/send\"\n", up.URL)
	a := startPostgresHost(t, url, tool)
	b := startPostgresHost(t, url, tool)

	status, body := a.do(t, "POST", "/api/v1/tools/send/call", "ed-token", "{}")
	if status != http.StatusAccepted {
		t.Fatalf("the change call on A: %d %v; want 202", status, body)
	}
	runID := body["run"].(string)
	id := body["approval"].(map[string]any)["id"].(string)

	for _, c := range []struct {
		token string
		want  int
	}{{"ed-token", 1}, {"ada-token", 1}, {"eve-token", 0}} {
		status, list := b.do(t, "GET", "/api/v1/approvals", c.token, "")
		if n := len(list["approvals"].([]any)); status != 200 || n != c.want {
			t.Errorf("host B lists %d approvals to %s (%d); want %d", n, c.token, status, c.want)
		}
	}
	if status, body := b.do(t, "POST", "/api/v1/approvals/"+id, "eve-token", `{"decision":"approve"}`); status != http.StatusNotFound {
		t.Errorf("eve decides ed's approval on B: %d %v; want 404", status, body)
	}
	if status, body := b.do(t, "POST", "/api/v1/approvals/"+id, "ed-token", `{"decision":"approve"}`); status != 200 {
		t.Fatalf("ed approves on B: %d %v", status, body)
	}
	run, ok := a.h.runs.Get(runID)
	if !ok {
		t.Fatal("the run is gone from host A")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if last, err := run.Wait(ctx); err != nil || last.Type != "result" || hits.Load() != 1 {
		t.Fatalf("the run on A ended %+v, %v; the tool ran %d times", last, err, hits.Load())
	}
	if status, body := a.do(t, "POST", "/api/v1/approvals/"+id, "ada-token", `{"decision":"decline"}`); status != http.StatusConflict {
		t.Errorf("a second decision on A: %d %v; want 409", status, body)
	}
}
