package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// seen is one request a test server received, written out whole: the
// method, the path and query, every header and the body.
type seen struct {
	method string
	target string
	header http.Header
	body   string
}

// String is everything the server saw, for searching for secrets.
func (s seen) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", s.method, s.target)
	keys := make([]string, 0, len(s.header))
	for k := range s.header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(s.header[k], ", "))
	}
	b.WriteString("\n" + s.body)
	return b.String()
}

// recorder is a test server that keeps every request it receives.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
	// handle answers a request; nil answers 200 with a small JSON body.
	handle func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, tls bool, handle func(w http.ResponseWriter, r *http.Request)) *recorder {
	rec := &recorder{handle: handle}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{method: r.Method, target: r.URL.RequestURI(), header: r.Header.Clone(), body: string(body)})
		rec.mu.Unlock()
		if rec.handle != nil {
			rec.handle(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"arrived": true}`)
	})
	if tls {
		rec.Server = httptest.NewTLSServer(h)
	} else {
		rec.Server = httptest.NewServer(h)
	}
	t.Cleanup(rec.Close)
	return rec
}

// take returns the requests received since the last take.
func (rec *recorder) take() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.reqs
	rec.reqs = nil
	return out
}

// hostPort is the server's host:port, as redirect_hosts lists it.
func (rec *recorder) hostPort() string {
	u, _ := url.Parse(rec.URL)
	return u.Host
}

// redirector answers /r/{code}?to=URL with a redirect of that status to URL,
// and anything else with {"arrived": true}.
func redirector(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/r/") {
		var code int
		_, _ = fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/r/"), &code)
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"arrived": true}`)
}

// secretTool is a tool that sends secrets in its headers, its query and
// its body, to from's /r/{code}, which redirects to the URL to.
func secretTool(t *testing.T, method string, from *recorder, code int, to string, redirectHosts []string) sdk.Tool {
	run := map[string]any{
		"type":   "http",
		"method": method,
		"url":    from.URL + fmt.Sprintf("/r/%d?to=%s&api_key=SECRET123&k={{key}}", code, url.QueryEscape(to)),
		"headers": map[string]any{
			"X-Api-Key":     "{{key}}",
			"Authorization": "Bearer SECRET-AUTH",
			"Cookie":        "sid=SECRET-COOKIE",
			"User-Agent":    "agent SECRET-UA",
		},
		"pick": "arrived",
	}
	if method != "GET" {
		run["body"] = `{"secret": "{{key}}"}`
	}
	if redirectHosts != nil {
		run["redirect_hosts"] = redirectHosts
	}
	return sdktest.Tool(t, "t", run, text("key", true))
}

// secretArgs are the arguments of secretTool.
func secretArgs() map[string]any { return map[string]any{"key": "SECRET-KEY"} }

// noSecret fails the test if a request the server saw carries a secret.
func noSecret(t *testing.T, what string, reqs []seen) {
	t.Helper()
	if len(reqs) == 0 {
		t.Errorf("%s: the server behind the redirect was not reached", what)
	}
	for _, r := range reqs {
		if strings.Contains(r.String(), "SECRET") {
			t.Errorf("%s: the server behind the redirect saw a secret:\n%s", what, r)
		}
	}
}

// The tool's headers and body go only to the host the tool names, and to
// the hosts it lists in redirect_hosts.
func TestRedirectToAnotherHost(t *testing.T) {
	a := newRecorder(t, false, redirector)
	b := newRecorder(t, false, redirector)
	c := open(t, nil)
	invoke := func(tool sdk.Tool) *sdktest.Run {
		t.Helper()
		a.take()
		b.take()
		return c.Invoke(context.Background(), tool, secretArgs())
	}

	// Not listed: a 302 turns the POST into a GET, and nothing of the
	// tool's reaches the other host (not its headers, not the Referer
	// that would quote the first URL's query).
	for _, code := range []int{301, 302, 303} {
		run := invoke(secretTool(t, "POST", a, code, b.URL+"/land", nil))
		if run.Err != nil || string(run.Result) != "true" {
			t.Errorf("POST, %d to another host: %s %v", code, run.Result, run.Err)
		}
		got := b.take()
		noSecret(t, fmt.Sprintf("POST, %d", code), got)
		for _, r := range got {
			if r.method != "GET" || r.body != "" || r.header.Get("User-Agent") != "toolhost-http/"+version {
				t.Errorf("POST, %d: the other host saw %s", code, r)
			}
		}
	}
	// A GET redirected with 307 or 308 has no body to keep: followed, without
	// the headers.
	for _, code := range []int{307, 308} {
		run := invoke(secretTool(t, "GET", a, code, b.URL+"/land", nil))
		if run.Err != nil || string(run.Result) != "true" {
			t.Errorf("GET, %d to another host: %s %v", code, run.Result, run.Err)
		}
		noSecret(t, fmt.Sprintf("GET, %d", code), b.take())
	}
	// A POST redirected with 307 or 308 would carry its body: refused, and
	// the other host is not reached.
	for _, code := range []int{307, 308} {
		run := invoke(secretTool(t, "POST", a, code, b.URL+"/land?x=1", nil))
		want := fmt.Sprintf("the server answered %d %s to POST %s/r/%d, which would send the request's body on to %s/land, another host: "+
			"this host sends a tool's body only to the host in its URL and to the hosts in run.redirect_hosts (add %q there if it may have it)",
			code, http.StatusText(code), a.URL, code, b.URL, b.hostPort())
		if run.ErrorCode() != "bad_redirect" || run.Err.Error() != want {
			t.Errorf("POST, %d to another host:\n got %v (%s)\nwant %s", code, run.Err, run.ErrorCode(), want)
		}
		if got := b.take(); len(got) != 0 {
			t.Errorf("POST, %d: the other host was reached: %s", code, got[0])
		}
	}
	// Once dropped, the headers stay dropped, even back on the first host.
	run := invoke(secretTool(t, "GET", a, 302, b.URL+"/r/302?to="+url.QueryEscape(a.URL+"/land"), nil))
	if run.Err != nil || string(run.Result) != "true" {
		t.Errorf("there and back: %s %v", run.Result, run.Err)
	}
	noSecret(t, "there and back", b.take())
	back := a.take()
	if len(back) != 2 || strings.Contains(back[1].String(), "SECRET") {
		t.Errorf("there and back: the first host saw, the second time: %v", back)
	}

	// The same host keeps everything, body included.
	run = invoke(secretTool(t, "POST", a, 307, a.URL+"/land", nil))
	if run.Err != nil || string(run.Result) != "true" {
		t.Errorf("307 on the same host: %s %v", run.Result, run.Err)
	}
	if got := a.take(); len(got) != 2 || got[1].method != "POST" || got[1].body != `{"secret": "SECRET-KEY"}` ||
		got[1].header.Get("X-Api-Key") != "SECRET-KEY" || got[1].header.Get("Authorization") != "Bearer SECRET-AUTH" {
		t.Errorf("307 on the same host: the server saw %v", got)
	}

	// Listed: the headers (and with 307, the body) go on.
	listed := []string{b.hostPort()}
	run = invoke(secretTool(t, "POST", a, 302, b.URL+"/land", listed))
	if run.Err != nil || string(run.Result) != "true" {
		t.Errorf("302 to a listed host: %s %v", run.Result, run.Err)
	}
	if got := b.take(); len(got) != 1 || got[0].method != "GET" || got[0].body != "" ||
		got[0].header.Get("X-Api-Key") != "SECRET-KEY" || got[0].header.Get("Authorization") != "Bearer SECRET-AUTH" ||
		got[0].header.Get("Cookie") != "sid=SECRET-COOKIE" || got[0].header.Get("User-Agent") != "agent SECRET-UA" {
		t.Errorf("302 to a listed host: it saw %v", got)
	}
	run = invoke(secretTool(t, "POST", a, 307, b.URL+"/land", listed))
	if run.Err != nil || string(run.Result) != "true" {
		t.Errorf("307 to a listed host: %s %v", run.Result, run.Err)
	}
	if got := b.take(); len(got) != 1 || got[0].method != "POST" || got[0].body != `{"secret": "SECRET-KEY"}` ||
		got[0].header.Get("X-Api-Key") != "SECRET-KEY" || got[0].header.Get("Content-Type") != "application/json" {
		t.Errorf("307 to a listed host: it saw %v", got)
	}
	// Listing one host lets nothing through to another.
	run = invoke(secretTool(t, "POST", a, 302, b.URL+"/land", []string{"api2.example.com"}))
	if run.Err != nil {
		t.Errorf("302 to a host not listed: %v", run.Err)
	}
	noSecret(t, "302 to a host not listed", b.take())
}

// An https request redirected to http carries none of the tool's headers,
// even to a listed host.
func TestRedirectDowngrade(t *testing.T) {
	a := newRecorder(t, true, redirector)
	b := newRecorder(t, false, redirector)
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	c := start(t, &kind{roots: roots}, map[string]any{"allow_private": true})

	run := c.Invoke(context.Background(), secretTool(t, "GET", a, 302, a.URL+"/land", nil), secretArgs())
	if run.Err != nil || string(run.Result) != "true" {
		t.Fatalf("https, same host: %s %v", run.Result, run.Err)
	}
	if got := a.take(); len(got) != 2 || got[1].header.Get("X-Api-Key") != "SECRET-KEY" {
		t.Errorf("https, same host: the server saw %v", got)
	}

	for _, listed := range [][]string{nil, {b.hostPort()}} {
		run := c.Invoke(context.Background(), secretTool(t, "GET", a, 302, b.URL+"/land", listed), secretArgs())
		if run.Err != nil || string(run.Result) != "true" {
			t.Errorf("https to http (listed %v): %s %v", listed, run.Result, run.Err)
		}
		noSecret(t, fmt.Sprintf("https to http (listed %v)", listed), b.take())
	}
	run = c.Invoke(context.Background(), secretTool(t, "POST", a, 307, b.URL+"/land", []string{b.hostPort()}), secretArgs())
	if run.ErrorCode() != "bad_redirect" || !strings.Contains(run.Err.Error(), "from https to plain http") {
		t.Errorf("POST, 307 from https to http: %v (%s)", run.Err, run.ErrorCode())
	}
	if got := b.take(); len(got) != 0 {
		t.Errorf("POST, 307 from https to http: the server was reached: %s", got[0])
	}
}

func TestRedirectHostsCheck(t *testing.T) {
	c := start(t, &kind{}, map[string]any{})
	good := []any{"api2.example.com", "API3.Example.com:8443", "127.0.0.1:9000", "[::1]:8080", "[2001:db8::1]", "10.0.0.1"}
	run, err := c.Check(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": "https://example.com/", "redirect_hosts": good}))
	if err != nil {
		t.Fatalf("good hosts: %v", err)
	}
	if want := `"redirect_hosts":["api2.example.com","api3.example.com:8443","127.0.0.1:9000","[::1]:8080","[2001:db8::1]","10.0.0.1"]`; !strings.Contains(string(run), want) {
		t.Errorf("normalised run %s, want …%s…", run, want)
	}
	cases := []struct {
		hosts any
		path  string
		msg   string
	}{
		{"api2.example.com", "run.redirect_hosts", "must be a list of host names"},
		{[]any{"a.example.com", 5}, "run.redirect_hosts[1]", "must be a string"},
		{[]any{"https://api2.example.com"}, "run.redirect_hosts[0]", `write the host alone, without a scheme, user, path or query, e.g. "api2.example.com" or "api2.example.com:8443"`},
		{[]any{"api2.example.com/v1"}, "run.redirect_hosts[0]", "write the host alone"},
		{[]any{"user@api2.example.com"}, "run.redirect_hosts[0]", "write the host alone"},
		{[]any{""}, "run.redirect_hosts[0]", "is empty"},
		{[]any{"*.example.com"}, "run.redirect_hosts[0]", "each host must be named"},
		{[]any{"api2.example.com:0"}, "run.redirect_hosts[0]", "port"},
		{[]any{"api2.example.com:99999"}, "run.redirect_hosts[0]", "port"},
		{[]any{"api2.example.com:https"}, "run.redirect_hosts[0]", "port"},
		{[]any{"::1"}, "run.redirect_hosts[0]", "in brackets"},
		{[]any{"a.example.com", "A.example.com"}, "run.redirect_hosts[1]", "listed twice"},
	}
	for _, cs := range cases {
		_, err := c.Check(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": "https://example.com/", "redirect_hosts": cs.hosts}))
		fe, ok := err.(sdk.FieldErrors)
		if !ok || len(fe) != 1 || fe[0].Path != cs.path || !strings.Contains(fe[0].Message, cs.msg) {
			t.Errorf("%v:\n got %v\nwant %s: …%s…", cs.hosts, err, cs.path, cs.msg)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	p := &plan{redirectHosts: []string{"api2.example.com", "api3.example.com:8443", "[::1]:8080"}}
	cases := []struct {
		from, to string
		trusted  bool
	}{
		{"https://api.example.com/a", "https://api.example.com/b?x=1", true},
		{"https://api.example.com/a", "https://API.example.com:443/b", true},
		{"https://api.example.com/a", "https://api.example.com:8443/b", false},
		{"https://api.example.com/a", "http://api.example.com/b", false},
		{"http://api.example.com/a", "https://api.example.com/b", false},
		{"https://api.example.com/a", "https://sub.api.example.com/b", false},
		{"https://api.example.com/a", "https://example.com/b", false},
		{"https://api.example.com/a", "https://api2.example.com/b", true},
		{"http://api.example.com/a", "http://api2.example.com/b", true},
		{"https://api.example.com/a", "https://api2.example.com:8443/b", false},
		{"https://api.example.com/a", "https://api3.example.com:8443/b", true},
		{"https://api.example.com/a", "https://api3.example.com/b", false},
		{"https://api.example.com/a", "http://api2.example.com/b", false},
		{"http://[::1]:9/a", "http://[::1]:8080/b", true},
		{"http://[::1]:9/a", "http://[0:0::1]:8080/b", true},
		{"http://[::1]:9/a", "http://[::2]:8080/b", false},
	}
	for _, c := range cases {
		from, _ := url.Parse(c.from)
		to, _ := url.Parse(c.to)
		if got := p.trusted(from, to); got != c.trusted {
			t.Errorf("%s → %s: trusted %v, want %v", c.from, c.to, got, c.trusted)
		}
	}
}
