package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client"
)

// jsonServer answers /items/{id} with a JSON document, and /slow after a
// pause.
func jsonServer(t testing.TB) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/items/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %q, "name": "item %s"}`, r.PathValue("id"), r.PathValue("id"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(20 * time.Second):
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `{"slow": true}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func getItemTool(base string) string {
	return fmt.Sprintf(`name = "get_item"
description = "Fetch an item."
effect = "read"

[[params]]
name = "id"
kind = "text"
required = true

[run]
type = "http"
url = "%s/items/{{id}}"
pick = "name"
`, base)
}

func slowTool(base string) string {
	return fmt.Sprintf(`name = "slow"
description = "A slow request."
[run]
type = "http"
url = "%s/slow"
`, base)
}

func TestHTTPToolOverWebsocketStreamsEventsInOrder(t *testing.T) {
	srv := jsonServer(t)
	h := startHost(t, hostSpec{
		Config: "[http]\nallow_private = true\n",
		Tools:  map[string]string{"get_item.toml": getItemTool(srv.URL)},
	})
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "c1", "tool": "get_item", "args": map[string]any{"id": "a/b 7"}})
	frames := ws.UntilEnd("c1", 30*time.Second)
	if len(frames) != 2 {
		t.Fatalf("want started and result, got %v", frames)
	}
	started, result := frames[0], frames[1]
	if started.Str("type") != "started" || started.Seq() != 0 || !strings.HasPrefix(started.Str("run"), "r") {
		t.Errorf("first frame = %v", started)
	}
	if result.Str("type") != "result" || result.Seq() != 1 || result.Str("run") != started.Str("run") {
		t.Errorf("last frame = %v", result)
	}
	// The param was URL-escaped into the path, and pick took the name.
	if result["result"] != "item a/b 7" {
		t.Errorf("result = %#v", result["result"])
	}
}

func TestHTTPToolEchoKindStreamsStdoutBeforeResult(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{"echo.toml": `
name = "say"
description = "Say things slowly."
[[params]]
name = "a"
kind = "text"
[[params]]
name = "b"
kind = "integer"
[run]
type = "echo"
delay_ms = 300
`}})
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "s", "tool": "say", "args": map[string]any{"a": "x", "b": 2}})
	var got []string
	var when []time.Time
	for len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "result") && !strings.HasPrefix(got[len(got)-1], "error") {
		f := ws.Read(30 * time.Second)
		got = append(got, f.Str("type")+":"+f.Str("data"))
		when = append(when, time.Now())
		if f.Seq() != len(got)-1 {
			t.Errorf("frame %d has seq %d", len(got)-1, f.Seq())
		}
	}
	want := []string{"started:", "stdout:a=x\n", "stdout:b=2\n", "result:"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("frames = %q, want %q", got, want)
	}
	// Streamed as printed: the first line arrived well before the result.
	if when[3].Sub(when[1]) < 200*time.Millisecond {
		t.Errorf("the first line came %v before the result: output was not streamed", when[3].Sub(when[1]))
	}
}

func TestPrivateAddressRefusedUnlessAllowed(t *testing.T) {
	srv := jsonServer(t)
	h := startHost(t, hostSpec{Tools: map[string]string{"get_item.toml": getItemTool(srv.URL)}})
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "p", "tool": "get_item", "args": map[string]any{"id": "1"}})
	frames := ws.UntilEnd("p", 30*time.Second)
	last := frames[len(frames)-1]
	if last.ErrorCode() != "private_address" || !strings.Contains(last.ErrorMessage(), "127.0.0.1") || !strings.Contains(last.ErrorMessage(), "allow_private") {
		t.Fatalf("want a private_address refusal naming the address and the setting, got %v", last)
	}
}

func TestCallEndpointForCurlUsers(t *testing.T) {
	srv := jsonServer(t)
	h := startHost(t, hostSpec{
		Config: "[http]\nallow_private = true\n",
		Tools:  map[string]string{"get_item.toml": getItemTool(srv.URL)},
	})
	code, body := postJSON(t, h.URL("/api/v1/tools/get_item/call"), `{"id": "9"}`)
	if code != 200 || body["result"] != "item 9" {
		t.Fatalf("call = %d %v", code, body)
	}
	code, body = postJSON(t, h.URL("/api/v1/tools/get_item/call"), `{"idd": "9"}`)
	e, _ := body["error"].(map[string]any)
	if code != 400 || e["code"] != "bad_args" || !strings.Contains(e["message"].(string), `"idd"`) {
		t.Fatalf("unknown arg = %d %v", code, body)
	}
	code, body = postJSON(t, h.URL("/api/v1/tools/get_item/call"), `{"id": 9}`)
	e, _ = body["error"].(map[string]any)
	if code != 400 || !strings.Contains(e["message"].(string), `argument "id" must be text`) {
		t.Fatalf("wrong type = %d %v", code, body)
	}
	code, body = postJSON(t, h.URL("/api/v1/tools/get_item/call"), `{}`)
	e, _ = body["error"].(map[string]any)
	if code != 400 || e["message"] != `argument "id" is required` {
		t.Fatalf("missing arg = %d %v", code, body)
	}
	code, _ = postJSON(t, h.URL("/api/v1/tools/nope/call"), `{}`)
	if code != 404 {
		t.Fatalf("unknown tool = %d", code)
	}
}

func TestToolListIsFunctionSpecs(t *testing.T) {
	srv := jsonServer(t)
	h := startHost(t, hostSpec{Tools: map[string]string{"get_item.toml": getItemTool(srv.URL)}})
	resp, err := http.Get(h.URL("/api/v1/tools"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Tools []client.Tool `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Type != "function" || list.Tools[0].Function.Name != "get_item" {
		t.Fatalf("tools = %+v", list)
	}
	p := list.Tools[0].Function.Parameters
	b, _ := json.Marshal(p)
	if string(b) != `{"additionalProperties":false,"properties":{"id":{"type":"string"}},"required":["id"],"type":"object"}` {
		t.Errorf("parameters = %s", b)
	}
}

func TestCheckEndpointSavesNothing(t *testing.T) {
	h := startHost(t, hostSpec{})
	resp, err := http.Post(h.URL("/api/v1/tools/check"), "application/toml", strings.NewReader(getItemTool("http://example.com")))
	if err != nil {
		t.Fatal(err)
	}
	var ok map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&ok)
	resp.Body.Close()
	tool, _ := ok["tool"].(map[string]any)
	run, _ := tool["run"].(map[string]any)
	if resp.StatusCode != 200 || run["method"] != "GET" {
		t.Fatalf("check = %d %v", resp.StatusCode, ok)
	}
	resp, err = http.Post(h.URL("/api/v1/tools/check"), "application/toml", strings.NewReader("name = \"x\"\ndescription = \"d\"\n[run]\ntype = \"http\"\nurl = \"ftp://x/{{nope}}\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	var bad struct {
		Errors []struct {
			Line  int    `json:"line"`
			Field string `json:"field"`
		} `json:"errors"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&bad)
	resp.Body.Close()
	if resp.StatusCode != 422 || len(bad.Errors) == 0 || bad.Errors[0].Field != "run.url" || bad.Errors[0].Line != 5 {
		t.Fatalf("bad check = %d %+v", resp.StatusCode, bad)
	}
	r, _ := http.Get(h.URL("/api/v1/tools"))
	var list struct{ Tools []any }
	_ = json.NewDecoder(r.Body).Decode(&list)
	r.Body.Close()
	if len(list.Tools) != 0 {
		t.Fatalf("check saved a tool: %v", list.Tools)
	}
}

func TestWrongPinIsRefusedWithTheLineToAdd(t *testing.T) {
	srv := jsonServer(t)
	right := pin(t, "http")
	h := startHost(t, hostSpec{
		Pins:  map[string]string{"http": strings.Repeat("ab", 32), "echo": pin(t, "echo")},
		Tools: map[string]string{"get_item.toml": getItemTool(srv.URL)},
	})
	h.WaitLog(t, "not served", 5*time.Second)
	log := h.Stderr()
	if !strings.Contains(log, "does not match its pin") || !strings.Contains(log, `http = "`+right+`"`) {
		t.Fatalf("the log does not refuse the binary with the line to add:\n%s", log)
	}
	if !strings.Contains(log, "get_item.toml") || !strings.Contains(log, "not served") {
		t.Errorf("the http tool should be reported as not served:\n%s", log)
	}
	resp, err := http.Get(h.URL("/healthz"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the host stopped serving: %v", err)
	}
	resp.Body.Close()

	// Unpinned: the same, with the line to add.
	h2 := startHost(t, hostSpec{Pins: map[string]string{"echo": pin(t, "echo")}})
	h2.WaitLog(t, `http = "`+right+`"`, 5*time.Second)
	if !strings.Contains(h2.Stderr(), "is not pinned") || !strings.Contains(h2.Stderr(), `http = "`+right+`"`) {
		t.Fatalf("an unpinned plugin was not refused with the line to add:\n%s", h2.Stderr())
	}
}

// pluginPID finds the running plugin of a kind among the host's children.
func pluginPID(t *testing.T, h *Host, kind string) int {
	t.Helper()
	pid := pluginPIDOf(h.cmd.Process.Pid, kind)
	if pid == 0 {
		t.Fatalf("no toolhost-plugin-%s process under the host", kind)
	}
	return pid
}

func TestKilledPluginEndsRunWithPluginCrashedAndIsRestarted(t *testing.T) {
	srv := jsonServer(t)
	h := startHost(t, hostSpec{
		Config: "[http]\nallow_private = true\n",
		Tools:  map[string]string{"slow.toml": slowTool(srv.URL), "get_item.toml": getItemTool(srv.URL)},
	})
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "slow", "tool": "slow"})
	if f := ws.Read(10 * time.Second); f.Str("type") != "started" {
		t.Fatalf("first frame = %v", f)
	}
	time.Sleep(300 * time.Millisecond) // the request is in flight in the plugin
	pid := pluginPID(t, h, "http")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	frames := ws.UntilEnd("slow", 15*time.Second)
	last := frames[len(frames)-1]
	if last.ErrorCode() != "plugin_crashed" {
		t.Fatalf("want plugin_crashed, got %v", last)
	}
	// The plugin comes back and the next call succeeds.
	ws.Send(map[string]any{"type": "call", "id": "next", "tool": "get_item", "args": map[string]any{"id": "2"}})
	frames = ws.UntilEnd("next", 30*time.Second)
	if last := frames[len(frames)-1]; last["result"] != "item 2" {
		t.Fatalf("the call after the crash = %v", last)
	}
	if newPID := pluginPID(t, h, "http"); newPID == pid {
		t.Fatalf("the plugin was not restarted (pid %d)", pid)
	}
}

func TestMalformedToolFilesAreReportedAndGoodOnesServed(t *testing.T) {
	srv := jsonServer(t)
	spec := hostSpec{Tools: map[string]string{
		"get_item.toml":  getItemTool(srv.URL),
		"unknown.toml":   "name = \"u\"\ndescription = \"d\"\ntimeout = 3\n[run]\ntype = \"http\"\nurl = \"http://x\"\n",
		"wrongtype.toml": "name = \"w\"\ndescription = 7\n[run]\ntype = \"http\"\nurl = \"http://x\"\n",
		"badname.toml":   "name = \"Bad-Name\"\ndescription = \"d\"\n[run]\ntype = \"http\"\nurl = \"http://x\"\n",
		"nokind.toml":    "name = \"k\"\ndescription = \"d\"\n[run]\ntype = \"nosuchkind\"\n",
	}}
	h := startHost(t, spec)
	for _, want := range []string{"unknown.toml:3", "wrongtype.toml:2", "badname.toml:1", "nokind.toml:4"} {
		if !h.WaitLog(t, want, 5*time.Second) {
			t.Errorf("the log does not name %s:\n%s", want, h.Stderr())
		}
	}
	code, body := postJSON(t, h.URL("/api/v1/tools/get_item/call"), `{"id": "1"}`)
	if code != 422 || body["error"].(map[string]any)["code"] != "private_address" {
		t.Fatalf("the good tool is not served: %d %v", code, body)
	}

	// toolhost check says the same and exits non-zero.
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "127.0.0.1:1", spec)
	out, err := exec.Command(bins.toolhost, "check", "--config", cfg).CombinedOutput()
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("toolhost check exited %v:\n%s", err, out)
	}
	for _, want := range []string{
		filepath.Join(dir, "tools", "unknown.toml") + ":3", `unknown key "timeout"`,
		filepath.Join(dir, "tools", "wrongtype.toml") + ":2", filepath.Join(dir, "tools", "badname.toml") + ":1",
		`"nosuchkind"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("toolhost check does not say %q:\n%s", want, out)
		}
	}
}

func TestMalformedFramesGetErrorsAndTheConnectionGoesOn(t *testing.T) {
	srv := jsonServer(t)
	h := startHost(t, hostSpec{Config: "[http]\nallow_private = true\n", Tools: map[string]string{"get_item.toml": getItemTool(srv.URL)}})
	ws := h.Dial(t)
	cases := []struct {
		frame string
		want  string
	}{
		{"not json", "isn't valid JSON"},
		{`{"type":"dance","id":"x"}`, `"dance" is not a message type`},
		{`{"id":"x"}`, `has no "type"`},
		{`{"type":"call","tool":"get_item"}`, `needs an "id"`},
		{`{"type":"call","id":"y"}`, `needs a "tool"`},
		{`{"type":"call","id":"z","tool":"get_item","args":{"id":"1"},"colour":"red"}`, `unknown field "colour"`},
		{`{"type":"call","id":"z","tool":"get_item","args":[1]}`, `must be a JSON object`},
		{`{"type":"call","id":"z","tool":"nope"}`, `no tool named "nope"`},
		{`{"type":"call","id":"big","tool":"get_item","args":{"id":"` + strings.Repeat("x", 2<<20) + `"}}`, "at most"},
	}
	for _, c := range cases {
		ws.Send(c.frame)
		f := ws.Read(10 * time.Second)
		if f.Str("type") != "error" || !strings.Contains(f.ErrorMessage(), c.want) {
			t.Errorf("frame %.60q: got %v, want an error saying %q", c.frame, f, c.want)
		}
	}
	ws.Send(map[string]any{"type": "call", "id": "ok", "tool": "get_item", "args": map[string]any{"id": "3"}})
	frames := ws.UntilEnd("ok", 30*time.Second)
	if last := frames[len(frames)-1]; last["result"] != "item 3" {
		t.Fatalf("the connection is not usable after bad frames: %v", last)
	}
}

func TestCancelEndsTheRun(t *testing.T) {
	srv := jsonServer(t)
	h := startHost(t, hostSpec{Config: "[http]\nallow_private = true\n", Tools: map[string]string{"slow.toml": slowTool(srv.URL)}})
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "c", "tool": "slow"})
	started := ws.Read(10 * time.Second)
	ws.Send(map[string]any{"type": "cancel", "run": started.Str("run")})
	begin := time.Now()
	frames := ws.UntilEnd("c", 10*time.Second)
	if last := frames[len(frames)-1]; last.ErrorCode() != "cancelled" {
		t.Fatalf("want cancelled, got %v", last)
	}
	if time.Since(begin) > 5*time.Second {
		t.Errorf("cancelling took %v", time.Since(begin))
	}
}

func TestCLICallStreamsAndExits(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{"echo.toml": "name = \"say\"\ndescription = \"d\"\n[[params]]\nname = \"n\"\nkind = \"integer\"\n[[params]]\nname = \"t\"\nkind = \"text\"\n[run]\ntype = \"echo\"\n"}})
	out, err := exec.Command(bins.toolhost, "call", "--addr", h.Addr, "say", "n=4", "t=42").Output()
	if err != nil {
		t.Fatalf("toolhost call: %v", err)
	}
	want := "n=4\nt=42\n{\n  \"echoed\": {\n    \"n\": 4,\n    \"t\": \"42\"\n  }\n}\n"
	if string(out) != want {
		t.Fatalf("toolhost call printed %q, want %q", out, want)
	}
	cmd := exec.Command(bins.toolhost, "call", "--addr", h.Addr, "say", "n=four")
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("a bad argument should exit 2, got %v", err)
	}
	out, err = exec.Command(bins.toolhost, "check", "toolhost.toml").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unexpected argument "toolhost.toml" (the config is given with --config FILE)`) {
		t.Fatalf("toolhost check with a stray argument: %v\n%s", err, out)
	}
}

func TestMetricsShowPluginsAndTheirRestarts(t *testing.T) {
	h := startHost(t, hostSpec{})
	scrape := func() string {
		resp, err := http.Get(h.URL("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	m := scrape()
	for _, want := range []string{`toolhost_plugin_up{kind="echo"} 1`, `toolhost_plugin_up{kind="http"} 1`, `toolhost_plugin_restarts_total{kind="http"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := syscall.Kill(pluginPID(t, h, "echo"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(m, `toolhost_plugin_restarts_total{kind="echo"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("the restart is not counted:\n%s", m)
		}
		time.Sleep(100 * time.Millisecond)
		m = scrape()
	}
}

func TestHangupReloadsToolsAndABadConfigChangesNothing(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{"a.toml": "name = \"a\"\ndescription = \"d\"\n[run]\ntype = \"echo\"\n"}})
	toolNames := func() string {
		resp, err := http.Get(h.URL("/api/v1/tools"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list struct {
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&list)
		var names []string
		for _, tl := range list.Tools {
			names = append(names, tl.Function.Name)
		}
		return strings.Join(names, ",")
	}
	hangup := func(wantLog string) {
		t.Helper()
		if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if !h.WaitLog(t, wantLog, 20*time.Second) {
			t.Fatalf("the host did not log %q after SIGHUP:\n%s", wantLog, h.Stderr())
		}
	}
	if got := toolNames(); got != "a" {
		t.Fatalf("tools = %s", got)
	}
	tools := filepath.Join(h.Dir, "tools")
	if err := os.WriteFile(filepath.Join(tools, "b.toml"), []byte("name = \"b\"\ndescription = \"d\"\n[run]\ntype = \"echo\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "c.toml"), []byte("name = \"c\"\ndescription = \"d\"\n[run]\ntype = \"echo\"\nspeed = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hangup("config reloaded")
	if got := toolNames(); got != "a,b" {
		t.Fatalf("after reload, tools = %s (want a,b; c is bad)", got)
	}
	if !strings.Contains(h.Stderr(), "c.toml:5") {
		t.Errorf("the bad tool was not reported at its line:\n%s", h.Stderr())
	}
	// A config that doesn't load is refused whole; the host serves on.
	cfgPath := filepath.Join(h.Dir, "toolhost.toml")
	good, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, append(good, []byte("\n[http]\nallow_privat = true\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	hangup("still serving the one before")
	if got := toolNames(); got != "a,b" {
		t.Fatalf("after a bad reload, tools = %s", got)
	}
}

func TestAToolThatCouldNotBeCheckedIsCheckedAgainAndServed(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{"f.toml": "name = \"f\"\ndescription = \"d\"\n[run]\ntype = \"flaky\"\n"}})
	if !h.WaitLog(t, "could not be checked (it will be tried again)", 10*time.Second) {
		t.Fatalf("the first, failed check was not reported:\n%s", h.Stderr())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := postJSON(t, h.URL("/api/v1/tools/f/call"), `{}`)
		if code == 200 && body["result"] == "checked the second time" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool was not served after its second check: %d %v\n%s", code, body, h.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !h.WaitLog(t, "tool served after a second check", 5*time.Second) {
		t.Errorf("the second check was not logged:\n%s", h.Stderr())
	}
}
