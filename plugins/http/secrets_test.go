package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// secretURL is a URL template for the server at host:port (or a closed
// port) with secrets in its userinfo, in a fixed query value and in a
// query value from an argument.
func secretURL(hostPort, path string) string {
	return "http://SECRETUSER:SECRETPW@" + hostPort + path + "?key={{key}}&api_key=SECRET123"
}

// secretMessages are the secrets' values as a tool's user would see them
// in a message: never.
func mustNotShowSecrets(t *testing.T, what string, run *sdktest.Run, code string) {
	t.Helper()
	if run.ErrorCode() != code {
		t.Errorf("%s: %v (%s), want the error %s", what, run.Err, run.ErrorCode(), code)
	}
	if run.Err != nil && strings.Contains(run.Err.Error(), "SECRET") {
		t.Errorf("%s: the error shows a secret: %s", what, run.Err)
	}
	for _, e := range run.Events {
		raw, _ := json.Marshal(e)
		if strings.Contains(string(raw), "SECRET") {
			t.Errorf("%s: an event shows a secret: %s", what, raw)
		}
	}
}

// No secret from the URL (its query, its userinfo) or from the headers is
// in any message of a run, whichever way it fails.
func TestNoSecretInMessages(t *testing.T) {
	mux := http.NewServeMux()
	// An API that says which key it was given, as many do.
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		user, pw, _ := r.BasicAuth()
		q := r.URL.Query()
		http.Error(w, fmt.Sprintf("invalid key %s (or %s) for %s:%s, header %s", q.Get("api_key"), q.Get("key"), user, pw, r.Header.Get("X-Token")), http.StatusUnauthorized)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop?"+r.URL.RawQuery, http.StatusFound)
	})
	mux.HandleFunc("/badlocation", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://[::1/?api_key="+r.URL.Query().Get("api_key"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, strings.Repeat("x", 100)) })
	mux.HandleFunc("/bigchunked", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, strings.Repeat("x", 100))
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "not json") })
	var away string
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, away, http.StatusFound) })
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	host := s.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(host)
	away = "http://SECRETUSER:SECRETPW@127.0.0.2:" + port + "/x?api_key=SECRET123"
	slowServer, _ := slow(t)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()

	args := map[string]any{"key": "SECRETARG"}
	tool := func(url string, extra map[string]any) sdk.Tool {
		run := map[string]any{"type": "http", "url": url, "headers": map[string]any{"X-Token": "SECRETHEADER"}}
		for k, v := range extra {
			run[k] = v
		}
		return sdktest.Tool(t, "t", run, text("key", false), text("base", false))
	}

	opened := open(t, map[string]any{"timeout_seconds": 5})
	small := open(t, map[string]any{"max_bytes": 10})
	guarded := start(t, &kind{}, map[string]any{})
	exempt := start(t, exempting(t, s), map[string]any{})

	for _, tc := range []struct {
		what string
		c    *sdktest.Conn
		tool sdk.Tool
		code string
	}{
		{"connection refused", opened, tool(secretURL(closed, "/"), nil), "http_error"},
		{"private address", guarded, tool(secretURL(host, "/"), nil), "private_address"},
		{"redirect to a private address", exempt, tool(secretURL(host, "/away"), nil), "private_address"},
		{"timeout", opened, tool(secretURL(slowServer.Listener.Addr().String(), "/"), map[string]any{"timeout_seconds": 1}), "timeout"},
		{"too many redirects", opened, tool(secretURL(host, "/loop"), nil), "too_many_redirects"},
		{"a Location that is not a URL", opened, tool(secretURL(host, "/badlocation"), nil), "http_error"},
		{"too large", small, tool(secretURL(host, "/big"), nil), "too_large"},
		{"too large, chunked", small, tool(secretURL(host, "/bigchunked"), nil), "too_large"},
		{"bad status", opened, tool(secretURL(host, "/status"), nil), "http_status"},
		{"not JSON", opened, tool(secretURL(host, "/text"), map[string]any{"pick": "a"}), "not_json"},
		{"a URL argument that is not a URL", opened, tool("{{base}}/x?api_key=SECRET123", nil), "bad_argument"},
		{"a URL argument with no host", opened, tool("{{base}}/x?api_key=SECRET123", nil), "bad_argument"},
		{"a tool whose URL is not a URL", opened, tool("https://SECRETUSER:SECRETPW@exa mple.com/?api_key=SECRET123", nil), "bad_tool"},
		{"a tool whose URL has no host", opened, tool("https://SECRETUSER:SECRETPW@/x?api_key=SECRET123", nil), "bad_tool"},
		{"a tool whose placeholder is not closed", opened, tool("https://example.com/?q={{key&api_key=SECRET123", nil), "bad_tool"},
	} {
		a := args
		switch tc.what {
		case "a URL argument that is not a URL":
			a = map[string]any{"base": "http://SECRETUSER:SECRETPW@exa mple.com"}
		case "a URL argument with no host":
			a = map[string]any{"base": "http://SECRETUSER:SECRETPW@"}
		}
		run := tc.c.Invoke(context.Background(), tc.tool, a)
		t.Logf("%s: %v", tc.what, run.Err)
		mustNotShowSecrets(t, tc.what, run, tc.code)
		if tc.code == "bad_tool" {
			_, err := tc.c.Check(context.Background(), tc.tool)
			if err == nil || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("%s: Check says %v", tc.what, err)
			}
		}
	}

	// A successful call logs no secret either.
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") }))
	t.Cleanup(ok.Close)
	mustNotShowSecrets(t, "success", opened.Invoke(context.Background(), tool(secretURL(ok.Listener.Addr().String(), "/"), nil), args), "")
}

// safeURL keeps the scheme, host and path of a URL, and nothing of its
// userinfo, query or fragment; redact does the same with a URL that can't
// be parsed.
func TestSafeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@example.com:8443/a/b?key=SECRET#frag": "https://example.com:8443/a/b",
		"https://user@example.com/a":                           "https://example.com/a",
		"https://example.com/a?":                               "https://example.com/a",
		"/relative?key=SECRET":                                 "/relative",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"https://user:pw@exa mple.com/a?key=SECRET":  "https://exa mple.com/a",
		"https://us@er:p@w@/a?key=SECRET#x":          "https:///a",
		"https://user:pw@host?key=SECRET":            "https://host",
		"https://host#x?key=SECRET":                  "https://host",
		"no scheme, user:pw@host/a?key=SECRET":       "host/a",
		"https://host/a@b?key=SECRET":                "https://host/a@b",
		"https://user:pw@host:bad/a%zz?key=SECRET":   "https://host:bad/a%zz",
		"https://user:pw@[::1/a?key=SECRET":          "https://[::1/a",
		"HTTPS://user:pw@host/a\x7f?key=SECRET#frag": "HTTPS://host/a\x7f",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// Check's messages about a broken template don't quote what may be a key.
func TestCheckShowsNoSecret(t *testing.T) {
	c := start(t, &kind{}, map[string]any{})
	for _, run := range []map[string]any{
		{"type": "http", "url": "https://example.com/", "headers": map[string]any{"Authorization": "Bearer {{SECRET/abc+def=}}"}},
		{"type": "http", "url": "https://example.com/", "headers": map[string]any{"X-Key": "{{key SECRET123"}},
		{"type": "http", "url": "https://example.com/", "headers": map[string]any{"X-Key": "{{key}}SECRET123\n"}},
		{"type": "http", "url": "https://example.com/?key={{SECRET123!}}"},
		{"type": "http", "url": "SECRET123@ftp://example.com/"},
		{"type": "http", "url": "https://example.com/", "redirect_hosts": []any{"SECRETUSER:SECRETPW@api2.example.com"}},
		{"type": "http", "url": "https://example.com/", "redirect_hosts": []any{"https://SECRET123"}},
		{"type": "http", "url": "https://example.com/", "method": "POST", "body": `{"key": "SECRET123", {{key}`},
	} {
		_, err := c.Check(context.Background(), sdktest.Tool(t, "t", run, text("key", false)))
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%v: Check says %v", run, err)
		}
		t.Logf("%v", err)
	}
}
