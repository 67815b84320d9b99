package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// patchNetwork sets a session's network over the API.
func (s *sessionHost) patchNetwork(t *testing.T, session, network string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPatch, s.URL("/api/v1/sessions/"+session), strings.NewReader(`{"network":"`+network+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH %s's network to %s: %d %s", session, network, resp.StatusCode, b)
	}
}

// putFile uploads a file into a session over the API.
func (s *sessionHost) putFile(t *testing.T, session, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, s.URL("/api/v1/sessions/"+session+"/files/"+path), strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s in %s: %d %s", path, session, resp.StatusCode, b)
	}
}

// runningSandboxes are the host's sandboxes runsc lists as running.
func (s *sessionHost) runningSandboxes(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	states, err := s.rt.List(ctx)
	if err != nil {
		t.Fatalf("runsc list: %v", err)
	}
	var out []string
	for _, st := range states {
		if strings.HasPrefix(st.ID, s.prefix) && st.Status == "running" && !readySandbox(st) {
			out = append(out, st.ID)
		}
	}
	return out
}

// waitFile waits up to d for a session's file to exist over the API.
func (s *sessionHost) waitFile(t *testing.T, session, path string, d time.Duration) bool {
	t.Helper()
	for end := time.Now().Add(d); ; {
		if code, _ := s.get(t, "/api/v1/sessions/"+session+"/files/"+path); code == http.StatusOK {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSessionNetworkSwitchStopsItsSandbox: a watcher running in a web
// session (a run that copies what is uploaded, as one sending it out would
// read it) never sees a file uploaded after the network is switched off:
// the switch stops the networked sandbox, files kept, before it answers.
// (A watcher left behind by an ended run is no more: a run's processes end
// with it.)
func TestSessionNetworkSwitchStopsItsSandbox(t *testing.T) {
	s := startSessionHost(t)
	const conv = "watched"
	s.patchNetwork(t, conv, "web")
	watcher := `echo watching; while :; do
  [ -e /work/before.txt ] && [ ! -e /work/seen-before.txt ] && cp /work/before.txt /work/seen-before.txt
  [ -e /work/after.txt ] && cp /work/after.txt /work/seen-after.txt
  sleep 0.05
done`
	body, _ := json.Marshal(map[string]string{"command": watcher})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		// The run lasts until the switch stops its sandbox (or its 30 seconds).
		resp, err := http.Post(s.URL("/api/v1/tools/run_bash/call?session="+conv), "application/json", bytes.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() { <-watching }()
	// The upload waits for the watcher's sandbox: an upload taints the
	// conversation, and a tainted web session's runs ask a person first,
	// so a watcher started after it would wait for an approval.
	for end := time.Now().Add(60 * time.Second); len(s.runningSandboxes(t)) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the watcher's sandbox did not start within 60 s")
		}
	}
	// The watcher sees what is uploaded while the network is web: the
	// test's watcher works.
	s.putFile(t, conv, "before.txt", "uploaded with the network on")
	if !s.waitFile(t, conv, "seen-before.txt", 10*time.Second) {
		t.Fatal("the watcher running in the web session never saw a file uploaded while the network was on")
	}
	if running := s.runningSandboxes(t); len(running) == 0 {
		t.Fatal("the web session's sandbox is not running before the switch")
	}

	s.patchNetwork(t, conv, "off")
	if running := s.runningSandboxes(t); len(running) > 0 {
		t.Errorf("the web sandbox still runs after the switch answered: %v", running)
	}
	s.putFile(t, conv, "after.txt", "uploaded with the network off: the watcher must not see it")
	if s.waitFile(t, conv, "seen-after.txt", 3*time.Second) {
		t.Fatal("the watcher of the web session saw a file uploaded after the network was switched off")
	}
	// The files stayed, and the next run (network off) sees them.
	if res := s.run(t, conv, "run_bash", "command", "cat before.txt; echo; cat after.txt"); !strings.Contains(res["stdout"].(string), "network off") {
		t.Fatalf("the files after the switch: %v", res)
	}
}
