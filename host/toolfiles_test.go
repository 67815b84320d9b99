package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api"
)

// newToolsHost starts a host with the http kind (private addresses
// allowed), tools_dir (none when ""), the tokens ada (admin) and ed
// (editor), and extra appended to its config.
func newToolsHost(t *testing.T, toolsDir, extra string) *testHost {
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
	text := ""
	if toolsDir != "" {
		text = fmt.Sprintf("tools_dir = %q\n", toolsDir)
	}
	text += fmt.Sprintf("[plugins]\ndir = %q\n[plugins.sha256]\nhttp = %q\n[http]\nallow_private = true\n", pdir, hex.EncodeToString(pin[:]))
	text += tokensTOML("ada", "admin", "ed", "editor") + extra
	dir := t.TempDir()
	cfg := loadConfig(t, dir, text)
	h := New(cfg, hclog.NewNullLogger())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pr := h.Start(ctx); !pr.Empty() {
		t.Fatalf("the test host did not start cleanly: %+v", pr)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		h.Stop()
	})
	return &testHost{h: h, srv: srv, dir: dir, file: cfg.File}
}

// reloadAsIs reads the config file again and gives it to the host, as
// SIGHUP does; the reload must find no problem.
func (th *testHost) reloadAsIs(t *testing.T) {
	t.Helper()
	cfg, err := config.Load(th.file)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pr := th.h.Reload(ctx, cfg); !pr.Empty() {
		t.Fatalf("the reload had problems: %+v", pr)
	}
}

// send makes a request with a body of the given Content-Type ("" for none).
func (th *testHost) send(t *testing.T, method, path, token, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, th.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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

// echoUpstream answers every request with the path it asked for.
func echoUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func greetTool(name, url string) string {
	return fmt.Sprintf("# Greets someone.\nname = %q\ndescription = \"Greet someone.\"\n\n[[params]]\nname = \"who\"\nkind = \"text\"\nrequired = true\n\n[run]\ntype = \"http\"\nurl = \"%s/{{who}}\"\n", name, url)
}

// callPath calls a tool that calls echoUpstream and gives the path the
// upstream saw, or the status and body when the call did not succeed.
func (th *testHost) callPath(t *testing.T, tool, who string) string {
	t.Helper()
	status, body := th.send(t, "POST", "/api/v1/tools/"+tool+"/call", "ed-token", "application/json", fmt.Sprintf(`{"who":%q}`, who))
	if status != 200 {
		return fmt.Sprintf("%d %v", status, body)
	}
	res, _ := body["result"].(map[string]any)
	got, _ := res["body"].(map[string]any)
	p, _ := got["path"].(string)
	return p
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestWrittenToolIsServedAtOnce: an admin's PUT writes the tool's file
// (mode 0644, owned as the folder, the text as sent), and the tool is
// callable at once; a second PUT replaces it; a SIGHUP reload keeps it
// (the file is the source of truth) and picks up an admin's hand edit of
// it; DELETE removes the file and the tool with it.
func TestWrittenToolIsServedAtOnce(t *testing.T) {
	up := echoUpstream(t)
	tools := t.TempDir()
	if err := os.Chown(tools, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	th := newToolsHost(t, tools, "")

	text := greetTool("greet", up+"/hello")
	status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "application/toml", text)
	if status != 201 || body["served"] != true || body["file"] != filepath.Join(tools, "greet.toml") {
		t.Fatalf("PUT greet: %d %v", status, body)
	}
	file := filepath.Join(tools, "greet.toml")
	data, err := os.ReadFile(file)
	if err != nil || string(data) != text {
		t.Fatalf("greet.toml holds %q (%v); want the text sent", data, err)
	}
	st, _ := os.Stat(file)
	if sys := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != 0o644 || sys.Uid != 4242 || sys.Gid != 4343 {
		t.Errorf("greet.toml: mode %v, owner %d:%d; want 0644 and the folder's 4242:4343", st.Mode().Perm(), sys.Uid, sys.Gid)
	}
	if got := th.callPath(t, "greet", "bob"); got != "/hello/bob" {
		t.Fatalf("calling greet at once: %s", got)
	}
	if entries := entries(t, tools); !slices.Equal(entries, []string{"greet.toml"}) {
		t.Errorf("the tools folder holds %v", entries)
	}

	if status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "", greetTool("greet", up+"/hi")); status != 200 || body["served"] != true {
		t.Fatalf("PUT greet again: %d %v", status, body)
	}
	if got := th.callPath(t, "greet", "bob"); got != "/hi/bob" {
		t.Fatalf("calling greet once replaced: %s", got)
	}

	th.reloadAsIs(t)
	if got := th.callPath(t, "greet", "ann"); got != "/hi/ann" {
		t.Fatalf("calling greet after a reload: %s", got)
	}
	// An admin edits the file by hand; a reload serves the edit.
	if err := os.WriteFile(file, []byte(greetTool("greet", up+"/by-hand")), 0o644); err != nil {
		t.Fatal(err)
	}
	th.reloadAsIs(t)
	if got := th.callPath(t, "greet", "ann"); got != "/by-hand/ann" {
		t.Fatalf("calling greet after a hand edit and a reload: %s", got)
	}
	if status, body := th.send(t, "GET", "/api/v1/tools/greet", "ada-token", "", ""); status != 200 || !strings.Contains(body["toml"].(string), "/by-hand/") || body["source"] != file+":1" || body["editable"] != true {
		t.Fatalf("GET greet after the hand edit: %d %v", status, body)
	}

	if status, body := th.send(t, "DELETE", "/api/v1/tools/greet", "ed-token", "", ""); status != 403 {
		t.Fatalf("an editor deletes greet: %d %v", status, body)
	}
	if status, body := th.send(t, "DELETE", "/api/v1/tools/greet", "ada-token", "", ""); status != 204 {
		t.Fatalf("DELETE greet: %d %v", status, body)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("greet.toml after DELETE: %v", err)
	}
	if status, body := th.send(t, "POST", "/api/v1/tools/greet/call", "ed-token", "", `{"who":"x"}`); status != 404 {
		t.Errorf("calling greet once deleted: %d %v", status, body)
	}
	for _, method := range []string{"GET", "DELETE"} {
		if status, body := th.send(t, method, "/api/v1/tools/greet", "ada-token", "", ""); status != 404 {
			t.Errorf("%s greet once deleted: %d %v", method, status, body)
		}
	}
	th.reloadAsIs(t)
	if _, ok := th.h.registry.Get("greet"); ok {
		t.Error("greet is served again after a reload")
	}
}

// TestBadToolIsRefusedAndNothingWritten: a tool the http kind refuses is
// answered with its field and line, and nothing is written in tools_dir; an
// editor's good tool is refused too.
func TestBadToolIsRefusedAndNothingWritten(t *testing.T) {
	tools := t.TempDir()
	th := newToolsHost(t, tools, "")
	status, body := th.send(t, "PUT", "/api/v1/tools/bad", "ada-token", "application/toml", "name = \"bad\"\ndescription = \"d\"\n[run]\ntype = \"http\"\nurl = \"ftp://x/{{nope}}\"\n")
	errs, _ := body["errors"].([]any)
	if status != 422 || len(errs) == 0 {
		t.Fatalf("PUT a bad tool: %d %v", status, body)
	}
	if e := errs[0].(map[string]any); e["field"] != "run.url" || e["line"] != 5.0 {
		t.Errorf("the first error: %v; want run.url at line 5", e)
	}
	status, body = th.send(t, "PUT", "/api/v1/tools/bad", "ada-token", "application/toml", "name = \"bad\"\ndescription = \"d\"\n[run]\ntype = \"nokind\"\n")
	if errs, _ := body["errors"].([]any); status != 422 || len(errs) != 1 || errs[0].(map[string]any)["field"] != "run.type" {
		t.Fatalf("PUT a tool of no kind: %d %v", status, body)
	}
	if status, body := th.send(t, "PUT", "/api/v1/tools/good", "ed-token", "", greetTool("good", "http://127.0.0.1:1")); status != 403 || !strings.Contains(body["error"].(map[string]any)["message"].(string), "only admins") {
		t.Fatalf("an editor's PUT: %d %v", status, body)
	}
	if es := entries(t, tools); len(es) != 0 {
		t.Fatalf("the tools folder holds %v after refused PUTs", es)
	}
}

// TestToolRoundTripsAsJSONAndTOML: a tool PUT as JSON is written as tidy
// TOML; what GET gives back, PUT again, writes the same bytes; a tool PUT
// as TOML is written as sent, comments kept.
func TestToolRoundTripsAsJSONAndTOML(t *testing.T) {
	up := echoUpstream(t)
	tools := t.TempDir()
	th := newToolsHost(t, tools, "")
	js := fmt.Sprintf(`{"description":"Greet someone.","params":[{"name":"who","kind":"text","required":true}],"run":{"type":"http","url":"%s/j/{{who}}","headers":{"Accept":"application/json"},"timeout_seconds":5}}`, up)
	if status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "application/json", js); status != 201 {
		t.Fatalf("PUT JSON: %d %v", status, body)
	}
	file := filepath.Join(tools, "greet.toml")
	first, _ := os.ReadFile(file)
	want := fmt.Sprintf("name = 'greet'\ndescription = 'Greet someone.'\n\n[[params]]\nname = 'who'\nkind = 'text'\nrequired = true\n\n[run]\ntype = 'http'\nheaders = {Accept = 'application/json'}\ntimeout_seconds = 5\nurl = '%s/j/{{who}}'\n", up)
	if string(first) != want {
		t.Errorf("PUT JSON wrote:\n%s\nwant:\n%s", first, want)
	}
	if got := th.callPath(t, "greet", "jo"); got != "/j/jo" {
		t.Fatalf("calling the JSON tool: %s", got)
	}
	// What GET gives is the tool as served (the kind's defaults filled
	// in), as check gives it; PUT back, it writes a file that gives the
	// same again: the round trip is a fixed point after one turn.
	getPut := func() ([]byte, string) {
		t.Helper()
		status, got := th.send(t, "GET", "/api/v1/tools/greet", "ada-token", "", "")
		if status != 200 || got["served"] != true {
			t.Fatalf("GET: %d %v", status, got)
		}
		again, _ := json.Marshal(got["tool"])
		if status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "application/json", string(again)); status != 200 {
			t.Fatalf("PUT what GET gave: %d %v", status, body)
		}
		b, _ := os.ReadFile(file)
		return b, string(again)
	}
	second, gave := getPut()
	third, _ := getPut()
	if string(second) != string(third) || !strings.Contains(string(second), "method = 'GET'") {
		t.Errorf("GET then PUT wrote:\n%s\nthen:\n%s", second, third)
	}
	_, checked := th.send(t, "POST", "/api/v1/tools/check", "ed-token", "application/json", strings.Replace(js, "{", `{"name":"greet",`, 1))
	if a, _ := json.Marshal(checked["tool"]); string(a) != gave {
		t.Errorf("check gives %s; GET gave %s", a, gave)
	}
	if got := th.callPath(t, "greet", "jo"); got != "/j/jo" {
		t.Fatalf("calling the tool after the round trips: %s", got)
	}

	text := greetTool("greet", up+"/t") + "# the end\n"
	if status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "text/plain; charset=utf-8", text); status != 200 {
		t.Fatalf("PUT TOML: %d %v", status, body)
	}
	if b, _ := os.ReadFile(file); string(b) != text {
		t.Errorf("PUT TOML wrote %q; want it as sent", b)
	}
	if _, got := th.send(t, "GET", "/api/v1/tools/greet", "ada-token", "", ""); got["toml"] != text {
		t.Errorf("GET gives the text %q", got["toml"])
	}
}

// TestLeftoverTempFilesAreNeverServed: the temporary files a write crashed
// out of (whole or half written) are neither served nor an error, at start
// and at reload, and a later write beside them works.
func TestLeftoverTempFilesAreNeverServed(t *testing.T) {
	up := echoUpstream(t)
	tools := t.TempDir()
	for name, text := range map[string]string{
		".greet.toml.tmp-1234567": greetTool("greet", up+"/whole"),
		".half.toml.tmp-99":       "name = \"half\"\ndescrip",
	} {
		if err := os.WriteFile(filepath.Join(tools, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	th := newToolsHost(t, tools, "") // fails on any problem at start
	th.reloadAsIs(t)                 // and at reload
	if list := th.h.registry.List(); len(list) != 0 {
		t.Fatalf("served from leftover temp files: %v", list[0].Name)
	}
	if status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "", greetTool("greet", up+"/new")); status != 201 {
		t.Fatalf("PUT beside the leftovers: %d %v", status, body)
	}
	if got := th.callPath(t, "greet", "x"); got != "/new/x" {
		t.Fatalf("calling greet: %s", got)
	}
}

// TestWritesAndReloadsAtOnce: PUTs made at once, while the tools are
// reloaded again and again, are written one at a time: no reload ever reads
// a half-written file (each finds no problem), every tool is served at the
// end with its last text whole, and no temporary file is left.
func TestWritesAndReloadsAtOnce(t *testing.T) {
	up := echoUpstream(t)
	tools := t.TempDir()
	th := newToolsHost(t, tools, "")
	// A long description makes each write take more than one write call.
	long := strings.Repeat("a long description ", 20000)
	tool := func(name string, i int) string {
		return strings.Replace(greetTool(name, fmt.Sprintf("%s/%d", up, i)), "Greet someone.", long, 1)
	}
	stop := make(chan struct{})
	reloads := make(chan error)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				reloads <- fmt.Errorf("%d reloads", n)
				return
			default:
			}
			cfg, err := config.Load(th.file)
			if err != nil {
				reloads <- err
				return
			}
			if pr := th.h.Reload(context.Background(), cfg); !pr.Empty() {
				reloads <- fmt.Errorf("a reload during the writes had problems: %+v", pr)
				return
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"one", "two", "one", "three"}[w]
			for i := range 5 {
				if status, body := th.send(t, "PUT", "/api/v1/tools/"+name, "ada-token", "", tool(name, i)); status != 200 && status != 201 {
					t.Errorf("PUT %s: %d %v", name, status, body)
				}
				if name == "one" {
					continue // two writers: the other may have written since
				}
				// Served at once, and no reload that read the folder
				// before the write puts the old tool back after it.
				served, ok := th.h.registry.Get(name)
				if !ok || !strings.Contains(string(served.Run), fmt.Sprintf("/%d/{{who}}", i)) {
					t.Errorf("once PUT %s number %d answered, the tool served is %v", name, i, served)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-reloads; !strings.HasSuffix(err.Error(), " reloads") {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two", "three"} {
		if got := th.callPath(t, name, "x"); got != "/4/x" {
			t.Errorf("calling %s: %s", name, got)
		}
		if b, _ := os.ReadFile(filepath.Join(tools, name+".toml")); string(b) != tool(name, 4) {
			t.Errorf("%s.toml is not its last text, whole", name)
		}
	}
	if es := entries(t, tools); !slices.Equal(es, []string{"one.toml", "three.toml", "two.toml"}) {
		t.Errorf("the tools folder holds %v", es)
	}
}

// TestToolsTheAPIMayNotChange: a tool of the main config (409 naming where
// it is), a tool whose file is a symbolic link out of tools_dir (409; the
// file it points to is untouched), a file named for the tool that holds
// another tool (409), a name that tries to leave tools_dir (400), and a
// host with no tools_dir (409 saying to set it).
func TestToolsTheAPIMayNotChange(t *testing.T) {
	up := echoUpstream(t)
	tools := t.TempDir()
	outside := t.TempDir()
	linked := greetTool("linked", up+"/outside")
	if err := os.WriteFile(filepath.Join(outside, "linked.toml"), []byte(linked), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "linked.toml"), filepath.Join(tools, "linked.toml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "misnamed.toml"), []byte(greetTool("other", up+"/other")), 0o644); err != nil {
		t.Fatal(err)
	}
	inConfig := "[[tool]]\nname = \"cfgtool\"\ndescription = \"In the config.\"\n[tool.run]\ntype = \"http\"\nurl = \"" + up + "/cfg\"\n"
	th := newToolsHost(t, tools, inConfig)

	for _, method := range []string{"PUT", "DELETE"} {
		status, body := th.send(t, method, "/api/v1/tools/cfgtool", "ada-token", "", greetTool("cfgtool", up))
		if msg, _ := body["error"].(map[string]any)["message"].(string); status != 409 || !strings.Contains(msg, th.file+":") || !strings.Contains(msg, "main config") {
			t.Errorf("%s a tool of the main config: %d %v", method, status, body)
		}
		status, body = th.send(t, method, "/api/v1/tools/linked", "ada-token", "", greetTool("linked", up+"/evil"))
		if msg, _ := body["error"].(map[string]any)["message"].(string); status != 409 || !strings.Contains(msg, "symbolic link to "+filepath.Join(outside, "linked.toml")) {
			t.Errorf("%s a tool whose file is a link: %d %v", method, status, body)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "linked.toml")); string(b) != linked {
		t.Errorf("the file outside tools_dir was changed: %q", b)
	}
	if st, err := os.Lstat(filepath.Join(tools, "linked.toml")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link in tools_dir: %v %v", st, err)
	}
	if got := th.callPath(t, "linked", "x"); got != "/outside/x" {
		t.Errorf("the linked tool is still served as it was: %s", got)
	}
	if status, body := th.send(t, "GET", "/api/v1/tools/linked", "ed-token", "", ""); status != 200 || body["editable"] != false || !strings.Contains(body["not_editable"].(string), "symbolic link") {
		t.Errorf("GET the linked tool: %d %v", status, body)
	}
	if status, body := th.send(t, "GET", "/api/v1/tools/cfgtool", "ed-token", "", ""); status != 200 || body["editable"] != false || !strings.HasPrefix(body["source"].(string), th.file+":") {
		t.Errorf("GET the tool of the main config: %d %v", status, body)
	}
	status, body := th.send(t, "PUT", "/api/v1/tools/misnamed", "ada-token", "", greetTool("misnamed", up))
	if msg, _ := body["error"].(map[string]any)["message"].(string); status != 409 || !strings.Contains(msg, `holds the tool "other"`) {
		t.Errorf("PUT over a file holding another tool: %d %v", status, body)
	}
	if got := th.callPath(t, "other", "x"); got != "/other/x" {
		t.Errorf("the other tool: %s", got)
	}

	parent := filepath.Dir(tools)
	for _, name := range []string{"..%2fescaped", "..%2F..%2Fescaped", "%2e%2e%2fescaped", "escaped.toml"} {
		if status, body := th.send(t, "PUT", "/api/v1/tools/"+name, "ada-token", "", greetTool("escaped", up)); status != 400 {
			t.Errorf("PUT %s: %d %v", name, status, body)
		}
	}
	for _, f := range []string{filepath.Join(parent, "escaped.toml"), filepath.Join(filepath.Dir(parent), "escaped.toml"), filepath.Join(tools, "escaped.toml")} {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s was written", f)
		}
	}

	bare := newToolsHost(t, "", "")
	status, body = bare.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "", greetTool("greet", up))
	if msg, _ := body["error"].(map[string]any)["message"].(string); status != 409 || !strings.Contains(msg, "set tools_dir in "+bare.file) {
		t.Errorf("PUT with no tools_dir: %d %v", status, body)
	}
}

// TestAToolFailingAfterItsWriteTakesNoOtherDown: a tool that passed its
// check but fails when loaded (here written straight to the files, as if
// its kind changed in between) is not served and says why; the tools
// served before still are.
func TestAToolFailingAfterItsWriteTakesNoOtherDown(t *testing.T) {
	up := echoUpstream(t)
	tools := t.TempDir()
	th := newToolsHost(t, tools, "")
	if status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "", greetTool("greet", up+"/g")); status != 201 {
		t.Fatalf("PUT greet: %d %v", status, body)
	}
	files := &toolFiles{h: th.h}
	done, err := files.Write(context.Background(), "broken", []byte("name = \"broken\"\ndescription = \"d\"\n[run]\ntype = \"http\"\nurl = \"ftp://x\"\n"))
	if err != nil || len(done.Problems) == 0 || done.Problems[0].Field != "run.url" || done.Problems[0].File != filepath.Join(tools, "broken.toml") {
		t.Fatalf("writing a tool that fails its load: %+v, %v", done, err)
	}
	if got := th.callPath(t, "greet", "x"); got != "/g/x" {
		t.Errorf("greet after another tool failed its load: %s", got)
	}
	var fe *api.ToolFileError
	if err := files.Remove(context.Background(), "nope"); err == nil || !errorsAs(err, &fe) || fe.Code != "unknown_tool" {
		t.Errorf("removing an unknown tool: %v", err)
	}
}

func errorsAs(err error, target **api.ToolFileError) bool {
	e, ok := err.(*api.ToolFileError)
	if ok {
		*target = e
	}
	return ok
}

// TestPutReplacesTheFileThatDefinesTheTool: a tool an admin wrote by hand
// in a file of another name is replaced in that file; no second file
// defines it.
func TestPutReplacesTheFileThatDefinesTheTool(t *testing.T) {
	up := echoUpstream(t)
	tools := t.TempDir()
	legacy := filepath.Join(tools, "legacy.toml")
	if err := os.WriteFile(legacy, []byte(greetTool("greet", up+"/old")), 0o644); err != nil {
		t.Fatal(err)
	}
	th := newToolsHost(t, tools, "")
	status, body := th.send(t, "PUT", "/api/v1/tools/greet", "ada-token", "", greetTool("greet", up+"/new"))
	if status != 200 || body["file"] != legacy {
		t.Fatalf("PUT greet: %d %v; want 200 and %s", status, body, legacy)
	}
	if es := entries(t, tools); !slices.Equal(es, []string{"legacy.toml"}) {
		t.Errorf("the tools folder holds %v", es)
	}
	if got := th.callPath(t, "greet", "x"); got != "/new/x" {
		t.Errorf("calling greet: %s", got)
	}
}
