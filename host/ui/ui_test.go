package ui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandlerServesThePageItsFilesAndASafePolicy(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/": `<script src="editor.js"`, "/app.js": "PROTOCOL = 1", "/editor.js": "class ToolhostEditor",
		"/sessions.js": "class ToolhostConversations", "/app.css": "prefers-color-scheme: dark",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, body without %q", path, resp.StatusCode, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
	resp, err := http.Get(srv.URL + "/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("a missing file: %d", resp.StatusCode)
	}
}

// TestThePageLoadsEveryScriptBeforeApp: app.js builds the editor and the
// conversations view from the classes the other scripts define, so they
// must be loaded, in order, before it.
func TestThePageLoadsEveryScriptBeforeApp(t *testing.T) {
	page, err := fs.ReadFile(files, "static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range regexp.MustCompile(`<script src="([^"]+)" defer></script>`).FindAllSubmatch(page, -1) {
		order = append(order, string(m[1]))
	}
	scripts, _ := fs.Glob(files, "static/*.js")
	if len(order) != len(scripts) || len(order) == 0 || order[len(order)-1] != "app.js" {
		t.Errorf("the page loads %v (deferred, in this order); the scripts are %v, and app.js must come last", order, scripts)
	}
}

// TestScriptsNeverWriteMarkup: every text the host gives (tool names,
// output, file paths, session ids) goes into the page as text; no script
// parses a string as HTML.
func TestScriptsNeverWriteMarkup(t *testing.T) {
	scripts, err := fs.Glob(files, "static/*.js")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	bad := regexp.MustCompile(`\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|\beval\(|new Function\(`)
	for _, name := range scripts {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if bad.MatchString(line) {
				t.Errorf("%s:%d parses text as markup or code: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}
