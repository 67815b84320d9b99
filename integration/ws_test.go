package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// echoTool is a tool of the echo kind with params p00, p01, … (text),
// printing one line per argument every delayMS.
func echoTool(name string, params, delayMS int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\ndescription = \"Echo its arguments, one line each.\"\n", name)
	for i := range params {
		fmt.Fprintf(&b, "[[params]]\nname = \"p%02d\"\nkind = \"text\"\n", i)
	}
	fmt.Fprintf(&b, "[run]\ntype = \"echo\"\ndelay_ms = %d\n", delayMS)
	return b.String()
}

// echoArgs fills n params with values of size bytes.
func echoArgs(n, size int) map[string]any {
	args := map[string]any{}
	for i := range n {
		args[fmt.Sprintf("p%02d", i)] = fmt.Sprintf("%02d", i) + strings.Repeat("v", max(0, size-2))
	}
	return args
}

// dialWith opens a websocket with a header; readBuffer > 0 makes the
// client's socket buffer that small (a client slow to read is then felt
// by the host at once).
func dialWith(t testing.TB, h *Host, header http.Header, readBuffer int) *WS {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok && readBuffer > 0 {
			_ = tc.SetReadBuffer(readBuffer)
		}
		return c, err
	}}
	conn, resp, err := d.Dial("ws://"+h.Addr+"/api/v1/ws", header)
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dialling the websocket: %v %s", err, status)
	}
	t.Cleanup(func() { conn.Close() })
	return &WS{t: t, conn: conn}
}

// tryRead reads one frame, or says why it could not.
func (w *WS) tryRead(timeout time.Duration) (Frame, error) {
	_ = w.conn.SetReadDeadline(time.Now().Add(timeout))
	_, data, err := w.conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("a frame isn't JSON: %v: %s", err, data)
	}
	return f, nil
}

func hasSeq(f Frame) bool { _, ok := f["seq"]; return ok }

func TestWebsocketEveryMessageType(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{
		"say.toml":  echoTool("say", 2, 0),
		"slow.toml": echoTool("slow_say", 3, 10000),
	}})
	ws := h.Dial(t)

	ws.Send(map[string]any{"type": "hello", "id": "h", "client": "it", "protocol": 1})
	if f := ws.Read(10 * time.Second); f.Str("type") != "hello" || f["protocol"] != 1.0 || f["auth_required"] != false || f.Str("principal") != "local" || f.Str("role") != "admin" {
		t.Fatalf("hello = %v", f)
	}
	ws.Send(map[string]any{"type": "hello", "id": "h2", "protocol": 2})
	if f := ws.Read(10 * time.Second); f.ErrorCode() != "unsupported_protocol" || f.Str("id") != "h2" {
		t.Fatalf("hello for protocol 2 = %v", f)
	}
	ws.Send(map[string]any{"type": "ping", "id": "p"})
	if f := ws.Read(10 * time.Second); f.Str("type") != "pong" || f.Str("id") != "p" {
		t.Fatalf("ping = %v", f)
	}
	ws.Send(map[string]any{"type": "list_tools", "id": "t"})
	if f := ws.Read(10 * time.Second); f.Str("type") != "tools" || len(f["tools"].([]any)) != 2 {
		t.Fatalf("list_tools = %v", f)
	}

	// call: started, a line per argument, result.
	ws.Send(map[string]any{"type": "call", "id": "c", "tool": "say", "args": map[string]any{"p00": "a", "p01": "b"}, "session": "conv-1", "idempotency_key": "k-1"})
	frames := ws.UntilEnd("c", 30*time.Second)
	var got []string
	for i, f := range frames {
		if f.Seq() != i || f.Str("run") != frames[0].Str("run") {
			t.Errorf("frame %d = %v", i, f)
		}
		got = append(got, f.Str("type")+":"+f.Str("data"))
	}
	if strings.Join(got, "|") != "started:|stdout:p00=a\n|stdout:p01=b\n|result:" {
		t.Fatalf("call frames = %q", got)
	}
	run := frames[0].Str("run")

	// The run's record has the session and idempotency key.
	resp, err := http.Get(h.URL("/api/v1/runs/" + run))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if rec["session"] != "conv-1" || rec["idempotency_key"] != "k-1" || rec["principal"] != "local" || rec["stdout"] != "p00=a\np01=b\n" || rec["done"] != true || rec["last_seq"] != 3.0 {
		t.Fatalf("run record = %v", rec)
	}

	// attach to the ended run: its events after seq 1, again.
	ws.Send(map[string]any{"type": "attach", "id": "a", "run": run, "after_seq": 1})
	again := ws.UntilEnd("a", 30*time.Second)
	if len(again) != 2 || again[0].Seq() != 2 || again[1].Str("type") != "result" {
		t.Fatalf("attach after 1 = %v", again)
	}
	ws.Send(map[string]any{"type": "attach", "id": "a2", "run": "rnope"})
	if f := ws.Read(10 * time.Second); f.ErrorCode() != "unknown_run" || f.Str("id") != "a2" {
		t.Fatalf("attach to an unknown run = %v", f)
	}

	// cancel by the call's id, and by run id.
	ws.Send(map[string]any{"type": "call", "id": "s1", "tool": "slow_say", "args": echoArgs(3, 1)})
	ws.Send(map[string]any{"type": "call", "id": "s2", "tool": "slow_say", "args": echoArgs(3, 1)})
	var run2 string
	for run2 == "" {
		if f := ws.Read(10 * time.Second); f.Str("id") == "s2" {
			run2 = f.Str("run")
		}
	}
	ws.Send(map[string]any{"type": "cancel", "id": "s1"})
	ws.Send(map[string]any{"type": "cancel", "run": run2})
	ended := map[string]string{}
	for len(ended) < 2 {
		f := ws.Read(10 * time.Second)
		if f.Str("type") == "error" {
			ended[f.Str("id")] = f.ErrorCode()
		}
	}
	if ended["s1"] != "cancelled" || ended["s2"] != "cancelled" {
		t.Fatalf("cancelled runs ended with %v", ended)
	}
	ws.Send(map[string]any{"type": "cancel", "id": "x", "run": "rnope"})
	if f := ws.Read(10 * time.Second); f.ErrorCode() != "unknown_run" {
		t.Fatalf("cancel of an unknown run = %v", f)
	}
	ws.Send(map[string]any{"type": "call", "id": "u", "tool": "nope"})
	if f := ws.Read(10 * time.Second); f.ErrorCode() != "unknown_tool" || hasSeq(f) {
		t.Fatalf("call of an unknown tool = %v", f)
	}
}

func TestWebsocketBadFramesEachGetAnErrorAndTheConnectionGoesOn(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{"say.toml": echoTool("say", 1, 0)}})
	ws := h.Dial(t)
	cases := []struct {
		frame string
		code  string
		want  string
	}{
		{"not json", "bad_frame", "isn't valid JSON"},
		{`["a"]`, "bad_frame", "not a JSON object"},
		{`{"type":"dance","id":"x"}`, "bad_frame", `"dance" is not a message type`},
		{`{"id":"x"}`, "bad_frame", `has no "type"`},
		{`{"type":"call","tool":"say"}`, "bad_frame", `needs an "id"`},
		{`{"type":"call","id":"y"}`, "bad_frame", `needs a "tool"`},
		{`{"type":"attach","id":"y"}`, "bad_frame", `needs the "run"`},
		{`{"type":"cancel"}`, "bad_frame", "cancel needs"},
		{`{"type":"call","id":"z","tool":"say","args":{"p00":1}}`, "bad_args", "p00"},
		{`{"type":"call","id":"z","tool":"say","args":{"p00":"1"},"colour":"red"}`, "bad_frame", `unknown field "colour"`},
		{`{"type":"call","id":"big","tool":"say","args":{"p00":"` + strings.Repeat("x", 2<<20) + `"}}`, "too_large", "at most"},
	}
	for _, c := range cases {
		ws.Send(c.frame)
		f := ws.Read(10 * time.Second)
		if f.Str("type") != "error" || f.ErrorCode() != c.code || !strings.Contains(f.ErrorMessage(), c.want) {
			t.Errorf("frame %.60q: got %v, want %s saying %q", c.frame, f, c.code, c.want)
		}
	}
	if err := ws.conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if f := ws.Read(10 * time.Second); f.ErrorCode() != "bad_frame" || !strings.Contains(f.ErrorMessage(), "binary") {
		t.Errorf("binary frame: %v", f)
	}
	ws.Send(map[string]any{"type": "call", "id": "ok", "tool": "say", "args": map[string]any{"p00": "fine"}})
	if frames := ws.UntilEnd("ok", 30*time.Second); frames[len(frames)-1].Str("type") != "result" {
		t.Fatalf("the connection is not usable after bad frames: %v", frames)
	}
}

// Kill the connection three times during a run; each time reconnect and
// attach after the last seq received. Every event arrives exactly once,
// in order, and the run went on while nobody was connected.
func TestWebsocketRunOutlivesItsConnectionAndAttachResumesExactlyOnce(t *testing.T) {
	const n = 24
	h := startHost(t, hostSpec{Tools: map[string]string{"tick.toml": echoTool("tick", n, 100)}})
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "c", "tool": "tick", "args": echoArgs(n, 4)})
	var got []Frame
	last, run, drops := -1, "", 0
	for {
		f, err := ws.tryRead(30 * time.Second)
		if err != nil {
			t.Fatalf("reading: %v (after seq %d)", err, last)
		}
		if f.Seq() != last+1 || f.Str("id") != "c" {
			t.Fatalf("after seq %d got %v", last, f)
		}
		last, run = f.Seq(), f.Str("run")
		got = append(got, f)
		if f.Str("type") == "result" {
			break
		}
		if drops < 3 && last == 4+6*drops {
			// Cut the connection without a close handshake, stay away
			// while the run prints, then come back.
			_ = ws.conn.UnderlyingConn().Close()
			drops++
			time.Sleep(350 * time.Millisecond)
			ws = h.Dial(t)
			ws.Send(map[string]any{"type": "attach", "id": "c", "run": run, "after_seq": last})
		}
	}
	if drops != 3 || len(got) != n+2 {
		t.Fatalf("%d drops, %d events; want 3 drops and %d events", drops, len(got), n+2)
	}
	for i := range n {
		if want := fmt.Sprintf("p%02d=%02dvv\n", i, i); got[i+1].Str("data") != want {
			t.Fatalf("line %d = %q, want %q", i, got[i+1].Str("data"), want)
		}
	}
}

// hostLogCount counts lines of the host's log holding s.
func hostLogCount(h *Host, s string) int { return strings.Count(h.Stderr(), s) }

// A client that reads nothing while 20 runs print 1 MB each falls
// behind; meanwhile another client's run is served normally; then the
// slow client catches up by re-attaching and gets every event once.
func TestWebsocketSlowClientFallsBehindAndDoesNotDelayAFastOne(t *testing.T) {
	const params, size = 40, 25000 // 1 MB a run
	// Enough output to fill the kernel's socket buffers and the host's
	// 8 MiB per connection, with room to spare.
	runs := 8 + 4 + 8
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		var lo, def, hi int
		if _, err := fmt.Sscan(string(b), &lo, &def, &hi); err == nil && hi > 4<<20 {
			runs += (hi - 4<<20) / 1e6
		}
	}
	h := startHost(t, hostSpec{Config: manyRuns, Tools: map[string]string{
		"big.toml":   echoTool("big", params, 0),
		"small.toml": echoTool("small", 3, 50),
	}})
	slow := dialWith(t, h, nil, 64<<10)
	for i := range runs {
		slow.Send(map[string]any{"type": "call", "id": fmt.Sprintf("s%d", i), "tool": "big", "args": echoArgs(params, size)})
	}
	// The fast client's run, while the slow client reads nothing.
	fast := h.Dial(t)
	begin := time.Now()
	fast.Send(map[string]any{"type": "call", "id": "f", "tool": "small", "args": echoArgs(3, 3)})
	frames := fast.UntilEnd("f", 60*time.Second)
	took := time.Since(begin)
	if len(frames) != 5 || frames[4].Str("type") != "result" {
		t.Fatalf("the fast client's run: %v", frames)
	}
	if took > 30*time.Second { // it prints 3 lines 50 ms apart
		t.Errorf("the fast client's run took %v while another client stalled", took)
	}
	// The runs of the slow client end although it has read nothing.
	deadline := time.Now().Add(120 * time.Second)
	for hostLogCount(h, "run ended") < runs+1 {
		if time.Now().After(deadline) {
			t.Fatalf("the slow client's runs did not end while it read nothing; %d of %d ended", hostLogCount(h, "run ended")-1, runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the fast client's run took %v while the slow client read nothing", took)

	// Now the slow client reads: each run up to behind, then re-attached.
	last := map[string]int{}
	done, behinds := 0, 0
	for done < runs {
		f, err := slow.tryRead(60 * time.Second)
		if err != nil {
			t.Fatalf("the slow client: %v (%d runs done, %d behind)", err, done, behinds)
		}
		id := f.Str("id")
		prev, ok := last[id]
		if !ok {
			prev = -1
		}
		if f.Str("type") == "behind" {
			behinds++
			if int(f["last_seq"].(float64)) != prev {
				t.Fatalf("%s: behind at last_seq %v, but the last event received was %d", id, f["last_seq"], prev)
			}
			slow.Send(map[string]any{"type": "attach", "id": id, "run": f.Str("run"), "after_seq": prev})
			continue
		}
		if f.Seq() != prev+1 {
			t.Fatalf("%s: seq %d after %d", id, f.Seq(), prev)
		}
		last[id] = f.Seq()
		if f.Str("type") == "stdout" && len(f.Str("data")) != len("p00=")+size+1 {
			t.Fatalf("%s: a line of %d bytes", id, len(f.Str("data")))
		}
		if f.Str("type") == "result" {
			if f.Seq() != params+1 {
				t.Fatalf("%s ended at seq %d, want %d", id, f.Seq(), params+1)
			}
			done++
		}
	}
	if behinds == 0 {
		t.Fatalf("%d MB waited for a client that read nothing, and it was never told it fell behind", runs)
	}
	t.Logf("the slow client fell behind %d times and caught up", behinds)
}

// manyRuns lets the local caller have more runs going at once than the
// default max_running_per_token (8): for tests of many runs, not of the limit.
const manyRuns = "[runs]\nmax_running_per_token = 1024\n"

func TestWebsocket200ConcurrentClientsEachGetTheirResult(t *testing.T) {
	h := startHost(t, hostSpec{Config: manyRuns, Tools: map[string]string{"say.toml": echoTool("say", 2, 0)}})
	const clients = 200
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := websocket.Dialer{HandshakeTimeout: 60 * time.Second}
			conn, _, err := d.Dial("ws://"+h.Addr+"/api/v1/ws", nil)
			if err != nil {
				errs <- fmt.Errorf("client %d: dial: %w", i, err)
				return
			}
			defer conn.Close()
			args := map[string]any{"p00": fmt.Sprint(i), "p01": "x"}
			if err := conn.WriteJSON(map[string]any{"type": "call", "id": fmt.Sprint(i), "tool": "say", "args": args}); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(120 * time.Second))
			for {
				var f map[string]any
				if err := conn.ReadJSON(&f); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
				if f["type"] == "error" {
					errs <- fmt.Errorf("client %d: %v", i, f)
					return
				}
				if f["type"] == "result" {
					echoed := f["result"].(map[string]any)["echoed"].(map[string]any)
					if echoed["p00"] != fmt.Sprint(i) || f["id"] != fmt.Sprint(i) {
						errs <- fmt.Errorf("client %d got someone else's result: %v", i, f)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func sha(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

const (
	adminToken  = "adm-Xq7-token-for-tests"
	editorToken = "ed-K2p-token-for-tests"
	viewerToken = "vw-Z9m-token-for-tests"
)

func tokensConfig() string {
	return fmt.Sprintf(`[log]
level = "debug"

[[tokens]]
name = "ada"
sha256 = %q
role = "admin"

[[tokens]]
name = "eddie"
sha256 = %q
role = "editor"

[[tokens]]
name = "vera"
sha256 = %q
role = "viewer"
`, sha(adminToken), sha(editorToken), sha(viewerToken))
}

func request(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func TestTokens(t *testing.T) {
	h := startHost(t, hostSpec{Config: tokensConfig(), Tools: map[string]string{"say.toml": echoTool("say", 1, 0)}})
	tools, call := h.URL("/api/v1/tools"), h.URL("/api/v1/tools/say/call")

	// HTTP: no token or a wrong one gets 401 and nothing else.
	for _, tok := range []string{"", "wrong", sha(editorToken)} {
		code, body := request(t, "GET", tools, tok, "")
		if code != http.StatusUnauthorized || body["tools"] != nil || body["error"].(map[string]any)["code"] != "unauthorized" {
			t.Errorf("token %q: %d %v", tok, code, body)
		}
		if code, _ := request(t, "POST", call, tok, `{"p00":"x"}`); code != http.StatusUnauthorized {
			t.Errorf("call with token %q: %d", tok, code)
		}
	}
	if code, body := request(t, "GET", tools, viewerToken, ""); code != 200 || len(body["tools"].([]any)) != 1 {
		t.Errorf("viewer lists tools: %d %v", code, body)
	}
	// A viewer may not call; an editor may, and the run is theirs.
	if code, body := request(t, "POST", call, viewerToken, `{"p00":"x"}`); code != http.StatusForbidden || body["error"].(map[string]any)["code"] != "forbidden" {
		t.Errorf("viewer call: %d %v", code, body)
	}
	code, body := request(t, "POST", call, editorToken, `{"p00":"x"}`)
	if code != 200 {
		t.Fatalf("editor call: %d %v", code, body)
	}
	run := h.URL("/api/v1/runs/" + body["run"].(string))
	if code, rec := request(t, "GET", run, editorToken, ""); code != 200 || rec["principal"] != "eddie" {
		t.Errorf("the editor reads their run: %d %v", code, rec)
	}
	if code, _ := request(t, "GET", run, viewerToken, ""); code != http.StatusForbidden {
		t.Errorf("a viewer reads another's run: %d", code)
	}
	if code, rec := request(t, "GET", run, adminToken, ""); code != 200 || rec["principal"] != "eddie" {
		t.Errorf("an admin reads any run: %d %v", code, rec)
	}
	if code, _ := request(t, "GET", h.URL("/healthz"), "", ""); code != 200 {
		t.Errorf("/healthz needs no token, got %d", code)
	}

	// Websocket: a wrong header token gets 401; a browser signs in with hello.
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+h.Addr+"/api/v1/ws", http.Header{"Authorization": {"Bearer wrong"}}); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong header token on the websocket: %v", err)
	}
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "c", "tool": "say", "args": map[string]any{"p00": "x"}})
	if f := ws.Read(10 * time.Second); f.ErrorCode() != "unauthorized" {
		t.Errorf("a call before hello: %v", f)
	}
	if f := ws.Read(10 * time.Second); f.Str("type") != "closing" || f.ErrorCode() != "unauthorized" {
		t.Errorf("after a call before hello: %v; want the closing frame", f)
	}
	var ce *websocket.CloseError
	if _, err := ws.tryRead(10 * time.Second); !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != "unauthorized" {
		t.Errorf("after a call before hello: %v; want the close 1008 unauthorized", err)
	}
	ws = h.Dial(t)
	ws.Send(map[string]any{"type": "hello", "id": "h", "token": viewerToken})
	if f := ws.Read(10 * time.Second); f.Str("principal") != "vera" || f.Str("role") != "viewer" || f["auth_required"] != true {
		t.Errorf("viewer hello: %v", f)
	}
	ws.Send(map[string]any{"type": "call", "id": "c", "tool": "say", "args": map[string]any{"p00": "x"}})
	if f := ws.Read(10 * time.Second); f.ErrorCode() != "forbidden" {
		t.Errorf("viewer call over the websocket: %v", f)
	}
	ws = dialWith(t, h, http.Header{"Authorization": {"Bearer " + editorToken}}, 0)
	ws.Send(map[string]any{"type": "call", "id": "c", "tool": "say", "args": map[string]any{"p00": "x"}})
	if frames := ws.UntilEnd("c", 30*time.Second); frames[len(frames)-1].Str("type") != "result" {
		t.Errorf("editor call over the websocket: %v", frames)
	}

	// toolhost call: with --token, with TOOLHOST_TOKEN, without.
	cli := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(bins.toolhost, append([]string{"call", "--addr", h.Addr}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := cli(nil, "--token", editorToken, "say", "p00=hi"); code != 0 || !strings.Contains(out, "p00=hi") {
		t.Errorf("toolhost call --token: exit %d: %s", code, out)
	}
	if out, code := cli([]string{"TOOLHOST_TOKEN=" + editorToken}, "say", "p00=hi"); code != 0 {
		t.Errorf("toolhost call with TOOLHOST_TOKEN: exit %d: %s", code, out)
	}
	if out, code := cli([]string{"TOOLHOST_TOKEN="}, "say", "p00=hi"); code != 2 || !strings.Contains(out, "token") {
		t.Errorf("toolhost call without a token: exit %d: %s", code, out)
	}
	if out, code := cli(nil, "--token", viewerToken, "say", "p00=hi"); code != 2 || !strings.Contains(out, "forbidden") {
		t.Errorf("toolhost call as a viewer: exit %d: %s", code, out)
	}

	// Logs name principals, never tokens.
	logs := h.Stderr()
	for _, tok := range []string{adminToken, editorToken, viewerToken, "wrong"} {
		if tok != "wrong" && strings.Contains(logs, tok) {
			t.Errorf("the token %q is in the host's log", tok)
		}
	}
	if !strings.Contains(logs, "principal=eddie") {
		t.Errorf("the host's log does not name the principal:\n%s", logs)
	}
	if strings.Contains(logs, "NO TOKENS") {
		t.Error("a host with tokens warns that it has none")
	}
}

func TestCallExitCodes(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{"say.toml": echoTool("say", 1, 0), "slow.toml": echoTool("slow_say", 1, 10000)}})
	run := func(args ...string) int {
		cmd := exec.Command(bins.toolhost, append([]string{"call", "--addr", h.Addr}, args...)...)
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode()
	}
	if code := run("say", "p00=x"); code != 0 {
		t.Errorf("a result: exit %d, want 0", code)
	}
	if code := run("nope"); code != 2 {
		t.Errorf("an unknown tool: exit %d, want 2", code)
	}
	if code := run("--addr", "127.0.0.1:1", "say"); code != 2 {
		t.Errorf("no host: exit %d, want 2", code)
	}
	// A run error: cancel the CLI's run from another client. With --json
	// the CLI prints the started event, which names the run.
	cmd := exec.Command(bins.toolhost, "call", "--addr", h.Addr, "--json", "slow_say", "p00=x")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var started map[string]any
	if err := json.NewDecoder(stdout).Decode(&started); err != nil || started["type"] != "started" {
		t.Fatalf("the CLI's first line: %v, %v", started, err)
	}
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "cancel", "run": started["run"]})
	_, _ = io.Copy(io.Discard, stdout)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("a run that ended with an error: exit %d, want 1", code)
	}
}

func TestNoTokensMeansLoopbackOnlyAndALoudWarning(t *testing.T) {
	h := startHost(t, hostSpec{})
	if !strings.Contains(h.Stderr(), "[WARN]") || !strings.Contains(h.Stderr(), "NO TOKENS ARE CONFIGURED") {
		t.Errorf("a host without tokens does not warn:\n%s", h.Stderr())
	}
	dir := t.TempDir()
	path := writeConfig(t, dir, "0.0.0.0:0", hostSpec{})
	cmd := exec.Command(bins.toolhost, "serve", "--config", path)
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("serve with a non-loopback listen and no tokens did not exit")
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), "[[tokens]]") {
		t.Fatalf("serve on 0.0.0.0 without tokens: exit %d: %s", code, out)
	}
}

// rss is the resident memory of a process, in bytes.
func rss(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

// BenchmarkIdleConnectionMemory opens b.N websocket connections to the
// real host, each saying hello and then nothing, and reports how much the
// host's resident memory grew per connection.
func BenchmarkIdleConnectionMemory(b *testing.B) {
	h := startHost(b, hostSpec{Tools: map[string]string{"say.toml": echoTool("say", 1, 0)}})
	pid := h.cmd.Process.Pid
	warm := h.Dial(b)
	warm.Send(map[string]any{"type": "hello"})
	warm.Read(10 * time.Second)
	time.Sleep(200 * time.Millisecond)
	before := rss(b, pid)
	b.ResetTimer()
	conns := make([]*WS, b.N)
	for i := range conns {
		conns[i] = h.Dial(b)
		conns[i].Send(map[string]any{"type": "hello", "id": "h"})
	}
	for _, c := range conns {
		c.Read(30 * time.Second)
	}
	b.StopTimer()
	time.Sleep(200 * time.Millisecond)
	after := rss(b, pid)
	b.ReportMetric(float64(after-before)/float64(b.N), "host-bytes/conn")
}

// BenchmarkCallToFirstLine measures, through the real echo plugin, the
// time from sending a call to receiving the frame of the first line it
// prints: dispatch, the plugin's gRPC stream, the print, and the way back.
// It bounds print-to-frame from above. p50 and p99 in microseconds.
func BenchmarkCallToFirstLine(b *testing.B) {
	h := startHost(b, hostSpec{Tools: map[string]string{"say.toml": echoTool("say", 1, 0)}})
	ws := h.Dial(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprint(i)
		begin := time.Now()
		ws.Send(map[string]any{"type": "call", "id": id, "tool": "say", "args": map[string]any{"p00": "x"}})
		for {
			f := ws.Read(30 * time.Second)
			if f.Str("id") == id && f.Str("type") == "stdout" {
				lat = append(lat, time.Since(begin))
			}
			if f.Str("id") == id && (f.Str("type") == "result" || f.Str("type") == "error") {
				break
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// proxy forwards TCP to a host and can cut every connection it carries.
type proxy struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.accepted++
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// toolhost call, cut off mid-run, reconnects and re-attaches: it prints
// every line once and exits 0.
func TestCLICallResumesAfterTheConnectionDrops(t *testing.T) {
	const n = 8
	h := startHost(t, hostSpec{Tools: map[string]string{"tick.toml": echoTool("tick", n, 200)}})
	p := newProxy(t, h.Addr)
	args := []string{"call", "--addr", p.ln.Addr().String(), "tick"}
	for i := range n {
		args = append(args, fmt.Sprintf("p%02d=%d", i, i))
	}
	cmd := exec.Command(bins.toolhost, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	buf := make([]byte, 1)
	for strings.Count(out.String(), "\n") < 2 {
		if _, err := stdout.Read(buf); err != nil {
			t.Fatalf("the CLI printed %q before: %v", out.String(), err)
		}
		out.Write(buf)
	}
	p.mu.Lock()
	before := p.accepted
	p.mu.Unlock()
	p.cut()
	rest, _ := io.ReadAll(stdout)
	out.Write(rest)
	_ = cmd.Wait()
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "p%02d=%d\n", i, i)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.HasPrefix(out.String(), want.String()+"{") {
		t.Fatalf("exit %d, printed %q (stderr %q); want every line once, then the result", code, out.String(), stderr.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accepted <= before {
		t.Fatal("the CLI finished without opening a new connection after the cut")
	}
}

// BenchmarkPrintToFrameThroughPlugin measures print-to-frame end to end:
// a plugin (host/api/testdata/latency-kind) prints a line holding the time
// it was printed, every 2 ms; the client takes the time the frame holding
// it is decoded. Plugin gRPC stream, host, websocket: p50 and p99 in
// microseconds.
func BenchmarkPrintToFrameThroughPlugin(b *testing.B) {
	dir := b.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "toolhost-plugin-latency"), "../host/api/testdata/latency-kind")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the latency kind: %v\n%s", err, out)
	}
	h := startHost(b, hostSpec{PluginDir: dir, Tools: map[string]string{"lat.toml": `name = "lat"
description = "Print timestamps."
[[params]]
name = "lines"
kind = "integer"
[[params]]
name = "every_ms"
kind = "integer"
[run]
type = "latency"
`}})
	ws := h.Dial(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	ws.Send(map[string]any{"type": "call", "id": "c", "tool": "lat", "args": map[string]any{"lines": b.N, "every_ms": 2}})
	for len(lat) < b.N {
		_ = ws.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, data, err := ws.conn.ReadMessage()
		at := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		var f struct{ Type, Data string }
		if err := json.Unmarshal(data, &f); err != nil {
			b.Fatal(err)
		}
		if f.Type == "error" {
			b.Fatalf("the run failed: %s", data)
		}
		if f.Type != "stdout" {
			continue
		}
		for _, line := range strings.Fields(f.Data) { // a chunk may hold more than one line
			var ns int64
			fmt.Sscanf(line, "%d", &ns)
			lat = append(lat, at.Sub(time.Unix(0, ns)))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}
