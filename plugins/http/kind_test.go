package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// start serves a kind in-process and configures it with cfg.
func start(t *testing.T, k *kind, cfg map[string]any) *sdktest.Conn {
	t.Helper()
	c := sdktest.Start(t, k, nil)
	raw, _ := json.Marshal(cfg)
	if err := c.Configure(context.Background(), raw); err != nil {
		t.Fatalf("configure: %v", err)
	}
	return c
}

// open is a kind that may call the local test servers.
func open(t *testing.T, cfg map[string]any) *sdktest.Conn {
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfg["allow_private"] = true
	return start(t, &kind{}, cfg)
}

// echo answers every request with a JSON description of it.
func echo(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Secret", "not returned")
		w.Header().Set("Etag", `"v1"`)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method,
			"path":   r.URL.EscapedPath(),
			"query":  r.URL.RawQuery,
			"args":   r.URL.Query(),
			"headers": map[string]string{
				"authorization": r.Header.Get("Authorization"),
				"content-type":  r.Header.Get("Content-Type"),
				"user-agent":    r.Header.Get("User-Agent"),
				"x-name":        r.Header.Get("X-Name"),
			},
			"body": string(body),
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func text(name string, required bool) sdk.Param {
	return sdk.Param{Name: name, Type: "text", Required: required}
}

// response is the result of a call without pick, with the echo's body.
type response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    struct {
		Method  string              `json:"method"`
		Path    string              `json:"path"`
		Query   string              `json:"query"`
		Args    map[string][]string `json:"args"`
		Headers map[string]string   `json:"headers"`
		Body    string              `json:"body"`
	} `json:"body"`
}

func call(t *testing.T, c *sdktest.Conn, tool sdk.Tool, a map[string]any) response {
	t.Helper()
	run := c.Invoke(context.Background(), tool, a)
	if run.Err != nil {
		t.Fatalf("call failed: %v (%s)", run.Err, run.ErrorCode())
	}
	var r response
	if err := json.Unmarshal(run.Result, &r); err != nil {
		t.Fatalf("result %s: %v", run.Result, err)
	}
	return r
}

func TestDescribe(t *testing.T) {
	c := sdktest.Start(t, &kind{}, nil)
	info, _, err := c.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if info.Kind != "http" || json.Unmarshal(info.RunSchema, &schema) != nil || schema["type"] != "object" {
		t.Fatalf("describe: %+v", info)
	}
	props := schema["properties"].(map[string]any)
	for _, k := range []string{"type", "method", "url", "headers", "body", "pick", "timeout_seconds", "redirect_hosts"} {
		if props[k] == nil {
			t.Errorf("the schema has no %s", k)
		}
	}
}

func TestConfigureErrors(t *testing.T) {
	cases := []struct {
		cfg  string
		path string
		msg  string
	}{
		{`{"allow_private": "yes"}`, "http.allow_private", "true or false"},
		{`{"timeout_seconds": 0}`, "http.timeout_seconds", "from 1 to 600"},
		{`{"timeout_seconds": 601}`, "http.timeout_seconds", "from 1 to 600"},
		{`{"timeout_seconds": 2.5}`, "http.timeout_seconds", "whole number"},
		{`{"timeout_seconds": "30"}`, "http.timeout_seconds", "whole number"},
		{`{"max_bytes": -1}`, "http.max_bytes", "from 1 to 1073741824"},
		{`{"max_bytes": 2147483648}`, "http.max_bytes", "from 1"},
		{`{"allow_privat": true}`, "http.allow_privat", "not a setting of [http]"},
		{`[]`, "http", "must be a table"},
	}
	for _, cs := range cases {
		c := sdktest.Start(t, &kind{}, nil)
		err := c.Configure(context.Background(), json.RawMessage(cs.cfg))
		fe, ok := err.(sdk.FieldErrors)
		if !ok || len(fe) != 1 || fe[0].Path != cs.path || !strings.Contains(fe[0].Message, cs.msg) {
			t.Errorf("%s: %v, want %s: …%s…", cs.cfg, err, cs.path, cs.msg)
		}
	}
	c := sdktest.Start(t, &kind{}, nil)
	if err := c.Configure(context.Background(), json.RawMessage(`{"allow_private": true, "timeout_seconds": 5, "max_bytes": 100}`)); err != nil {
		t.Errorf("a good config: %v", err)
	}
	if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Errorf("an empty config: %v", err)
	}
}

func TestCheckNormalises(t *testing.T) {
	c := start(t, &kind{}, map[string]any{"timeout_seconds": 20})
	tool := sdktest.Tool(t, "get", map[string]any{"type": "http", "url": "https://example.com/{{id}}", "method": "post",
		"headers": map[string]any{"x-api-key": "k"}, "body": `{"a": {{id}}}`},
		sdk.Param{Name: "id", Type: "integer", Required: true})
	run, err := c.Check(context.Background(), tool)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(run, &got)
	want := map[string]any{"type": "http", "method": "POST", "url": "https://example.com/{{id}}",
		"headers": map[string]any{"X-Api-Key": "k"}, "body": `{"a": {{id}}}`, "timeout_seconds": float64(20)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("normalised run:\n got %v\nwant %v", got, want)
	}

	run, err = c.Check(context.Background(), sdktest.Tool(t, "get", map[string]any{"type": "http", "url": "https://example.com/", "timeout_seconds": 5}))
	if err != nil {
		t.Fatal(err)
	}
	if string(run) != `{"type":"http","method":"GET","url":"https://example.com/","timeout_seconds":5}` {
		t.Errorf("normalised run: %s", run)
	}
}

func TestCheckErrors(t *testing.T) {
	c := start(t, &kind{}, map[string]any{"timeout_seconds": 30})
	params := []sdk.Param{text("id", true), text("q", false)}
	cases := []struct {
		run  map[string]any
		path string
		msg  string
	}{
		{map[string]any{"type": "http"}, "run.url", "is missing"},
		{map[string]any{"type": "http", "url": 5}, "run.url", "must be a string"},
		{map[string]any{"type": "http", "url": "example.com/x"}, "run.url", "http:// or https://"},
		{map[string]any{"type": "http", "url": "ftp://example.com/x"}, "run.url", "not ftp://"},
		{map[string]any{"type": "http", "url": "https:///x"}, "run.url", "no host name"},
		{map[string]any{"type": "http", "url": "https://exa mple.com/"}, "run.url", "not a URL"},
		{map[string]any{"type": "http", "url": "https://example.com/{{usr}}"}, "run.url", "{{usr}} names no parameter of this tool: its parameters are id, q"},
		{map[string]any{"type": "http", "url": "https://example.com/{{id"}, "run.url", "never closed"},
		{map[string]any{"type": "http", "url": "{{id}}"}, "", ""}, // a whole URL from a parameter is fine
		{map[string]any{"type": "http", "url": "https://example.com/", "method": "TRACE"}, "run.method", "must be one of GET, POST, PUT, PATCH, DELETE, HEAD"},
		{map[string]any{"type": "http", "url": "https://example.com/", "method": true}, "run.method", "must be a string"},
		{map[string]any{"type": "htp", "url": "https://example.com/"}, "run.type", `must be "http"`},
		{map[string]any{"type": "http", "url": "https://example.com/", "headers": "x"}, "run.headers", "must be a table"},
		{map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]any{"X-N": 1}}, "run.headers.X-N", "must be a string"},
		{map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]any{"Bad Name": "v"}}, "run.headers.Bad Name", "not a header name"},
		{map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]any{"host": "v"}}, "run.headers.host", "set by the request itself"},
		{map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]any{"X-A": "{{nope}}"}}, "run.headers.X-A", "{{nope}} names no parameter"},
		{map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]any{"X-A": "a\nb"}}, "run.headers.X-A", "line break"},
		{map[string]any{"type": "http", "url": "https://example.com/", "method": "POST", "body": "{{nope}}"}, "run.body", "{{nope}} names no parameter"},
		{map[string]any{"type": "http", "url": "https://example.com/", "method": "HEAD", "body": "x"}, "run.body", "HEAD request carries no body"},
		{map[string]any{"type": "http", "url": "https://example.com/", "method": "POST", "body": `{"a": {{id}`, "headers": map[string]any{"Content-Type": "application/json"}}, "run.body", "never closed"},
		{map[string]any{"type": "http", "url": "https://example.com/", "method": "POST", "body": `{"a": {{id}}`, "headers": map[string]any{"Content-Type": "application/json"}}, "run.body", "is not JSON"},
		{map[string]any{"type": "http", "url": "https://example.com/", "body": 3}, "run.body", "must be a string"},
		{map[string]any{"type": "http", "url": "https://example.com/", "pick": "data..name"}, "run.pick", "empty part"},
		{map[string]any{"type": "http", "url": "https://example.com/", "pick": 1}, "run.pick", "must be a string"},
		{map[string]any{"type": "http", "url": "https://example.com/", "method": "HEAD", "pick": "a"}, "run.pick", "no body to pick from"},
		{map[string]any{"type": "http", "url": "https://example.com/", "timeout_seconds": 31}, "run.timeout_seconds", "from 1 to 30"},
		{map[string]any{"type": "http", "url": "https://example.com/", "timeout_seconds": 0}, "run.timeout_seconds", "from 1 to 30"},
		{map[string]any{"type": "http", "url": "https://example.com/", "timeout_seconds": "5"}, "run.timeout_seconds", "whole number"},
		{map[string]any{"type": "http", "url": "https://example.com/", "retries": 3}, "run.retries", "not a key of an http run"},
	}
	for _, cs := range cases {
		_, err := c.Check(context.Background(), sdktest.Tool(t, "t", cs.run, params...))
		if cs.path == "" {
			if err != nil {
				t.Errorf("%v: %v", cs.run, err)
			}
			continue
		}
		fe, ok := err.(sdk.FieldErrors)
		if !ok || len(fe) != 1 || fe[0].Path != cs.path || !strings.Contains(fe[0].Message, cs.msg) {
			t.Errorf("%v:\n got %v\nwant %s: …%s…", cs.run, err, cs.path, cs.msg)
		}
	}
	// Several problems are reported together.
	_, err := c.Check(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "method": "GETT", "pick": ""}))
	if fe, ok := err.(sdk.FieldErrors); !ok || len(fe) != 3 {
		t.Errorf("three problems: %v", err)
	}
}

func TestTemplating(t *testing.T) {
	s := echo(t)
	c := open(t, nil)
	tool := sdktest.Tool(t, "t", map[string]any{
		"type":    "http",
		"method":  "POST",
		"url":     s.URL + "/items/{{id}}/notes?q={{q}}&tags={{tags}}",
		"headers": map[string]any{"Authorization": "Bearer {{token}}", "X-Name": "{{name}}"},
		"body":    `{"name": "{{name}}", "id": {{id}}, "tags": {{tags}}, "note": {{note}}}`,
	}, text("id", true), text("q", false), sdk.Param{Name: "tags", Type: "list"}, text("token", true), text("name", true), text("note", false))
	r := call(t, c, tool, map[string]any{
		"id": "a/b c", "q": "x&y=z #1", "tags": []any{"red", "blue"}, "token": "t0k3n", "name": `Zoë "Z" \ <z>`,
	})
	b := r.Body
	if r.Status != 200 || b.Method != "POST" {
		t.Fatalf("result %+v", r)
	}
	if b.Path != "/items/a%2Fb%20c/notes" {
		t.Errorf("path %q", b.Path)
	}
	if b.Args["q"][0] != "x&y=z #1" || b.Args["tags"][0] != "red,blue" || len(b.Args) != 2 {
		t.Errorf("query %q → %v", b.Query, b.Args)
	}
	if b.Headers["authorization"] != "Bearer t0k3n" || b.Headers["x-name"] != `Zoë "Z" \ <z>` {
		t.Errorf("headers %v", b.Headers)
	}
	if b.Headers["content-type"] != "application/json" || !strings.HasPrefix(b.Headers["user-agent"], "toolhost-http/") {
		t.Errorf("default headers %v", b.Headers)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(b.Body), &sent); err != nil {
		t.Fatalf("the body sent is not JSON: %s", b.Body)
	}
	if sent["name"] != `Zoë "Z" \ <z>` || sent["id"] != "a/b c" || fmt.Sprint(sent["tags"]) != "[red blue]" || sent["note"] != nil {
		t.Errorf("body sent %s", b.Body)
	}
	if r.Headers["content-type"] != "application/json" || r.Headers["etag"] != `"v1"` || r.Headers["x-secret"] != "" {
		t.Errorf("result headers %v", r.Headers)
	}

	// A form body is form-escaped, a text body goes as it is.
	form := sdktest.Tool(t, "t", map[string]any{"type": "http", "method": "PUT", "url": s.URL + "/",
		"headers": map[string]any{"Content-Type": "application/x-www-form-urlencoded"},
		"body":    "name={{name}}&x=1"}, text("name", true))
	if r := call(t, c, form, map[string]any{"name": "a&b=c d"}); r.Body.Body != "name=a%26b%3Dc+d&x=1" || r.Body.Method != "PUT" {
		t.Errorf("form body %q", r.Body.Body)
	}
	plain := sdktest.Tool(t, "t", map[string]any{"type": "http", "method": "PATCH", "url": s.URL + "/",
		"body": "hello {{name}}\n"}, text("name", true))
	if r := call(t, c, plain, map[string]any{"name": `"you" & {me}`}); r.Body.Body != "hello \"you\" & {me}\n" || !strings.HasPrefix(r.Body.Headers["content-type"], "text/plain") {
		t.Errorf("text body %q (%v)", r.Body.Body, r.Body.Headers)
	}

	// A header value can't smuggle a second header.
	run := c.Invoke(context.Background(), tool, map[string]any{"id": "1", "token": "x\r\nX-Evil: 1", "name": "n"})
	if run.ErrorCode() != "bad_argument" || !strings.Contains(run.Err.Error(), "token") {
		t.Errorf("header injection: %v", run.Err)
	}
}

func TestMethods(t *testing.T) {
	s := echo(t)
	c := open(t, nil)
	for _, m := range methods() {
		tool := sdktest.Tool(t, "t", map[string]any{"type": "http", "method": m, "url": s.URL + "/m"})
		run := c.Invoke(context.Background(), tool, map[string]any{})
		if run.Err != nil {
			t.Errorf("%s: %v", m, run.Err)
			continue
		}
		var r response
		_ = json.Unmarshal(run.Result, &r)
		if m == "HEAD" {
			if !strings.Contains(string(run.Result), `"body":null`) || r.Status != 200 {
				t.Errorf("HEAD: %s", run.Result)
			}
			continue
		}
		if r.Body.Method != m {
			t.Errorf("%s: the server saw %s", m, r.Body.Method)
		}
	}
}

func TestResponseBodies(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<p>a & b</p>")
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte{0xff, 0xfe, 0})
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG\x00\xff"))
	})
	mux.HandleFunc("/audio", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "audio/wav; codecs=1")
		_, _ = w.Write([]byte("RIFF\x00"))
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{oops")
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such item\n\n  here", http.StatusNotFound)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	c := open(t, nil)
	for path, want := range map[string]string{
		"/text":    `{"status":200,"headers":{"content-length":"12","content-type":"text/html"},"body":"<p>a & b</p>"}`,
		"/bytes":   `{"status":200,"headers":{"content-length":"3","content-type":"application/octet-stream"},"body":null,"body_base64":"//4A"}`,
		"/empty":   `{"status":204,"headers":{},"body":null}`,
		"/badjson": `{"status":200,"headers":{"content-length":"5","content-type":"application/json"},"body":"{oops"}`,
	} {
		run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + path}), nil)
		if run.Err != nil || string(run.Result) != want {
			t.Errorf("%s:\n got %s %v\nwant %s", path, run.Result, run.Err, want)
		}
	}
	// An image or a sound is the result's content, with its MIME type; the value keeps the rest.
	for path, want := range map[string]sdk.Content{
		"/image": {Type: sdk.ContentImage, Data: []byte("\x89PNG\x00\xff"), MIMEType: "image/png"},
		"/audio": {Type: sdk.ContentAudio, Data: []byte("RIFF\x00"), MIMEType: "audio/wav"},
	} {
		run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + path}), nil)
		value := fmt.Sprintf(`{"status":200,"headers":{"content-length":"%d","content-type":%q},"body":null}`, len(want.Data), want.MIMEType)
		if path == "/audio" {
			value = strings.Replace(value, `"audio/wav"`, `"audio/wav; codecs=1"`, 1)
		}
		if run.Err != nil || string(run.Result) != value || !reflect.DeepEqual(run.Content(), []sdk.Content{want}) {
			t.Errorf("%s:\n got %s %+v %v\nwant %s %+v", path, run.Result, run.Content(), run.Err, value, want)
		}
	}
	run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + "/missing?key=secret"}), nil)
	want := fmt.Sprintf("the server answered 404 Not Found to GET %s/missing: no such item here", s.URL)
	if run.ErrorCode() != "http_status" || run.Err.Error() != want {
		t.Errorf("404: %v (%s), want %q", run.Err, run.ErrorCode(), want)
	}
}

func TestPick(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/text" {
			_, _ = io.WriteString(w, "not json")
			return
		}
		w.Header().Set("Content-Type", "text/plain") // pick reads JSON whatever the type says
		_, _ = io.WriteString(w, `{"data": {"items": [{"name": "first", "n": 12345678901234567890}, {"name": "<second>"}], "total": 2, "ok": true, "none": null}}`)
	}))
	t.Cleanup(s.Close)
	c := open(t, nil)
	for pick, want := range map[string]string{
		"data.items.0.name": `"first"`,
		"data.items.1.name": `"<second>"`,
		"data.items.0.n":    `12345678901234567890`,
		"data.total":        `2`,
		"data.ok":           `true`,
		"data.none":         `null`,
		"data.items.1":      `{"name":"<second>"}`,
	} {
		run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + "/", "pick": pick}), nil)
		if run.Err != nil || string(run.Result) != want {
			t.Errorf("%s: %s %v, want %s", pick, run.Result, run.Err, want)
		}
	}
	for pick, want := range map[string]string{
		"data.itemz":          `the response has no field data.itemz: data has no "itemz"`,
		"data.items.2.name":   `the response has no field data.items.2.name: data.items has 2 items`,
		"data.items.first":    `data.items is a list, and "first" is not a position in it`,
		"data.total.value":    `data.total is a number, not an object or a list`,
		"data.none.x":         `data.none is null`,
		"data.items.0.name.x": `data.items.0.name is a string`,
	} {
		run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + "/", "pick": pick}), nil)
		if run.ErrorCode() != "pick_missing" || !strings.Contains(run.Err.Error(), want) {
			t.Errorf("%s: %v (%s), want …%s…", pick, run.Err, run.ErrorCode(), want)
		}
	}
	run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + "/text", "pick": "a"}), nil)
	if run.ErrorCode() != "not_json" {
		t.Errorf("pick from text: %v", run.Err)
	}
}

// exempting is a kind that dials the test server s although it is on
// loopback, so that it can be the allowed first hop.
func exempting(t *testing.T, s *httptest.Server) *kind {
	ap, err := netip.ParseAddrPort(s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return &kind{exempt: ap}
}

func TestPrivateRefused(t *testing.T) {
	hit := make(chan struct{}, 10)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit <- struct{}{} }))
	t.Cleanup(s.Close)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	c := start(t, &kind{}, map[string]any{})
	for _, u := range []string{s.URL + "/", "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": u}), nil)
		if run.ErrorCode() != "private_address" {
			t.Errorf("%s: %v (%s), want private_address", u, run.Err, run.ErrorCode())
			continue
		}
		if !strings.Contains(run.Err.Error(), "is private (loopback): this host only calls public addresses unless [http] allow_private = true") {
			t.Errorf("%s: message %q", u, run.Err)
		}
	}
	run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + "/"}), nil)
	if want := "the address 127.0.0.1 is private (loopback): this host only calls public addresses unless [http] allow_private = true"; run.Err == nil || run.Err.Error() != want {
		t.Errorf("message %v, want %q", run.Err, want)
	}
	select {
	case <-hit:
		t.Errorf("the server was reached")
	default:
	}
}

func TestRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/end", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"arrived": true}`)
	})
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		_, _ = fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			http.Redirect(w, r, "/end", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	var target string
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) })
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the server behind the redirect was reached")
	}))
	t.Cleanup(other.Close)
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	c := start(t, exempting(t, s), map[string]any{})
	get := func(path string) *sdktest.Run {
		return c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + path, "pick": "arrived"}), nil)
	}
	if run := get("/hop/4"); run.Err != nil || string(run.Result) != "true" {
		t.Errorf("five redirects: %s %v", run.Result, run.Err)
	}
	if run := get("/hop/5"); run.ErrorCode() != "too_many_redirects" || !strings.Contains(run.Err.Error(), "at most 5 redirects") {
		t.Errorf("six redirects: %v (%s)", run.Err, run.ErrorCode())
	}
	for _, tc := range []struct{ to, code, msg string }{
		// written as an address: refused by the redirect policy
		{"http://127.0.0.2:" + port + "/end", "private_address", "the server redirected to http://127.0.0.2:" + port + "/end, and the address 127.0.0.2 is private (loopback)"},
		{"http://169.254.169.254/latest/meta-data/", "private_address", "the address 169.254.169.254 is private (the cloud metadata address)"},
		// the same address, another port: still private
		{other.URL + "/end", "private_address", "the server redirected to " + other.URL + "/end, and the address 127.0.0.1 is private (loopback)"},
		// a name that resolves to a private address: refused when dialled
		{"http://localhost:" + otherPort + "/end", "private_address", "the server redirected to http://localhost:" + otherPort + "/end, and the address"},
		{"ftp://127.0.0.1/x", "bad_redirect", "only follows redirects to http and https"},
	} {
		target = tc.to
		run := get("/away")
		if run.ErrorCode() != tc.code || !strings.Contains(run.Err.Error(), tc.msg) {
			t.Errorf("redirect to %s: %v (%s), want %s …%s…", tc.to, run.Err, run.ErrorCode(), tc.code, tc.msg)
		}
	}
}

func TestSizeCap(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 1024
		if r.URL.Path == "/big" {
			n = 1025
		}
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", fmt.Sprint(n))
		} else {
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write([]byte(strings.Repeat("x", n)))
	}))
	t.Cleanup(s.Close)
	c := open(t, map[string]any{"max_bytes": 1024})
	for _, u := range []string{"/fits", "/fits?chunked=1"} {
		if run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + u}), nil); run.Err != nil {
			t.Errorf("%s: %v", u, run.Err)
		}
	}
	// A HEAD response announces a size but has no body.
	if run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "method": "HEAD", "url": s.URL + "/big"}), nil); run.Err != nil {
		t.Errorf("HEAD: %v", run.Err)
	}
	for _, u := range []string{"/big", "/big?chunked=1"} {
		run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + u}), nil)
		if run.ErrorCode() != "too_large" || !strings.Contains(run.Err.Error(), "larger than 1 KiB") || !strings.Contains(run.Err.Error(), "max_bytes = 1024") {
			t.Errorf("%s: %v (%s)", u, run.Err, run.ErrorCode())
		}
	}
}

// slow answers after a long time, and reports when its request is given
// up.
func slow(t *testing.T) (*httptest.Server, chan struct{}) {
	gone := make(chan struct{}, 10)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(s.Close)
	return s, gone
}

func TestTimeout(t *testing.T) {
	s, gone := slow(t)
	c := open(t, map[string]any{"timeout_seconds": 5})
	begin := time.Now()
	run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + "/?key=secret", "timeout_seconds": 1}), nil)
	took := time.Since(begin)
	want := fmt.Sprintf("the request to %s/ took longer than 1 second and was stopped", s.URL)
	if run.ErrorCode() != "timeout" || !strings.Contains(run.Err.Error(), want) {
		t.Errorf("%v (%s), want %q", run.Err, run.ErrorCode(), want)
	}
	if took < time.Second || took > 3*time.Second {
		t.Errorf("the call took %s", took)
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Errorf("the server's request was not given up")
	}
}

func TestCancel(t *testing.T) {
	s, gone := slow(t)
	c := open(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	begin := time.Now()
	run := c.Invoke(ctx, sdktest.Tool(t, "t", map[string]any{"type": "http", "url": s.URL + "/"}), nil)
	if run.Err == nil || time.Since(begin) > 2*time.Second {
		t.Errorf("cancel: %v after %s", run.Err, time.Since(begin))
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Errorf("the request went on after the run was cancelled")
	}
}

func TestConnectionErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := open(t, nil)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": "http://" + addr + "/"}), nil)
	if want := "the server at " + addr + " refused the connection"; run.ErrorCode() != "http_error" || !strings.Contains(run.Err.Error(), want) {
		t.Errorf("refused: %v (%s), want …%s…", run.Err, run.ErrorCode(), want)
	}
	run = c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": "http://no-such-host.invalid/"}), nil)
	if run.ErrorCode() != "http_error" || !strings.Contains(run.Err.Error(), "no-such-host.invalid was not found") {
		t.Errorf("dns: %v (%s)", run.Err, run.ErrorCode())
	}
	s := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(s.Close)
	run = c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": strings.Replace(s.URL, "http:", "https:", 1)}), nil)
	if run.ErrorCode() != "http_error" || !strings.Contains(run.Err.Error(), "did not answer in TLS") {
		t.Errorf("tls to http: %v (%s)", run.Err, run.ErrorCode())
	}
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsServer.Close)
	run = c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "http", "url": tlsServer.URL}), nil)
	if run.ErrorCode() != "http_error" || !strings.Contains(run.Err.Error(), "certificate") {
		t.Errorf("self-signed: %v (%s)", run.Err, run.ErrorCode())
	}
}

func TestWholeURLParam(t *testing.T) {
	s := echo(t)
	c := open(t, nil)
	tool := sdktest.Tool(t, "fetch", map[string]any{"type": "http", "url": "{{url}}"}, text("url", true))
	if r := call(t, c, tool, map[string]any{"url": s.URL + "/a/b?c=d"}); r.Body.Path != "/a/b" || r.Body.Query != "c=d" {
		t.Errorf("%+v", r.Body)
	}
	for _, u := range []string{"file:///etc/passwd", "gopher://x/", "/relative", ""} {
		run := c.Invoke(context.Background(), tool, map[string]any{"url": u})
		if run.ErrorCode() != "bad_argument" {
			t.Errorf("%q: %v (%s)", u, run.Err, run.ErrorCode())
		}
	}
}
