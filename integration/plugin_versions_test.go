package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client"
)

// v1Tools are a tool of the v1 kind (the build of plugin protocol 1 kept
// in sdk/testdata/v1-kind) and a graph (this SDK, protocol 3) that calls
// it.
var v1Tools = map[string]string{
	"old_echo.toml": `name = "old_echo"
description = "Echo a text, from a plugin built for protocol 1."
effect = "read"
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "v1"
`,
	"old_via_graph.toml": `name = "old_via_graph"
description = "Call old_echo from a graph."
effect = "read"
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "graph"
[[run.nodes]]
id = "t"
type = "arg"
param = "text"
[[run.nodes]]
id = "old"
type = "call_tool"
tool = "old_echo"
args = { text = "t" }
[[run.nodes]]
id = "out"
type = "return"
value = "old"
`,
}

// v1PluginDir is a plugin folder holding the v1 build, built here (the
// harness builds only integration/testdata/*-kind, and this fixture
// imports the SDK's internal code, so it lives under sdk/), beside the
// built-in graph and the example echo kind as the harness built them.
func v1PluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "toolhost-plugin-v1"), "../sdk/testdata/v1-kind")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the v1 plugin: %v\n%s", err, out)
	}
	for _, kind := range []string{"graph", "echo"} {
		b, err := os.ReadFile(filepath.Join(bins.plugins, "toolhost-plugin-"+kind))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "toolhost-plugin-"+kind), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAHostOfProtocol2ServesAPluginOfProtocol1: a plugin nobody rebuilt
// since protocol 1 is served by this host, which speaks 1 and 2: its tool
// is listed, called over the websocket, its output streams and its result
// returns, and a graph (protocol 3) calls it, its node-done progress
// carrying "node". The host logs the protocol negotiated with each plugin,
// and `toolhost plugins list` shows 1 for the v1 build and 2 for the
// others.
func TestAHostOfProtocol2ServesAPluginOfProtocol1(t *testing.T) {
	h := startHost(t, hostSpec{PluginDir: v1PluginDir(t), Tools: v1Tools})
	defer h.Stop(t)

	resp, err := http.Get(h.URL("/api/v1/tools"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []client.Tool `json:"tools"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Function.Name] = true
	}
	if !names["old_echo"] || !names["old_via_graph"] {
		t.Fatalf("the tools listed are %v; want old_echo and old_via_graph\n%s", names, h.Stderr())
	}

	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "hello", "id": "h", "protocol": 1})
	if f := ws.Read(10 * time.Second); f.Str("type") != "hello" {
		t.Fatalf("hello: %v", f)
	}
	ws.Send(map[string]any{"type": "call", "id": "c1", "tool": "old_echo", "args": map[string]any{"text": "hi"}})
	frames := ws.UntilEnd("c1", 30*time.Second)
	var stdout strings.Builder
	var progress []Frame
	for _, f := range frames {
		switch f.Str("type") {
		case "stdout":
			stdout.WriteString(f.Str("data"))
		case "progress":
			progress = append(progress, f)
		}
	}
	last := frames[len(frames)-1]
	if last.Str("type") != "result" || stdout.String() != "echo: hi\n" {
		t.Fatalf("old_echo: stdout %q, frames %v", stdout.String(), frames)
	}
	if res, _ := json.Marshal(last["result"]); string(res) != `{"echoed":"hi","protocol":1}` {
		t.Fatalf("old_echo's result: %s", res)
	}
	// A progress of protocol 1 has no node: it still arrives, as before.
	if len(progress) != 1 || progress[0]["fraction"] != -1.0 || progress[0].Str("message") != `node "echo" done` || progress[0]["node"] != nil {
		t.Fatalf("old_echo's progress: %v", progress)
	}

	ws.Send(map[string]any{"type": "call", "id": "c2", "tool": "old_via_graph", "args": map[string]any{"text": "via"}})
	frames = ws.UntilEnd("c2", 30*time.Second)
	var seen []string
	for _, f := range frames {
		switch f.Str("type") {
		case "stdout", "progress":
			seen = append(seen, f.Str("type")+"|"+f.Str("node")+"|"+f.Str("data")+f.Str("message"))
		}
	}
	if last := frames[len(frames)-1]; last.Str("type") != "result" {
		t.Fatalf("old_via_graph: %v", frames)
	}
	if got, want := strings.Join(seen, " "), "stdout|old|echo: via\n progress|old|node \"old\" done"; got != want {
		t.Fatalf("old_via_graph's events\n%q\nwant\n%q", got, want)
	}

	for kind, want := range map[string]string{"v1": "1", "graph": "3", "echo": "3"} {
		re := regexp.MustCompile(regexp.QuoteMeta(kind+": plugin started:") + `.*protocol=(\d+)`)
		m := re.FindStringSubmatch(h.Stderr())
		if m == nil || m[1] != want {
			t.Errorf("the host's log of the %s plugin's start: %v, want protocol=%s", kind, m, want)
		}
	}

	out, err := exec.Command(bins.toolhost, "plugins", "list", "--config", filepath.Join(h.Dir, "toolhost.toml")).CombinedOutput()
	if err != nil {
		t.Fatalf("toolhost plugins list: %v\n%s", err, out)
	}
	for _, want := range []string{
		"echo   pinned  1.0.0", "graph  pinned", "v1     pinned  1.0.0",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("plugins list lacks %q:\n%s", want, out)
		}
	}
	for kind, want := range map[string]string{"echo": "3", "graph": "3", "v1": "1"} {
		if !regexp.MustCompile(`(?m)^` + kind + `\s+pinned\s+\S+\s+` + want + `$`).Match(out) {
			t.Errorf("plugins list does not show protocol %s for %s:\n%s", want, kind, out)
		}
	}
	t.Logf("toolhost plugins list:\n%s", out)
}
