package integration

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestHostsBehindHAProxyDrainWhenStopped runs examples/haproxy/haproxy.cfg with real HAProxy in
// front of three hosts: calls over HTTP and the websocket go through it; a host sent SIGTERM
// drains (its /healthz answers 503 while it serves on), HAProxy marks it down on that answer
// while the host still takes calls, a steady stream of calls through HAProxy sees no failure
// throughout, and the host then exits.
func TestHostsBehindHAProxyDrainWhenStopped(t *testing.T) {
	bin := haproxyBinary(t)
	spec := hostSpec{
		Config: tokensConfig(),
		Tools: map[string]string{
			"say.toml":      echoTool("say", 1, 20),
			"slow_say.toml": echoTool("slow_say", 3, 1000),
		},
		// Far longer than HAProxy needs to see the drain (inter 1s x fall 2 in the example),
		// so that a slow machine sees it too; a drain is cut short by nothing here.
		DrainSeconds: 10,
	}
	hosts := []*Host{startHost(t, spec), startHost(t, spec), startHost(t, spec)}
	front := freePort(t)
	hp := startHAProxy(t, bin, front, hosts)

	// Through HAProxy: a plain HTTP call, and one over the websocket.
	if err := callHTTP(http.DefaultClient, front, "over http"); err != nil {
		t.Fatalf("an HTTP call through HAProxy: %v", err)
	}
	if err := callWebsocket(front, "say", "over the websocket", 30*time.Second); err != nil {
		t.Fatalf("a websocket call through HAProxy: %v", err)
	}

	// The host to stop: a websocket straight to it, with a call running across the SIGTERM.
	victim := hosts[1]
	direct := dialWS(t, victim.Addr)
	direct.Send(map[string]any{"type": "call", "id": "across", "tool": "slow_say", "args": echoArgs(3, 4)})
	if f := direct.Read(slow(30 * time.Second)); f.Str("type") != "started" {
		t.Fatalf("the call across the stop did not start: %v", f)
	}

	// A steady stream of calls through HAProxy, over HTTP and the websocket, from before the
	// SIGTERM until after the host exited.
	s := newCallStream(front)
	s.start(4)
	defer s.stop()
	s.waitCalls(t, 20)

	sigterm := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	check := hp.waitStatus(t, "host2", "DOWN", victim)
	t.Logf("HAProxy marked the stopping host down %s after its SIGTERM", time.Since(sigterm).Round(time.Millisecond))
	// HAProxy took it out on its answer (L7STS: it answered, not with 200), not because it
	// stopped taking connections (L4CON); and it still serves: it has not stopped.
	if check != "L7STS" {
		t.Errorf("HAProxy marked the stopping host down with check status %q, want L7STS (it answered /healthz with 503)", check)
	}
	select {
	case <-victim.done:
		t.Fatalf("the host exited before HAProxy marked it down:\n%s", victim.Stderr())
	default:
	}
	if strings.Contains(victim.Stderr(), "drained:") {
		t.Errorf("the host stopped taking calls before HAProxy marked it down:\n%s", victim.Stderr())
	}
	code, health := request(t, "GET", victim.URL("/healthz"), "", "")
	if code != http.StatusServiceUnavailable || health["status"] != "draining" {
		t.Errorf("the draining host's /healthz: %d %v, want 503 and status draining", code, health)
	}
	if err := callHTTP(http.DefaultClient, victim.Addr, "straight to the draining host"); err != nil {
		t.Errorf("a new call straight to the draining host: %v", err)
	}
	direct.Send(map[string]any{"type": "call", "id": "during", "tool": "say", "args": echoArgs(1, 4)})
	ends := map[string]Frame{}
	for len(ends) < 2 {
		f := direct.Read(slow(30 * time.Second))
		if kind := f.Str("type"); kind == "result" || kind == "error" {
			ends[f.Str("id")] = f
		}
	}
	if f := ends["during"]; f.Str("type") != "result" {
		t.Errorf("a new call on the draining host's open websocket ended with %v", f)
	}
	if f := ends["across"]; f.Str("type") != "result" {
		t.Errorf("the call running across the SIGTERM ended with %v", f)
	}

	// Then the host stops as before: its open websockets are told so, and it exits.
	if f := readUntilClosing(direct, slow(60*time.Second)); f.ErrorCode() != "shutting_down" {
		t.Errorf("the websocket open to the stopping host got %v, want closing with shutting_down", f)
	}
	select {
	case <-victim.done:
	case <-time.After(slow(60 * time.Second)):
		t.Fatalf("the host did not exit after its drain:\n%s", victim.Stderr())
	}
	t.Logf("the host exited %s after its SIGTERM", time.Since(sigterm).Round(time.Millisecond))
	if code := victim.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the drained host exited with %d, want 0:\n%s", code, victim.Stderr())
	}
	if os.Getenv("HAPROXY_TEST_LOG") != "" {
		t.Logf("the host's log:\n%s", victim.Stderr())
	}
	for _, want := range []string{"draining: /healthz answers 503", "drained: no new calls are taken"} {
		if !strings.Contains(victim.Stderr(), want) {
			t.Errorf("the host's log lacks %q:\n%s", want, victim.Stderr())
		}
	}
	// The stream goes on to the two hosts left.
	s.waitCalls(t, s.ok.Load()+20)
	s.stop()
	if n := s.failures(); len(n) > 0 {
		t.Errorf("%d of %d calls through HAProxy failed while a host stopped; the first: %s\nHAProxy's log:\n%s",
			len(n), int(s.ok.Load())+len(n), n[0], hp.log())
	}
	t.Logf("%d calls through HAProxy (HTTP and websocket) succeeded while a host drained and stopped", s.ok.Load())

	// The hosts left: a second SIGTERM cuts the drain short.
	for _, h := range []*Host{hosts[0], hosts[2]} {
		if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if !h.WaitLog(t, "draining: /healthz answers 503", slow(30*time.Second)) {
			t.Fatalf("the host did not drain on SIGTERM:\n%s", h.Stderr())
		}
		if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.done:
		case <-time.After(slow(60 * time.Second)):
			t.Fatalf("the host did not exit after a second SIGTERM:\n%s", h.Stderr())
		}
		if !strings.Contains(h.Stderr(), "the drain was cut short") || strings.Contains(h.Stderr(), "drained:") {
			t.Errorf("a second SIGTERM did not cut the drain short:\n%s", h.Stderr())
		}
	}
}

// haproxyBinary is HAProxy's path; the test is skipped without it.
func haproxyBinary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("haproxy is not installed: `make haproxy` installs it (apt-get install haproxy); this test runs a real HAProxy")
	return ""
}

// haproxyProc is a running HAProxy.
type haproxyProc struct {
	sock string
	mu   sync.Mutex
	out  bytes.Buffer
}

func (p *haproxyProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *haproxyProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startHAProxy runs HAProxy in the foreground (-db) with examples/haproxy/haproxy.cfg, its
// frontend on front and its servers the hosts, and returns once it says each host is UP.
func startHAProxy(t testing.TB, bin, front string, hosts []*Host) *haproxyProc {
	t.Helper()
	dir := t.TempDir()
	p := &haproxyProc{sock: filepath.Join(dir, "admin.sock")}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(t, front, p.sock, hosts)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c refuses the config made from the example: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-f", cfg, "-db")
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	for i, h := range hosts {
		p.waitStatus(t, fmt.Sprintf("host%d", i+1), "UP", h)
	}
	return p
}

// haproxyConfig is examples/haproxy/haproxy.cfg with the test's places: the frontend's bind, the
// stats socket, the servers (the example's servers beyond the hosts left out), and the log to
// stderr. The lines that run HAProxy as its own user in a chroot are left out (they are about
// privilege, which this test does not look at).
func haproxyConfig(t testing.TB, front, sock string, hosts []*Host) string {
	t.Helper()
	example, err := os.ReadFile("../examples/haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	found := map[string]int{}
	for _, line := range strings.Split(string(example), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			out.WriteString(line + "\n")
			continue
		}
		switch {
		case f[0] == "log" && len(f) > 1 && f[1] != "global":
			line = "    log stderr format raw local0 info"
		case f[0] == "stats" && len(f) > 1 && f[1] == "socket":
			line = "    stats socket " + sock + " mode 600 level admin"
		case f[0] == "chroot" || f[0] == "user" || f[0] == "group":
			line = "    # " + strings.TrimSpace(line) + " (left out by the test)"
		case f[0] == "bind":
			line = "    bind " + front
		case f[0] == "server":
			n := found["server"]
			if f[1] != fmt.Sprintf("host%d", n+1) {
				t.Fatalf("examples/haproxy/haproxy.cfg's server %d is named %q; the test expects host%d", n+1, f[1], n+1)
			}
			if n >= len(hosts) {
				line = "    # " + strings.TrimSpace(line) + " (no such host in the test)"
			} else {
				line = fmt.Sprintf("    server %s %s", f[1], hosts[n].Addr)
			}
		default:
			out.WriteString(line + "\n")
			continue
		}
		found[f[0]]++
		out.WriteString(line + "\n")
	}
	for _, k := range []string{"log", "stats", "bind", "server"} {
		if found[k] == 0 {
			t.Fatalf("examples/haproxy/haproxy.cfg has no %s line for the test to place", k)
		}
	}
	if found["server"] < len(hosts) {
		t.Fatalf("examples/haproxy/haproxy.cfg has %d servers, fewer than the test's %d hosts", found["server"], len(hosts))
	}
	return out.String()
}

// servers reads the toolhost backend's servers from HAProxy's stats socket ("show stat"):
// each server's columns, by column name, by server name.
func (p *haproxyProc) servers() (map[string]map[string]string, error) {
	conn, err := net.DialTimeout("unix", p.sock, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(strings.TrimSpace(string(b)), "# ")))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) < 2 {
		return nil, fmt.Errorf("show stat: %v: %q", err, b)
	}
	out := map[string]map[string]string{}
	for _, row := range rows[1:] {
		cols := map[string]string{}
		for i, name := range rows[0] {
			if i < len(row) {
				cols[name] = row[i]
			}
		}
		if cols["pxname"] == "toolhost" {
			out[cols["svname"]] = cols
		}
	}
	return out, nil
}

// stat reads each server's status and last check's status from HAProxy's stats socket.
func (p *haproxyProc) stat() (map[string][2]string, error) {
	servers, err := p.servers()
	if err != nil {
		return nil, err
	}
	out := map[string][2]string{}
	for name, cols := range servers {
		if _, ok := cols["check_status"]; ok {
			out[name] = [2]string{cols["status"], cols["check_status"]}
		}
	}
	return out, nil
}

// waitStatus waits until HAProxy says server is in status (UP, DOWN), and returns its last
// check's status.
func (p *haproxyProc) waitStatus(t testing.TB, server, status string, h *Host) string {
	t.Helper()
	var last map[string][2]string
	for deadline := time.Now().Add(slow(60 * time.Second)); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		st, err := p.stat()
		if err != nil {
			continue
		}
		last = st
		if st[server][0] == status {
			return st[server][1]
		}
	}
	t.Fatalf("HAProxy did not say %s is %s; it says %v\nHAProxy's log:\n%s\nthe host's log:\n%s", server, status, last, p.log(), h.Stderr())
	return ""
}

// callHTTP calls say over HTTP at addr, as the editor.
func callHTTP(client *http.Client, addr, text string) error {
	body, _ := json.Marshal(map[string]any{"p00": text})
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/tools/say/call", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+editorToken)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(text)) {
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return nil
}

// callWebsocket opens a websocket at addr as the editor, calls tool, and waits for its result.
func callWebsocket(addr, tool, text string, timeout time.Duration) error {
	d := websocket.Dialer{HandshakeTimeout: timeout}
	conn, resp, err := d.Dial("ws://"+addr+"/api/v1/ws", http.Header{"Authorization": {"Bearer " + editorToken}})
	if err != nil {
		if resp != nil {
			return fmt.Errorf("dialling: %v (%s)", err, resp.Status)
		}
		return fmt.Errorf("dialling: %v", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if err := conn.WriteJSON(map[string]any{"type": "call", "id": "c", "tool": tool, "args": map[string]any{"p00": text}}); err != nil {
		return err
	}
	for {
		var f Frame
		if err := conn.ReadJSON(&f); err != nil {
			return fmt.Errorf("reading: %v", err)
		}
		if f.Str("id") != "c" {
			continue
		}
		switch f.Str("type") {
		case "result":
			if b, _ := json.Marshal(f); !bytes.Contains(b, []byte(text)) {
				return fmt.Errorf("the result lacks the text: %s", b)
			}
			return nil
		case "error":
			return fmt.Errorf("the call ended with %s: %s", f.ErrorCode(), f.ErrorMessage())
		}
	}
}

// dialWS opens a websocket straight to a host, as the editor.
func dialWS(t *testing.T, addr string) *WS {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/api/v1/ws", http.Header{"Authorization": {"Bearer " + editorToken}})
	if err != nil {
		t.Fatalf("dialling the websocket: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &WS{t: t, conn: conn}
}

// readUntilClosing reads frames until the closing frame.
func readUntilClosing(w *WS, timeout time.Duration) Frame {
	for {
		if f := w.Read(timeout); f.Str("type") == "closing" {
			return f
		}
	}
}

// callStream keeps calls going through HAProxy, each worker alternating an HTTP call (on a
// kept-alive connection) and a websocket call (on a new websocket), and counts them.
type callStream struct {
	addr   string
	ok     atomic.Int64
	mu     sync.Mutex
	failed []string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newCallStream(addr string) *callStream {
	ctx, cancel := context.WithCancel(context.Background())
	return &callStream{addr: addr, ctx: ctx, cancel: cancel}
}

func (s *callStream) start(workers int) {
	for w := range workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			client := &http.Client{Timeout: slow(60 * time.Second), Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for i := 0; s.ctx.Err() == nil; i++ {
				text := fmt.Sprintf("w%d-%d", w, i)
				var err error
				if i%2 == 0 {
					err = callHTTP(client, s.addr, text)
				} else {
					err = callWebsocket(s.addr, "say", text, slow(60*time.Second))
				}
				if err != nil {
					s.mu.Lock()
					s.failed = append(s.failed, fmt.Sprintf("%s at %s: %v", text, time.Now().Format("15:04:05.000"), err))
					s.mu.Unlock()
					continue
				}
				s.ok.Add(1)
			}
		}()
	}
}

// waitCalls waits until n calls succeeded.
func (s *callStream) waitCalls(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(slow(60 * time.Second)); s.ok.Load() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the calls through HAProxy did not reach %d (%d ok); failures: %v", n, s.ok.Load(), s.failures())
		}
	}
}

func (s *callStream) stop() {
	s.cancel()
	s.wg.Wait()
}

func (s *callStream) failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failed...)
}
