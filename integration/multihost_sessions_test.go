package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// clusterHost is one of several hosts sharing a store, with conversations
// (python sessions in runsc) and the secret they forward with.
type clusterHost struct {
	*Host
	id, dir string
	spec    hostSpec
}

// startClusterHosts starts n hosts on the database url, each with its own
// folder, port, [cluster] host_id and sandbox prefix, sharing one secret.
func startClusterHosts(t *testing.T, url string, n int) []*clusterHost {
	t.Helper()
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "cluster.secret")
	if err := os.WriteFile(secret, []byte("a-secret-the-hosts-share-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var hosts []*clusterHost
	for i := range n {
		dir, err := os.MkdirTemp("", "thclu")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		addr := freePort(t)
		id := fmt.Sprintf("host%d", i+1)
		spec := sessionSpec(t, dir, fmt.Sprintf("thcl%d%d-", os.Getpid()%1000, i+1))
		spec.Config = tokensConfig() + spec.Config + fmt.Sprintf(`
[store]
url = %q

[cluster]
host_id = %q
address = %q
secret_file = %q
`, url, id, addr, secret)
		c := &clusterHost{Host: startHostIn(t, dir, addr, spec), id: id, dir: dir, spec: spec}
		t.Cleanup(func() { c.Stop(t) })
		hosts = append(hosts, c)
	}
	return hosts
}

// sessionAnswer is the answer of a python call in a conversation.
type sessionAnswer struct {
	status int
	Run    string `json:"run"`
	Result struct {
		Stdout   string `json:"stdout"`
		ExitCode *int   `json:"exit_code"`
	} `json:"result"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

func (a sessionAnswer) code() string {
	if a.Error == nil {
		return ""
	}
	return a.Error.Code
}

// pythonIn runs code in the conversation session at addr over HTTP as the
// editor, with key as its Idempotency-Key when not "". A connection that
// fails is status 0.
func pythonIn(ctx context.Context, addr, session, code, key string) sessionAnswer {
	body, _ := json.Marshal(map[string]string{"code": code})
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/api/v1/tools/run_python/call?session="+session, bytes.NewReader(body))
	if err != nil {
		return sessionAnswer{raw: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+editorToken)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sessionAnswer{raw: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := sessionAnswer{status: resp.StatusCode, raw: string(b)}
	_ = json.Unmarshal(b, &a)
	return a
}

// fileRequest sends a request for a conversation's file as the editor, and
// returns the answer's status and body.
func fileRequest(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+editorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConversationsAcrossHosts runs three hosts with python conversations
// on one real PostgreSQL, behind a real HAProxy: a conversation lives on
// the host where it first ran, and its runs and file requests sent to the
// others (directly, or through HAProxy) are forwarded there and see its
// files; a websocket
// attach on another host follows a run to its end; a request forged
// without the hosts' secret is refused. Then the conversation's host is
// killed mid-run: its caller's connection drops, the conversation answers
// session_unavailable naming it, a retry of the keyed call is in_progress
// and then interrupted once its lease runs out, the other hosts keep
// serving through HAProxy, and the restarted host rejoins with the
// conversation's files.
func TestConversationsAcrossHosts(t *testing.T) {
	bin := haproxyBinary(t)
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), slow(8*time.Minute))
	defer cancel()
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hosts := startClusterHosts(t, url, 3)
	front := freePort(t)
	hp := startHAProxy(t, bin, front, []*Host{hosts[0].Host, hosts[1].Host, hosts[2].Host})
	h1, h2, h3 := hosts[0], hosts[1], hosts[2]

	t.Run("a conversation's runs reach its host from any other", func(t *testing.T) {
		if a := pythonIn(ctx, h1.Addr, "chat", "open('notes.txt','w').write('kept on host1')\nprint('written')", ""); a.status != http.StatusOK || !strings.Contains(a.Result.Stdout, "written") {
			t.Fatalf("the first run, on host1: %d %s", a.status, a.raw)
		}
		if a := pythonIn(ctx, h2.Addr, "chat", "print(open('notes.txt').read())", ""); a.status != http.StatusOK || strings.TrimSpace(a.Result.Stdout) != "kept on host1" {
			t.Fatalf("the second run, sent to host2: %d %s; want it to read host1's file", a.status, a.raw)
		}
		for i := range 4 {
			if a := pythonIn(ctx, front, "chat", "print(open('notes.txt').read())", ""); a.status != http.StatusOK || strings.TrimSpace(a.Result.Stdout) != "kept on host1" {
				t.Fatalf("run %d through HAProxy: %d %s; want it to read host1's file", i, a.status, a.raw)
			}
		}
		// Its files, read and written through the other hosts.
		if code, body := fileRequest(t, "GET", h2.URL("/api/v1/sessions/chat/files/notes.txt"), ""); code != http.StatusOK || body != "kept on host1" {
			t.Errorf("GET its file on host2: %d %q; want host1's file", code, body)
		}
		if code, body := fileRequest(t, "PUT", h3.URL("/api/v1/sessions/chat/files/sent%20in.txt"), "sent to host3"); code != http.StatusOK && code != http.StatusCreated {
			t.Errorf("PUT a file on host3: %d %s", code, body)
		}
		if a := pythonIn(ctx, h1.Addr, "chat", "print(open('sent in.txt').read())", ""); strings.TrimSpace(a.Result.Stdout) != "sent to host3" {
			t.Errorf("the file PUT on host3, read by a run on host1: %d %s", a.status, a.raw)
		}
		if code, body := fileRequest(t, "GET", h3.URL("/api/v1/sessions/nowhere/files/notes.txt"), ""); code != http.StatusNotFound {
			t.Errorf("GET a file of a conversation no host holds: %d %s; want 404", code, body)
		}
		// Another conversation, first used on host3, lives there.
		if a := pythonIn(ctx, h3.Addr, "other", "open('notes.txt','w').write('kept on host3')", ""); a.status != http.StatusOK {
			t.Fatalf("a run of another conversation on host3: %d %s", a.status, a.raw)
		}
		if a := pythonIn(ctx, h1.Addr, "other", "print(open('notes.txt').read())", ""); strings.TrimSpace(a.Result.Stdout) != "kept on host3" {
			t.Fatalf("the other conversation, sent to host1: %d %s; want host3's file", a.status, a.raw)
		}
	})

	t.Run("an attach on another host follows the run", func(t *testing.T) {
		ws := h2.Dial(t)
		ws.Send(map[string]any{"type": "hello", "id": "h", "protocol": 1, "token": editorToken})
		if f := ws.Read(time.Minute); f.Str("type") != "hello" {
			t.Fatalf("hello: %v", f)
		}
		ws.Send(map[string]any{"type": "call", "id": "c1", "tool": "run_python", "session": "chat",
			"args": map[string]any{"code": "import time\nprint('one', flush=True)\ntime.sleep(3)\nprint('two', flush=True)"}})
		var run string
		for run == "" {
			f := ws.Read(time.Minute)
			switch f.Str("type") {
			case "stdout":
				run = f.Str("run")
			case "result", "error":
				t.Fatalf("the run ended before it printed: %v", f)
			}
		}
		ws.conn.Close()
		ws = h3.Dial(t)
		ws.Send(map[string]any{"type": "hello", "id": "h", "protocol": 1, "token": editorToken})
		ws.Read(time.Minute)
		ws.Send(map[string]any{"type": "attach", "id": "a1", "run": run, "after_seq": 0})
		var out strings.Builder
		for {
			f := ws.Read(time.Minute)
			if f.Str("type") == "stdout" {
				out.WriteString(f.Str("data"))
			}
			if f.Str("type") == "error" {
				t.Fatalf("attaching on host3 to a run of host1's: %v", f)
			}
			if f.Str("type") == "result" {
				break
			}
		}
		if !strings.Contains(out.String(), "two") {
			t.Errorf("the attach on host3 read %q; want the run's output to its end", out.String())
		}
	})

	t.Run("a request forged without the secret is refused", func(t *testing.T) {
		for _, sig := range []string{"", "v1 host2 0 YWRh 00", fmt.Sprintf("v1 host2 %d YWRh %s", time.Now().UnixMilli(), strings.Repeat("ab", 32))} {
			req, _ := http.NewRequest("POST", h1.URL("/internal/v1/calls"), strings.NewReader(`{"tool":"run_python","args":{"code":"print(1)"},"session":"chat"}`))
			if sig != "" {
				req.Header.Set("Toolhost-Forwarded", sig)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a call to host1 signed %q: %d %s; want 401", sig, resp.StatusCode, b)
			}
		}
	})

	t.Run("the conversation's host killed mid-run, then back", func(t *testing.T) {
		const key = "msg-9-tool-1"
		cut := make(chan sessionAnswer, 1)
		go func() {
			cut <- pythonIn(ctx, h1.Addr, "chat", "import time\nopen('during.txt','w').write('x')\nprint('going', flush=True)\ntime.sleep(120)", key)
		}()
		// And a run of the conversation relayed through host2, over its websocket.
		ws := h2.Dial(t)
		ws.Send(map[string]any{"type": "hello", "id": "h", "protocol": 1, "token": editorToken})
		ws.Read(time.Minute)
		// run_bash, a process of its own: the conversation's python cells
		// take turns in its one interpreter, so a second python run would
		// wait for the keyed one.
		ws.Send(map[string]any{"type": "call", "id": "c2", "tool": "run_bash", "session": "chat",
			"args": map[string]any{"command": "echo relayed; sleep 120"}})
		for {
			f := ws.Read(time.Minute)
			if f.Str("type") == "stdout" {
				break
			}
			if f.Str("type") == "result" || f.Str("type") == "error" {
				t.Fatalf("the relayed run ended before host1 was killed: %v", f)
			}
		}
		// The keyed run is going once its code wrote during.txt.
		for deadline := time.Now().Add(slow(time.Minute)); ; time.Sleep(100 * time.Millisecond) {
			if code, _ := fileRequest(t, "GET", h1.URL("/api/v1/sessions/chat/files/during.txt"), ""); code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the keyed run never started on host1:\n%s", h1.Stderr())
			}
		}
		killed := time.Now()
		h1.killHard(t)
		if a := <-cut; a.status != 0 {
			t.Errorf("the caller of host1 when it was killed: %d %s; want its connection dropped", a.status, a.raw)
		}
		for {
			f := ws.Read(slow(time.Minute))
			if f.Str("type") == "result" {
				t.Fatalf("the run relayed through host2 ended with a result though host1 was killed: %v", f)
			}
			if f.Str("type") == "error" {
				if f.ErrorCode() != "interrupted" || !strings.Contains(f.ErrorMessage(), "host1") {
					t.Errorf("the run relayed through host2 when host1 was killed ended %v; want interrupted, naming host1", f)
				}
				break
			}
		}
		a := pythonIn(ctx, h2.Addr, "chat", "print(1)", "")
		if a.status != http.StatusServiceUnavailable || a.code() != "session_unavailable" || !strings.Contains(a.raw, "host1") {
			t.Errorf("the conversation sent to host2 with host1 killed: %d %s; want 503 session_unavailable naming host1", a.status, a.raw)
		}
		if code, body := fileRequest(t, "GET", h3.URL("/api/v1/sessions/chat/files/notes.txt"), ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "session_unavailable") {
			t.Errorf("GET its file on host3 with host1 killed: %d %s; want 503 session_unavailable", code, body)
		}
		if a := pythonIn(ctx, front, "fresh", "print('still here')", ""); a.status != http.StatusOK {
			t.Errorf("a new conversation through HAProxy with host1 killed: %d %s; want the others to serve it", a.status, a.raw)
		}
		// The keyed call's retry, on another host: in_progress while host1's
		// lease lasts, then interrupted.
		var last sessionAnswer
		for deadline := time.Now().Add(slow(time.Minute)); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			last = pythonIn(ctx, h3.Addr, "chat", "import time\nopen('during.txt','w').write('x')\nprint('going', flush=True)\ntime.sleep(120)", key)
			if last.code() != "in_progress" && last.code() != "session_unavailable" {
				break
			}
		}
		if last.status != http.StatusConflict || last.code() != "interrupted" {
			t.Errorf("the keyed call retried on host3 after host1's lease ran out: %d %s; want 409 interrupted", last.status, last.raw)
		}
		t.Logf("host1's lease ran out (its keyed call interrupted) %s after it was killed", time.Since(killed).Round(100*time.Millisecond))

		restarted := time.Now()
		h1.Host = startHostIn(t, h1.dir, h1.Addr, h1.spec)
		hp.waitStatus(t, "host1", "UP", h1.Host)
		var back sessionAnswer
		for deadline := time.Now().Add(slow(time.Minute)); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if back = pythonIn(ctx, h2.Addr, "chat", "print(open('notes.txt').read() + open('during.txt').read())", ""); back.code() != "session_unavailable" {
				break
			}
		}
		t.Logf("the killed host's conversation answered session_unavailable for %s, until it was back: %s from its restart",
			time.Since(killed).Round(100*time.Millisecond), time.Since(restarted).Round(100*time.Millisecond))
		if back.status != http.StatusOK || strings.TrimSpace(back.Result.Stdout) != "kept on host1x" {
			t.Errorf("the conversation sent to host2 once host1 is back: %d %s; want its files, kept on host1", back.status, back.raw)
		}
		// What the store holds came through: the key stays interrupted, and
		// every conversation is listed, each on its host.
		if a := pythonIn(ctx, front, "chat", "import time\nopen('during.txt','w').write('x')\nprint('going', flush=True)\ntime.sleep(120)", key); a.code() != "interrupted" {
			t.Errorf("the keyed call retried once host1 is back: %d %s; want interrupted still", a.status, a.raw)
		}
		code, list := request(t, "GET", h3.URL("/api/v1/sessions"), editorToken, "")
		var names []string
		items, _ := list["sessions"].([]any)
		for _, it := range items {
			names = append(names, fmt.Sprint(it.(map[string]any)["session"]))
		}
		slices.Sort(names)
		if code != http.StatusOK || !slices.Equal(names, []string{"chat", "fresh", "other"}) {
			t.Errorf("the conversations listed on host3 after the kill: %d %v; want chat, fresh and other", code, list)
		}
	})
}
