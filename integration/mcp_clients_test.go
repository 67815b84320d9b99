package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/model/modeltest"
)

// This file runs MCP clients nobody here wrote against the real host: the
// official TypeScript SDK (@modelcontextprotocol/sdk) and the MCP
// conformance suite (@modelcontextprotocol/conformance), on the pinned Node
// that `make node` brings into build/node with the packages
// testdata/mcpclient/package-lock.json pins.

// nodeBuild is the pinned Node and the folder of the installed packages. It
// skips the test when `make node` has not installed them.
func nodeBuild(t testing.TB) (node, modules string) {
	t.Helper()
	node, _ = filepath.Abs("../build/node/dist/bin/node")
	modules, _ = filepath.Abs("../build/node/mcpclient/node_modules")
	if !fileExists(node) || !fileExists(filepath.Join(modules, "@modelcontextprotocol/sdk/package.json")) ||
		!fileExists(filepath.Join(modules, "@modelcontextprotocol/conformance/package.json")) {
		t.Skip("no pinned Node or MCP packages in build/node: make node")
	}
	return node, modules
}

// mcpPythonConfig is the [python] and [sessions] part of a host's config for
// python tools and conversation sandboxes in dir.
func mcpPythonConfig(t *testing.T, dir, prefix string) string {
	_, runscBin, rootfs := sandboxBuild(t)
	return fmt.Sprintf(`
[python]
runsc = %q
rootfs = %q
session_rootfs = %q
state_dir = %q
sessions_dir = %q
sandbox_prefix = %q
[python.pool]
size = 0

[sessions]
enabled = true
disk_mb = 16
seconds = 60
`, runscBin, rootfs, sessionRootfs(t, rootfs), filepath.Join(dir, "runsc-state"), filepath.Join(dir, "sessions"), prefix)
}

// mcpTempDir is a temporary folder with a short path: runsc's sockets
// live in the state folder, and a socket's path may have at most 108 bytes.
func mcpTempDir(t *testing.T, pattern string) string {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// tsClientTools are the tools the TypeScript client calls: every kind and,
// from python, every result type.
func tsClientTools(itemsURL string) map[string]string {
	return map[string]string{
		"get_item.toml": getItemTool(itemsURL),
		"get_item_doc.toml": fmt.Sprintf(`name = "get_item_doc"
description = "Fetch an item: the whole response (status, headers, body)."
effect = "read"
[[params]]
name = "id"
kind = "text"
required = true
[run]
type = "http"
url = "%s/items/{{id}}"
`, itemsURL),
		"summarise.toml": `name = "summarise"
description = "Summarise a text."
effect = "read"
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "prompt"
system = "Be brief."
prompt = "Summarise: {{text}}"
`,
		"item_name.toml": `name = "item_name"
description = "The name of an item, through a graph."
effect = "read"
[[params]]
name = "id"
kind = "text"
required = true
[run]
type = "graph"
[[run.nodes]]
id = "item_id"
type = "arg"
param = "id"
[[run.nodes]]
id = "fetch"
type = "call_tool"
tool = "get_item"
args = { id = "item_id" }
[[run.nodes]]
id = "out"
type = "return"
value = "fetch"
`,
		"py_value.toml": `name = "py_value"
description = "Returns a value of the type asked for, or fails."
effect = "read"
[[params]]
name = "kind"
kind = "text"
options = ["object", "string", "list", "number", "bool", "null", "error"]
required = true
[run]
type = "python"
seconds = 20
code = '''
VALUES = {
    "object": {"a": 1, "nested": {"b": [True, None]}},
    "string": "plain words, not JSON",
    "list": [1, "two", {"three": 3}],
    "number": 42,
    "bool": True,
    "null": None,
}

def run(kind):
    if kind == "error":
        raise ValueError("the tool was asked to fail")
    return VALUES[kind]
'''
`,
		"py_steps.toml": `name = "py_steps"
description = "Prints three steps, a little apart, and returns how many."
effect = "read"
[run]
type = "python"
seconds = 20
code = '''
import time

def run():
    for i in range(1, 4):
        print(f"step {i}", flush=True)
        time.sleep(0.2)
    return 3
'''
`,
	}
}

// tsClientChecks are the checks testdata/mcpclient/client.mjs makes; each
// must be in its report, and pass.
var tsClientChecks = []string{
	"tools/list",
	"http: a string", "http: an object", "prompt with the fake model: a string", "graph: a string",
	"python: object", "python: string", "python: list", "python: number", "python: bool", "python: null",
	"python: an error", "an argument error",
	"progress", "cancel by abort", "cancel by hang-up",
	"auth: no token", "auth: a wrong token", "auth: a viewer token lists but may not call",
	"auth: an editor token calls", "auth: an OAuth client fails fast",
}

// TestMCPTypeScriptClient: the official TypeScript SDK's client
// (StreamableHTTPClientTransport, Client.callTool) against the real host:
// calls of every kind (http, prompt with the fake model, graph, python)
// and every result type, progress, cancel by AbortController and by
// hanging up (the run in the ledger ends cancelled), and auth with no, a
// wrong, a viewer's and an editor's token, and with an OAuth provider (it
// must fail at once, never trying to register or authorize).
func TestMCPTypeScriptClient(t *testing.T) {
	node, modules := nodeBuild(t)
	dir := mcpTempDir(t, "thts")
	model := modeltest.New(t, modeltest.Options{})
	items := jsonServer(t)
	h := startHost(t, hostSpec{
		Tools: tsClientTools(items.URL),
		Config: tokensConfig() + fmt.Sprintf(`
[model]
base_url = %q
model = %q

[http]
allow_private = true
`, model.URL, modeltest.DefaultModel) + mcpPythonConfig(t, dir, fmt.Sprintf("thts%d-", os.Getpid()%10000)),
	})
	args, _ := json.Marshal(map[string]any{
		"url": h.URL("/mcp"), "base": h.URL(""), "item": "7", "text": "a long text about tools",
		"tokens": map[string]string{"editor": editorToken, "viewer": viewerToken},
	})
	stdout, stderr, err := runNodeScript(t, node, modules, "testdata/mcpclient/client.mjs", 4*time.Minute, string(args))
	var report struct {
		Checks []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if jerr := json.Unmarshal(nodeReport(stdout), &report); jerr != nil {
		t.Fatalf("the client printed no report (%v; exit: %v):\nstdout: %s\nstderr: %s\nhost: %s", jerr, err, stdout, stderr, h.Stderr())
	}
	seen := map[string]bool{}
	for _, c := range report.Checks {
		seen[c.Name] = true
		if c.OK {
			t.Logf("ok   %s: %s", c.Name, headLine(c.Detail))
		} else {
			t.Errorf("FAIL %s: %s", c.Name, c.Detail)
		}
	}
	for _, name := range tsClientChecks {
		if !seen[name] {
			t.Errorf("the client's report has no check %q", name)
		}
	}
	if err != nil && !t.Failed() {
		t.Errorf("the client exited with %v though every check passed:\n%s", err, stderr)
	}
	if t.Failed() {
		t.Logf("client stderr:\n%s\nhost log:\n%s", stderr, h.Stderr())
	}
}

// conformanceScenarios are the server scenarios of the conformance suite
// 0.1.16 (`conformance list`, suite "all"): "" for each one toolhost must
// pass, else why it is left out. A scenario the suite runs that is not here
// fails the test, so a newer suite is read before it is trusted.
var conformanceScenarios = map[string]string{
	"server-initialize":            "",
	"ping":                         "",
	"logging-set-level":            "",
	"tools-list":                   "",
	"tools-call-simple-text":       "",
	"tools-call-image":             "",
	"tools-call-audio":             "",
	"tools-call-embedded-resource": "",
	"tools-call-mixed-content":     "",
	"tools-call-with-logging":      "",
	"tools-call-error":             "",
	"tools-call-with-progress":     "",
	"dns-rebinding-protection":     "",

	"tools-call-sampling":           "sampling/createMessage is a request from the server to the client mid-call; a stateless server has no channel to send it on and toolhost has no model call through the client",
	"tools-call-elicitation":        "elicitation/create is a request from the server to the client mid-call: not possible on a stateless server",
	"elicitation-sep1034-defaults":  "elicitation (a server-to-client request): not possible on a stateless server",
	"elicitation-sep1330-enums":     "elicitation (a server-to-client request): not possible on a stateless server",
	"json-schema-2020-12":           "wants a tool whose inputSchema has $defs and $ref; a toolhost tool's schema is generated from its [[params]], which have no such form",
	"completion-complete":           "completion/complete completes prompt and resource-template arguments; toolhost serves neither prompts nor resources",
	"server-sse-polling":            "SSE polling resumes a stream by Mcp-Session-Id and Last-Event-ID; the host is stateless: no session, no event store to replay from",
	"server-sse-multiple-streams":   "wants several GET SSE streams of one session; the stateless host answers GET with 405",
	"resources-list":                "toolhost serves tools only, no resources",
	"resources-read-text":           "toolhost serves tools only, no resources",
	"resources-read-binary":         "toolhost serves tools only, no resources",
	"resources-templates-read":      "toolhost serves tools only, no resources",
	"resources-subscribe":           "toolhost serves tools only, no resources (and a stateless server can't keep a subscription)",
	"resources-unsubscribe":         "toolhost serves tools only, no resources (and a stateless server can't keep a subscription)",
	"prompts-list":                  "toolhost serves tools only, no MCP prompts",
	"prompts-get-simple":            "toolhost serves tools only, no MCP prompts",
	"prompts-get-with-args":         "toolhost serves tools only, no MCP prompts",
	"prompts-get-embedded-resource": "toolhost serves tools only, no MCP prompts",
	"prompts-get-with-image":        "toolhost serves tools only, no MCP prompts",
}

// conformanceCheck is one check of a scenario, as the suite writes it in
// its checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	ErrorMessage string `json:"errorMessage"`
}

// TestMCPConformanceSuite runs the MCP conformance suite's server scenarios
// (every one, suite "all") against the real toolhost binary serving the
// suite's tools (testdata/conformance: python tools returning text, image,
// audio and resource content, logging and reporting progress). Every
// scenario that applies to a stateless tools server must pass; the others
// are listed in conformanceScenarios with why.
func TestMCPConformanceSuite(t *testing.T) {
	node, modules := nodeBuild(t)
	dir := mcpTempDir(t, "thcf")
	tools := map[string]string{}
	files, _ := filepath.Glob("testdata/conformance/*.toml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tools[filepath.Base(f)] = string(b)
	}
	if len(tools) < 8 {
		t.Fatalf("testdata/conformance has %d tools, want the suite's 8", len(tools))
	}
	// No tokens: the suite connects as the local caller (and checks that a
	// foreign Host or Origin is refused).
	h := startHost(t, hostSpec{Tools: tools, Config: mcpPythonConfig(t, dir, fmt.Sprintf("thcf%d-", os.Getpid()%10000))})
	out := filepath.Join(dir, "results")
	cli := filepath.Join(modules, "@modelcontextprotocol/conformance/dist/index.js")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", h.URL("/mcp"), "--suite", "all", "-o", out)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the suite did not finish in 5 minutes:\n%s", stderr.String())
	}

	results := readConformanceResults(t, out)
	if len(results) == 0 {
		t.Fatalf("the suite wrote no results (exit %v):\nstdout: %s\nstderr: %s", runErr, stdout.String(), stderr.String())
	}
	var names []string
	for name := range conformanceScenarios {
		names = append(names, name)
	}
	for name := range results {
		if _, ok := conformanceScenarios[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var table strings.Builder
	passed, mustPass := 0, 0
	for _, name := range names {
		why, known := conformanceScenarios[name]
		checks, ran := results[name]
		ok, failures := conformancePassed(checks)
		status := "fail"
		if ok {
			status = "pass"
			passed++
		}
		switch {
		case !known:
			t.Errorf("the suite ran scenario %s, which this test does not know: read it, then add it to conformanceScenarios (to pass, or left out with why)", name)
		case !ran:
			t.Errorf("the suite did not run scenario %s (it was in 0.1.16): see its output:\n%s", name, stdout.String())
		case why == "":
			mustPass++
			if !ok {
				t.Errorf("scenario %s failed: %s", name, strings.Join(failures, "; "))
			}
		case ok:
			t.Errorf("scenario %s passes now, though it is left out (%s): make it one that must pass", name, why)
		default:
			status += ", excluded: " + why
		}
		fmt.Fprintf(&table, "%-32s %s\n", name, status)
	}
	t.Logf("conformance suite 0.1.16, %d scenarios, %d passed (%d must pass):\n%s", len(results), passed, mustPass, table.String())
	if t.Failed() {
		t.Logf("host log:\n%s", h.Stderr())
	}
}

// readConformanceResults reads the checks of each scenario from the suite's
// output folder: one folder server-<scenario>-<timestamp> with a
// checks.json each.
func readConformanceResults(t *testing.T, out string) map[string][]conformanceCheck {
	t.Helper()
	dirName := regexp.MustCompile(`^server-(.+)-(\d{4}-\d\d-\d\dT[\d-]+Z)$`)
	entries, _ := os.ReadDir(out)
	results := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := dirName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", m[1], err)
			continue
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("scenario %s: its checks.json: %v", m[1], err)
			continue
		}
		results[m[1]] = checks
	}
	return results
}

// conformancePassed says whether a scenario passed as the suite counts it,
// no failed check, and at least one check that succeeded; else what failed.
func conformancePassed(checks []conformanceCheck) (bool, []string) {
	var failures []string
	succeeded := 0
	for _, c := range checks {
		switch c.Status {
		case "FAILURE":
			failures = append(failures, c.ID+": "+c.ErrorMessage)
		case "SUCCESS":
			succeeded++
		}
	}
	if succeeded == 0 && len(failures) == 0 {
		failures = append(failures, "no check succeeded")
	}
	return len(failures) == 0, failures
}

// runNodeScript runs a script of testdata with the pinned Node. The script
// is copied into a folder beside a link to the installed packages, so its
// imports resolve there as they would in a project of its own.
func runNodeScript(t *testing.T, node, modules, script string, timeout time.Duration, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	dir := t.TempDir()
	b, rerr := os.ReadFile(script)
	if rerr != nil {
		t.Fatal(rerr)
	}
	copied := filepath.Join(dir, filepath.Base(script))
	if err := os.WriteFile(copied, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{copied}, args...)...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s did not finish in %s: %w", script, timeout, ctx.Err())
	}
	return out.Bytes(), errOut.Bytes(), err
}

// nodeReport is the last line a script printed: its JSON report.
func nodeReport(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

// headLine is the first line of a check's detail.
func headLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
