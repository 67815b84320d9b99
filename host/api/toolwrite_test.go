package api

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
)

// fakeFiles are tool files in memory: what the API asks of the host's.
type fakeFiles struct {
	mu      sync.Mutex
	reg     *tools.Registry
	defined map[string]ToolFile
	written map[string]string
	removed []string
	noDir   bool
}

func (f *fakeFiles) Find(name string) (ToolFile, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tf, ok := f.defined[name]
	return tf, ok
}

func (f *fakeFiles) Write(_ context.Context, name string, data []byte) (ToolWritten, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noDir {
		return ToolWritten{}, &ToolFileError{Code: wire.CodeNoToolsDir, Message: "no tools_dir is configured: set tools_dir"}
	}
	def, err := config.ParseTool("/tools/"+name+".toml", data)
	if err != nil {
		return ToolWritten{}, err
	}
	_, existed := f.defined[name]
	f.defined[name] = ToolFile{Def: def, Editable: true, Text: string(data)}
	f.written[name] = string(data)
	run, _ := json.Marshal(def.Run)
	t := &tools.Tool{Tool: def, Kind: def.Kind(), Run: run}
	list := []*tools.Tool{t}
	for _, old := range f.reg.List() {
		if old.Name != name {
			list = append(list, old)
		}
	}
	f.reg.Replace(list)
	return ToolWritten{File: def.File, Created: !existed}, nil
}

func (f *fakeFiles) Remove(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.defined, name)
	f.removed = append(f.removed, name)
	var list []*tools.Tool
	for _, old := range f.reg.List() {
		if old.Name != name {
			list = append(list, old)
		}
	}
	f.reg.Replace(list)
	return nil
}

func (f *fakeFiles) wrote(name string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.written[name]
	return s, ok
}

// fakeCheck passes tools of the kinds "fake" and "python" whose run has no
// "bad" key, as a plugin would.
func fakeCheck(_ context.Context, def config.Tool) (*tools.Tool, error) {
	if k := def.Kind(); k != "fake" && k != "python" {
		return nil, config.Errors{def.ErrorAt("run.type", "no plugin serves the \""+k+"\" kind")}
	}
	if _, bad := def.Run["bad"]; bad {
		return nil, config.Errors{def.ErrorAt("run.bad", "is not a setting of the kind")}
	}
	run, _ := json.Marshal(def.Run)
	return &tools.Tool{Tool: def, Kind: def.Kind(), Run: run}, nil
}

// newWriteHost serves the API with fake tool files holding "lines" (in a
// file of tools_dir), "inconfig" (a [[tool]] of the main config) and
// "pytool" (a python tool), and the tokens ada (admin), ed (editor) and vic
// (viewer).
func newWriteHost(t *testing.T) (*testHost, *fakeFiles) {
	t.Helper()
	files := &fakeFiles{written: map[string]string{}, defined: map[string]ToolFile{
		"lines":    {Def: config.Tool{Name: "lines", Source: "/tools/lines.toml:1", File: "/tools/lines.toml", Run: map[string]any{"type": "fake"}}, Editable: true, Text: "name = \"lines\"\n"},
		"inconfig": {Def: config.Tool{Name: "inconfig", Source: "/etc/toolhost.toml:12", Run: map[string]any{"type": "fake"}}, NotEditable: "the tool inconfig is defined in the main config at /etc/toolhost.toml:12; change it there"},
		"pytool":   {Def: config.Tool{Name: "pytool", Source: "/tools/pytool.toml:1", File: "/tools/pytool.toml", Run: map[string]any{"type": "python"}}, Editable: true},
		"keyed": {Def: config.Tool{Name: "keyed", Source: "/tools/keyed.toml:1", File: "/tools/keyed.toml", Run: map[string]any{
			"type": "http", "url": "https://api.example.com/", "headers": map[string]any{"Authorization": "Bearer s3cret"}}}, Editable: true},
		"drawn": {Def: config.Tool{Name: "drawn", Source: "/tools/drawn.toml:1", File: "/tools/drawn.toml", Run: map[string]any{
			"type": "graph", "nodes": []any{map[string]any{"id": "out", "type": "return", "value": "out"}}}}, Editable: true},
	}}
	h := newTestHost(t, Options{Check: fakeCheck, ToolFiles: files, Tokens: auth.New([]config.Token{
		{Name: "ada", SHA256: sum("ada-token"), Role: "admin"},
		{Name: "ed", SHA256: sum("ed-token"), Role: "editor"},
		{Name: "vic", SHA256: sum("vic-token"), Role: "viewer"},
	})})
	files.reg = h.api.opts.Registry
	return h, files
}

const newTool = "name = \"hello\"\ndescription = \"Say hello.\"\n[run]\ntype = \"fake\"\n"

// TestToolWritesByRole: only admins write and delete tools; every role
// signed in reads one; editors and admins check; nobody unsigned does
// anything. A refusal is a sentence naming the role.
func TestToolWritesByRole(t *testing.T) {
	h, files := newWriteHost(t)
	type want struct {
		status int
		says   string
	}
	cases := []struct {
		method, path, body string
		byRole             map[string]want
	}{
		{"GET", "/api/v1/tools/lines", "", map[string]want{"ada": {200, ""}, "ed": {200, ""}, "vic": {200, ""}, "": {401, ""}}},
		{"POST", "/api/v1/tools/check", newTool, map[string]want{"ada": {200, ""}, "ed": {200, ""}, "vic": {403, "may not check"}, "": {401, ""}}},
		{"PUT", "/api/v1/tools/hello", newTool, map[string]want{"vic": {403, "vic is a viewer: only admins may write"}, "ed": {403, "ed is an editor: only admins may write"}, "": {401, ""}, "ada": {201, ""}}},
		{"PUT", "/api/v1/tools/hello", newTool, map[string]want{"ed": {403, "only admins"}, "ada": {200, ""}}},
		{"DELETE", "/api/v1/tools/hello", "", map[string]want{"vic": {403, "only admins"}, "ed": {403, "only admins"}, "": {401, ""}, "ada": {204, ""}}},
	}
	for _, c := range cases {
		for _, role := range []string{"", "vic", "ed", "ada"} {
			w, ok := c.byRole[role]
			if !ok {
				continue
			}
			token := ""
			if role != "" {
				token = role + "-token"
			}
			status, body, _ := do(t, h, c.method, c.path, token, c.body)
			e, _ := body["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if status != w.status || !strings.Contains(msg, w.says) {
				t.Errorf("%s %s as %q: %d %v; want %d saying %q", c.method, c.path, role, status, body, w.status, w.says)
			}
			if status == 403 && errCode(body) != "forbidden" {
				t.Errorf("%s %s as %q: code %q, want forbidden", c.method, c.path, role, errCode(body))
			}
		}
	}
	if _, ok := files.wrote("hello"); !ok || len(files.removed) != 1 {
		t.Errorf("the admin's write and delete did not reach the files: %v %v", files.written, files.removed)
	}
}

// testKinds are the kinds of the test hosts' tools as their plugins
// describe them: python's tools are code, only admins write them, and it
// keeps sessions; graph's run tables are open to every role; a kind no
// plugin serves is unknown.
func testKinds(kind string) (sdk.Info, bool) {
	switch kind {
	case "python":
		return sdk.Info{Kind: kind, AdminWritesOnly: true, SandboxRuns: true, ServesSessions: true}, true
	case "graph":
		return sdk.Info{Kind: kind, OpenRunTable: true}, true
	case "fake", "http":
		return sdk.Info{Kind: kind}, true
	}
	return sdk.Info{}, false
}

// TestPythonToolsOnlyEverByAdmins: the rule for a kind whose tools are
// code (it says sdk.Info.AdminWritesOnly, as python does) stands on its
// own, whatever the rule for the other kinds: writing one, or replacing
// one with another kind, needs an admin; so does a kind no plugin serves,
// which can't say.
func TestPythonToolsOnlyEverByAdmins(t *testing.T) {
	for _, c := range []struct {
		role  string
		kinds []string
		ok    bool
	}{
		{auth.Editor, []string{"python"}, false},
		{auth.Editor, []string{"fake", "python"}, false},
		{auth.Viewer, []string{"python"}, false},
		{auth.Admin, []string{"python"}, true},
		{auth.Admin, []string{"fake", "python"}, true},
		{auth.Editor, []string{"gone"}, false},
	} {
		err := (&Server{opts: Options{Kinds: testKinds}}).mayWrite(auth.Identity{Name: "x", Role: c.role}, c.kinds...)
		if (err == nil) != c.ok || (!c.ok && !strings.Contains(err.Error(), c.kinds[len(c.kinds)-1]+" tools may only ever be written or deleted by admins")) {
			t.Errorf("%s writing %v: %v", c.role, c.kinds, err)
		}
	}
	h, files := newWriteHost(t)
	py := "name = \"pytool\"\ndescription = \"Code.\"\n[run]\ntype = \"fake\"\n"
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/pytool", "ed-token", py); status != 403 {
		t.Errorf("an editor replaces a python tool: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/pytool", "ada-token", py); status != 200 {
		t.Errorf("an admin replaces a python tool: %d %v", status, body)
	}
	if _, ok := files.wrote("pytool"); !ok {
		t.Error("the admin's write did not reach the files")
	}
}

// TestPutToolChecksBeforeWriting: a tool its check refuses is answered as
// check answers (the field and the line the sender wrote) and nothing is
// written; so is a name that differs from the address's.
func TestPutToolChecksBeforeWriting(t *testing.T) {
	h, files := newWriteHost(t)
	bad := "# a comment\nname = \"hello\"\ndescription = \"Say hello.\"\n[run]\ntype = \"fake\"\nbad = 1\n"
	status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", bad)
	errs, _ := body["errors"].([]any)
	if status != 422 || body["ok"] != false || len(errs) != 1 {
		t.Fatalf("a bad tool: %d %v", status, body)
	}
	e := errs[0].(map[string]any)
	if e["field"] != "run.bad" || e["line"] != 6.0 || e["text"] != "request:6: run.bad: is not a setting of the kind" {
		t.Errorf("the error: %v", e)
	}
	// The same answer as check's.
	_, checked, _ := do(t, h, "POST", "/api/v1/tools/check", "ada-token", bad)
	if a, b := mustJSON(t, body), mustJSON(t, checked); a != b {
		t.Errorf("PUT answered %s; check %s", a, b)
	}
	// With no name, the name is filled in and the lines are still the sender's.
	status, body, _ = do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", strings.Replace(bad, "name = \"hello\"\n", "\n", 1))
	if errs, _ := body["errors"].([]any); status != 422 || len(errs) != 1 || errs[0].(map[string]any)["line"] != 6.0 {
		t.Errorf("a bad tool with no name: %d %v", status, body)
	}
	status, body, _ = do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", strings.Replace(newTool, `"hello"`, `"other"`, 1))
	if errs, _ := body["errors"].([]any); status != 422 || len(errs) != 1 || errs[0].(map[string]any)["field"] != "name" ||
		!strings.Contains(errs[0].(map[string]any)["message"].(string), `named "other" here, but the address names "hello"`) {
		t.Errorf("a name not the address's: %d %v", status, body)
	}
	status, body, _ = do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", "name = \"hello\"\ndescription = \"x\"\n[run]\ntype = \"nokind\"\n")
	if status != 422 {
		t.Errorf("a kind no plugin serves: %d %v", status, body)
	}
	if len(files.written) != 0 {
		t.Fatalf("refused tools were written: %v", files.written)
	}
	// Filled in and written.
	status, body, _ = do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", strings.Replace(newTool, "name = \"hello\"\n", "", 1))
	data, _ := files.wrote("hello")
	if status != 201 || body["served"] != true || !strings.HasPrefix(data, "name = \"hello\"\ndescription") {
		t.Errorf("a tool with no name: %d %v; wrote %q", status, body, data)
	}
}

// TestPutToolAsJSON: a tool sent as JSON (the shape check and GET give) is
// written as tidy TOML; its errors name their field, without lines; what
// GET gives back, PUT again, writes the same file.
func TestPutToolAsJSON(t *testing.T) {
	h, files := newWriteHost(t)
	js := `{"description":"Say hello.","effect":"read","params":[{"name":"who","kind":"text","required":true}],"run":{"type":"fake","greeting":"hi","times":2}}`
	status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", js, "Content-Type", "application/json; charset=utf-8")
	if status != 201 {
		t.Fatalf("PUT JSON: %d %v", status, body)
	}
	want := "name = 'hello'\ndescription = 'Say hello.'\neffect = 'read'\n\n[[params]]\nname = 'who'\nkind = 'text'\nrequired = true\n\n[run]\ntype = 'fake'\ngreeting = 'hi'\ntimes = 2\n"
	if data, _ := files.wrote("hello"); data != want {
		t.Errorf("wrote:\n%s\nwant:\n%s", data, want)
	}
	_, got, _ := do(t, h, "GET", "/api/v1/tools/hello", "ada-token", "")
	again, _ := json.Marshal(got["tool"])
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", string(again), "Content-Type", "application/json"); status != 200 {
		t.Fatalf("PUT what GET gave: %d %v", status, body)
	}
	if data, _ := files.wrote("hello"); data != want {
		t.Errorf("the round trip wrote:\n%s\nwant:\n%s", data, want)
	}

	status, body, _ = do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", `{"description":"x","run":{"type":"fake","bad":[1,null]}}`, "Content-Type", "application/json")
	errs, _ := body["errors"].([]any)
	if status != 422 || len(errs) != 1 || errs[0].(map[string]any)["field"] != "run.bad[1]" || errs[0].(map[string]any)["line"] != 0.0 {
		t.Errorf("null in a list: %d %v", status, body)
	}
	status, body, _ = do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", `{"description":"x","run":{"type":"fake","bad":1}}`, "Content-Type", "application/json")
	errs, _ = body["errors"].([]any)
	if status != 422 || len(errs) != 1 || errs[0].(map[string]any)["field"] != "run.bad" || errs[0].(map[string]any)["line"] != 0.0 {
		t.Errorf("a check error of a JSON tool: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", `{"description":`, "Content-Type", "application/json"); status != 400 || errCode(body) != "bad_request" {
		t.Errorf("broken JSON: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", newTool, "Content-Type", "multipart/form-data; boundary=x"); status != 415 || errCode(body) != "unsupported_media_type" {
		t.Errorf("a multipart form: %d %v", status, body)
	}
	// curl -d sends its default Content-Type: the body is read as TOML.
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", newTool, "Content-Type", "application/x-www-form-urlencoded"); status != 200 {
		t.Errorf("curl's default Content-Type: %d %v", status, body)
	}
	// check takes JSON too.
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/check", "ed-token", `{"name":"x","description":"x","run":{"type":"fake"}}`, "Content-Type", "application/json"); status != 200 || body["tool"].(map[string]any)["name"] != "x" {
		t.Errorf("check JSON: %d %v", status, body)
	}
}

// TestToolNamesCantLeaveTheToolsFolder: a name that is not a tool's name
// (a path, escaped or not) is refused, and nothing is written or removed.
func TestToolNamesCantLeaveTheToolsFolder(t *testing.T) {
	h, files := newWriteHost(t)
	for _, name := range []string{"..%2f..%2fetc%2fpasswd", "..%2Flines", "%2e%2e", "%2e%2e%2f", "lines.toml", ".lines", "Lines", "a%00b", "a%2fb", "%2fetc%2fpasswd", "..%5c..%5cx", strings.Repeat("a", 42)} {
		for _, method := range []string{"PUT", "DELETE", "GET"} {
			status, body, _ := do(t, h, method, "/api/v1/tools/"+name, "ada-token", newTool)
			if status != 400 || errCode(body) != "bad_name" {
				t.Errorf("%s %s: %d %v; want 400 bad_name", method, name, status, body)
			}
		}
	}
	// Refused as sent (address.go), these never reach a tool's endpoint.
	for _, path := range []string{"/api/v1/tools/../../x", "/api/v1/tools/./lines/.."} {
		if status, body, _ := do(t, h, "PUT", path, "ada-token", newTool); status != 400 || errCode(body) != "bad_name" {
			t.Errorf("PUT %s: %d %v; want 400 bad_name", path, status, body)
		}
	}
	if len(files.written) != 0 || len(files.removed) != 0 {
		t.Fatalf("written %v, removed %v", files.written, files.removed)
	}
}

// TestToolsTheAPIDoesNotWrite: a tool of the main config can't be replaced
// or deleted (409 saying where it is); with no tools_dir a write is 409
// saying to set it; an unknown tool is 404; a body over 1 MiB is 413.
func TestToolsTheAPIDoesNotWrite(t *testing.T) {
	h, files := newWriteHost(t)
	inconfig := strings.ReplaceAll(newTool, "hello", "inconfig")
	for _, method := range []string{"PUT", "DELETE"} {
		status, body, _ := do(t, h, method, "/api/v1/tools/inconfig", "ada-token", inconfig)
		if status != 409 || errCode(body) != wire.CodeNotEditable || !strings.Contains(body["error"].(map[string]any)["message"].(string), "/etc/toolhost.toml:12") {
			t.Errorf("%s a tool of the main config: %d %v", method, status, body)
		}
	}
	if status, body, _ := do(t, h, "GET", "/api/v1/tools/inconfig", "vic-token", ""); status != 200 || body["editable"] != false || body["source"] != "/etc/toolhost.toml:12" || body["not_editable"] == nil {
		t.Errorf("GET a tool of the main config: %d %v", status, body)
	}
	for _, method := range []string{"GET", "DELETE"} {
		if status, body, _ := do(t, h, method, "/api/v1/tools/nope", "ada-token", ""); status != 404 || errCode(body) != "unknown_tool" {
			t.Errorf("%s an unknown tool: %d %v", method, status, body)
		}
	}
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", strings.Repeat("#", maxBody+1)); status != 413 || errCode(body) != "too_large" {
		t.Errorf("a body over 1 MiB: %d %v", status, body)
	}
	files.noDir = true
	if status, body, _ := do(t, h, "PUT", "/api/v1/tools/hello", "ada-token", newTool); status != 409 || errCode(body) != wire.CodeNoToolsDir {
		t.Errorf("no tools_dir: %d %v", status, body)
	}
	if len(files.written) != 0 {
		t.Fatalf("written %v", files.written)
	}
}

// TestGetToolForTheEditor: GET gives the tool as check does (params with
// the keys of a tool file), where it is, and whether the API may change
// it; the file's text only to an admin, who may edit it.
func TestGetToolForTheEditor(t *testing.T) {
	h, _ := newWriteHost(t)
	status, body, _ := do(t, h, "GET", "/api/v1/tools/lines", "ada-token", "")
	if status != 200 || body["toml"] != "name = \"lines\"\n" {
		t.Fatalf("GET lines as an admin: %d %v", status, body)
	}
	status, body, _ = do(t, h, "GET", "/api/v1/tools/lines", "vic-token", "")
	tool, _ := body["tool"].(map[string]any)
	params, _ := tool["params"].([]any)
	if status != 200 || body["served"] != true || body["editable"] != true || body["source"] != "/tools/lines.toml:1" || body["toml"] != nil ||
		tool["name"] != "lines" || len(params) != 4 || params[0].(map[string]any)["name"] != "n" || params[0].(map[string]any)["kind"] != "integer" || body["spec"] == nil {
		t.Fatalf("GET lines: %d %v", status, body)
	}
	// pytool is defined but not served: its definition as written.
	status, body, _ = do(t, h, "GET", "/api/v1/tools/pytool", "vic-token", "")
	if tool, _ := body["tool"].(map[string]any); status != 200 || body["served"] != false || tool["run"].(map[string]any)["type"] != "python" {
		t.Errorf("GET a tool not served: %d %v", status, body)
	}
}

// TestOnlyAdminsReadRunTablesThatMayHoldSecrets: an http tool's headers
// may hold a key; a viewer or editor reading the tool gets its kind, not
// its run table. An admin gets it whole.
func TestOnlyAdminsReadRunTablesThatMayHoldSecrets(t *testing.T) {
	h, _ := newWriteHost(t)
	for _, tok := range []string{"vic-token", "ed-token"} {
		status, body, _ := do(t, h, "GET", "/api/v1/tools/keyed", tok, "")
		raw := mustJSON(t, body)
		if status != 200 || strings.Contains(raw, "s3cret") || body["run_hidden"] == nil || body["tool"].(map[string]any)["run"].(map[string]any)["type"] != "http" {
			t.Errorf("GET keyed with %s: %d %s", tok, status, raw)
		}
		// A graph's wiring is what the canvas draws for everyone.
		status, body, _ = do(t, h, "GET", "/api/v1/tools/drawn", tok, "")
		if run, _ := body["tool"].(map[string]any)["run"].(map[string]any); status != 200 || run["nodes"] == nil || body["run_hidden"] != nil {
			t.Errorf("GET drawn with %s: %d %v", tok, status, body)
		}
	}
	if status, body, _ := do(t, h, "GET", "/api/v1/tools/keyed", "ada-token", ""); status != 200 || !strings.Contains(mustJSON(t, body), "s3cret") || body["run_hidden"] != nil {
		raw := mustJSON(t, body)
		t.Errorf("GET keyed as an admin: %d %s", status, raw)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
