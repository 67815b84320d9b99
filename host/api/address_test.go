package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// addressAttacks are addresses that leave their endpoint once cleaned,
// or hide a '.', '..' or '/' in escapes, with the code each is refused
// with. Every one is sent as written, by each method.
var addressAttacks = []struct{ path, code string }{
	// A session file's path: bad_path.
	{"/api/v1/sessions/c1/files/data/../x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/./x", "bad_path"},
	{"/api/v1/sessions/c1/files/./x", "bad_path"},
	{"/api/v1/sessions/c1/files/a//b", "bad_path"},
	{"/api/v1/sessions/c1/files//etc/passwd", "bad_path"},
	{"/api/v1/sessions/c1/files/../../../tools/lines", "bad_path"},
	{"/api/v1/sessions/c1/files/../../../tools/lines/call", "bad_path"},
	{"/api/v1/sessions/c1/files/../../c2/files/x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/x/.", "bad_path"},
	{"/api/v1/sessions/c1/files/data/x/..", "bad_path"},
	{"/api/v1/sessions/c1/files/data/x/", "bad_path"},
	{"/api/v1/sessions/c1/files/", "bad_path"},
	{"/api/v1/sessions/c1/files/data/%2e%2e/x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/%2E%2e/x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/.%2E/x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/%2e/x", "bad_path"},
	{"/api/v1/sessions/c1/files/%2e%2e%2f%2e%2e%2f%2e%2e%2ftools%2flines", "bad_path"},
	{"/api/v1/sessions/c1/files/%2fetc%2fpasswd", "bad_path"},
	{"/api/v1/sessions/c1/files/%2Fetc%2Fpasswd", "bad_path"},
	{"/api/v1/sessions/c1/files/a%2f%2fb", "bad_path"},
	{"/api/v1/sessions/c1/files/data%5c..%5cx", "bad_path"},
	{"/api/v1/sessions/c1/files/data%5Cx", "bad_path"},
	{`/api/v1/sessions/c1/files/data\..\x`, "bad_path"},
	{"/api/v1/sessions/c1/files/data/%252e%252e/x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/%252E%252E%252Fx", "bad_path"},
	{"/api/v1/sessions/c1/files/%252fetc%252fpasswd", "bad_path"},
	{"/api/v1/sessions/c1/files/data/%25252e%25252e/x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/..;/x", "bad_path"},
	{"/api/v1/sessions/c1/files/data/.;x=1/x", "bad_path"},
	// A tool's name: bad_name.
	{"/api/v1/tools/../tools/lines", "bad_name"},
	{"/api/v1/tools/./lines", "bad_name"},
	{"/api/v1/tools/lines/..", "bad_name"},
	{"/api/v1/tools/lines/../../sessions/c1/files/x", "bad_name"},
	{"/api/v1/tools//lines", "bad_name"},
	{"/api/v1/tools/%2e%2e", "bad_name"},
	{"/api/v1/tools/%2E%2E/lines", "bad_name"},
	{"/api/v1/tools/%252e%252e", "bad_name"},
	{"/api/v1/tools/..;/lines", "bad_name"},
	{"/api/v1/tools/lines%5c..", "bad_name"},
	// A session id: bad_args, as the id's own check says.
	{"/api/v1/sessions/../tools/lines", "bad_args"},
	{"/api/v1/sessions/./c1/files/x", "bad_args"},
	{"/api/v1/sessions//c1/files/x", "bad_args"},
	{"/api/v1/sessions/%2e%2e/files/x", "bad_args"},
	// Any other address: bad_path.
	{"/api/v1/../v1/tools/lines", "bad_path"},
	{"/api/./v1/tools/lines", "bad_path"},
	{"/api//v1/tools/lines", "bad_path"},
	{"/api/v1/runs/../tools/lines", "bad_path"},
	{"/api/v1/approvals/%2e%2e/x", "bad_path"},
	{"//api/v1/tools/lines", "bad_path"},
	{"/x/../api/v1/tools/lines", "bad_path"},
	{"/./api/v1/sessions/c1/files/x", "bad_path"},
}

// TestAddressesAreRefusedNotRedirected: every attack, by GET, PUT, DELETE
// and POST, from a client that follows redirects with its method and
// body, is answered 400 with its code by the first response; nothing is
// written, removed, run or made.
func TestAddressesAreRefusedNotRedirected(t *testing.T) {
	h := newSessionsHost(t)
	files := &fakeFiles{written: map[string]string{}, defined: map[string]ToolFile{}}
	h.api.opts.ToolFiles, h.api.opts.Check = files, fakeCheck
	ctx := context.Background()
	if _, err := h.svc.WriteFile(ctx, "ada", "c1", "data/keep.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	follows := &http.Client{} // http.Client's own rule: follow up to 10 redirects
	for _, tc := range addressAttacks {
		for _, method := range []string{"GET", "PUT", "DELETE", "POST"} {
			req, err := http.NewRequest(method, h.srv.URL+"/", strings.NewReader(newTool))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tc.path // sent as written
			req.Header.Set("Authorization", "Bearer ada-token")
			var resp *http.Response
			if strings.HasPrefix(tc.path, "//") {
				// http.Client sends such an Opaque as a URL naming the
				// host "api": written on the socket instead.
				resp = sendAsWritten(t, h.srv.Listener.Addr().String(), req)
			} else if resp, err = follows.Do(req); err != nil {
				t.Fatalf("%s %s: %v", method, tc.path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(b, &body)
			if resp.Request != req {
				t.Errorf("%s %s was redirected to %s", method, tc.path, resp.Request.URL)
			}
			if resp.StatusCode != 400 || body.Error.Code != tc.code || body.Error.Message == "" {
				t.Errorf("%s %s: %d %s; want 400 %s", method, tc.path, resp.StatusCode, b, tc.code)
			}
		}
	}
	// The same in absolute form (PUT http://host/api/… HTTP/1.1), which
	// proxies send: the path in it is checked the same way.
	addr := h.srv.Listener.Addr().String()
	for _, tc := range addressAttacks {
		if strings.HasPrefix(tc.path, "//") {
			continue // in absolute form it would name a path of its own
		}
		req, _ := http.NewRequest("PUT", h.srv.URL+"/", strings.NewReader(newTool))
		req.URL.Opaque = "http://" + addr + tc.path
		req.Header.Set("Authorization", "Bearer ada-token")
		resp := sendAsWritten(t, addr, req)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
			t.Errorf("PUT http://…%s: %d %s; want 400 %s", tc.path, resp.StatusCode, b, tc.code)
		}
	}
	assertNothingChanged(t, h, files)
}

// sendAsWritten sends req on a connection of its own, with its Opaque as
// the request line's target, and reads the response (following nothing).
func sendAsWritten(t *testing.T, addr string, req *http.Request) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body, _ := io.ReadAll(req.Body)
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		req.Method, req.URL.Opaque, addr, req.Header.Get("Authorization"), len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Request = req
	return resp
}

// assertNothingChanged checks that session c1 of ada holds only the file
// put there first, that no other session was made, and that no tool file
// was written or removed.
func assertNothingChanged(t *testing.T, h *sessionsHost, files *fakeFiles) {
	t.Helper()
	ctx := context.Background()
	got, err := h.svc.Files(ctx, "ada", "c1")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range got {
		paths = append(paths, f.Path)
	}
	if !slices.Equal(paths, []string{"data", "data/keep.txt"}) {
		t.Errorf("session c1 holds %v; want only data/keep.txt", paths)
	}
	all, err := h.svc.List(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Errorf("sessions %+v; want only c1", all)
	}
	if len(files.written) != 0 || len(files.removed) != 0 {
		t.Errorf("tool files written %v, removed %v", files.written, files.removed)
	}
}

// TestAddressesRefusedToCurlFollowingRedirects: what the report of the
// bug did, curl -L --path-as-is, gets the 400 and no redirect.
func TestAddressesRefusedToCurlFollowingRedirects(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl here")
	}
	h := newSessionsHost(t)
	files := &fakeFiles{written: map[string]string{}, defined: map[string]ToolFile{}}
	h.api.opts.ToolFiles, h.api.opts.Check = files, fakeCheck
	if _, err := h.svc.WriteFile(context.Background(), "ada", "c1", "data/keep.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "body")
	for _, tc := range addressAttacks {
		if strings.Contains(tc.path, `\`) {
			continue // curl sends a backslash escaped
		}
		for _, method := range []string{"PUT", "POST"} {
			cmd := exec.Command(curl, "-sS", "-L", "--path-as-is", "-X", method, "--data-binary", newTool,
				"-H", "Authorization: Bearer ada-token", "-o", out, "-w", "%{http_code} %{num_redirects}", h.srv.URL+tc.path)
			got, err := cmd.Output()
			if err != nil {
				t.Fatalf("curl %s %s: %v", method, tc.path, err)
			}
			b, _ := os.ReadFile(out)
			if string(got) != "400 0" || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
				t.Errorf("curl -L --path-as-is -X %s %s: %s %s; want 400 %s, no redirect", method, tc.path, got, b, tc.code)
			}
		}
	}
	assertNothingChanged(t, h, files)
}

// TestGoodAddressesStillServe: what the check must not refuse: escaped
// characters that are no '.', '/' or '\', a '%' in a name, a dot inside
// a name, and the list of files; PUT and DELETE of …/files with no path
// are refused as naming no file, not redirected.
func TestGoodAddressesStillServe(t *testing.T) {
	h := newSessionsHost(t)
	for _, p := range []string{"data/in%20put.bin", "50%25.txt", "a.b/..c/.d", "notes%2Fa.txt"} {
		status, body, _ := raw(t, h.testHost, "PUT", "/api/v1/sessions/c1/files/"+p, "ed-token", strings.NewReader("x"))
		if status != 200 {
			t.Errorf("PUT %s: %d %s", p, status, body)
		}
	}
	got, err := h.svc.Files(context.Background(), "ed", "c1")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range got {
		if !f.Dir {
			paths = append(paths, f.Path)
		}
	}
	if want := []string{"50%.txt", "a.b/..c/.d", "data/in put.bin", "notes/a.txt"}; !slices.Equal(paths, want) {
		t.Errorf("files %v; want %v", paths, want)
	}
	if status, body, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/c1/files", "ed-token", nil); status != 200 {
		t.Errorf("GET the list: %d %s", status, body)
	}
	for _, method := range []string{"PUT", "DELETE"} {
		req, _ := http.NewRequest(method, h.srv.URL+"/api/v1/sessions/c1/files", strings.NewReader("x"))
		req.Header.Set("Authorization", "Bearer ed-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Request != req || resp.StatusCode != 400 || !strings.Contains(string(b), "no file was named") {
			t.Errorf("%s …/files: %d %s (redirected: %v)", method, resp.StatusCode, b, resp.Request != req)
		}
	}
	// /api alone is no endpoint: 404, not a redirect to /api/.
	req, _ := http.NewRequest("GET", h.srv.URL+"/api", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request != req || resp.StatusCode != 404 {
		t.Errorf("GET /api: %d (redirected: %v)", resp.StatusCode, resp.Request != req)
	}
}
