package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// methods are the methods a tool may use.
func methods() []string {
	return []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
}

// reservedHeaders are set by the request itself and can't be written in
// run.headers.
func reservedHeaders() []string {
	return []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Keep-Alive", "Proxy-Connection"}
}

// run is an http tool's run table, normalised.
type run struct {
	Type           string            `json:"type"`
	Method         string            `json:"method"`
	URL            string            `json:"url"`
	Headers        map[string]string `json:"headers,omitempty"`
	Body           string            `json:"body,omitempty"`
	Pick           string            `json:"pick,omitempty"`
	TimeoutSeconds int               `json:"timeout_seconds"`
	RedirectHosts  []string          `json:"redirect_hosts,omitempty"`
}

// bodyKind is how a body template is filled in.
type bodyKind string

const (
	bodyNone bodyKind = ""
	bodyText bodyKind = "text" // values as they are
	bodyJSON bodyKind = "json" // values JSON-escaped
	bodyForm bodyKind = "form" // values form-encoded
)

// header is one header of the request, its value a template.
type header struct {
	name  string
	value template
}

// plan is a checked run, its templates parsed: what Invoke follows.
type plan struct {
	run
	url      template
	headers  []header
	body     template
	bodyKind bodyKind
	pick     []string
	timeout  time.Duration
	// redirectHosts are run.redirect_hosts, normalised.
	redirectHosts []string
}

// compile checks a tool's run table against the kind's config and its
// params, and parses its templates. The error is sdk.FieldErrors.
func compile(tool sdk.Tool, cfg config) (*plan, error) {
	var fe sdk.FieldErrors
	var m map[string]json.RawMessage
	if err := json.Unmarshal(tool.Run, &m); err != nil || m == nil {
		return nil, sdk.FieldErrors{{Path: "run", Message: "must be a table"}}
	}
	p := &plan{run: run{Type: "http", Method: "GET", TimeoutSeconds: cfg.TimeoutSeconds}}
	params := map[string]bool{}
	for _, prm := range tool.Params {
		params[prm.Name] = true
	}
	str := func(key string, dst *string) bool {
		v, ok := m[key]
		if !ok {
			return false
		}
		if err := json.Unmarshal(v, dst); err != nil || string(bytes.TrimSpace(v)) == "null" {
			addf(&fe, "run."+key, "must be a string")
			return false
		}
		return true
	}
	// checkNames reports placeholders that name no parameter.
	checkNames := func(path string, t template) {
		for _, n := range t.names() {
			if !params[n] {
				addf(&fe, path, "{{%s}} names no parameter of this tool: %s", n, paramList(tool.Params))
			}
		}
	}

	for _, k := range sortedKeys(m) {
		switch k {
		case "type", "method", "url", "headers", "body", "pick", "timeout_seconds", "redirect_hosts":
		default:
			addf(&fe, "run."+k, "is not a key of an http run: the keys are type, method, url, headers, body, pick, timeout_seconds and redirect_hosts")
		}
	}

	var typ string
	if str("type", &typ) && typ != "http" {
		addf(&fe, "run.type", "must be \"http\" for this kind, not %q", typ)
	}

	var method string
	if str("method", &method) {
		up := strings.ToUpper(strings.TrimSpace(method))
		if slices.Contains(methods(), up) {
			p.Method = up
		} else {
			addf(&fe, "run.method", "must be one of %s, not %q", strings.Join(methods(), ", "), method)
		}
	}

	if str("url", &p.URL) {
		t, err := parseTemplate(p.URL)
		if err == nil {
			t, err = t.forURL()
		}
		if err == nil {
			err = sampleURL(t)
		}
		if err != nil {
			addf(&fe, "run.url", "%v", err)
		} else {
			p.url = t
			checkNames("run.url", t)
		}
	} else if _, ok := m["url"]; !ok {
		addf(&fe, "run.url", "is missing: add url = \"https://…\", with {{param}} where a parameter goes")
	}

	contentType := ""
	if v, ok := m["headers"]; ok {
		var hs map[string]json.RawMessage
		if err := json.Unmarshal(v, &hs); err != nil || hs == nil {
			addf(&fe, "run.headers", "must be a table of header names and values")
		}
		p.Headers = map[string]string{}
		for _, name := range sortedKeys(hs) {
			path := "run.headers." + name
			var val string
			if err := json.Unmarshal(hs[name], &val); err != nil || string(bytes.TrimSpace(hs[name])) == "null" {
				addf(&fe, path, "must be a string")
				continue
			}
			canon := http.CanonicalHeaderKey(name)
			switch {
			case !validHeaderName(name):
				addf(&fe, path, "%q is not a header name: use letters, digits and hyphens", name)
				continue
			case slices.Contains(reservedHeaders(), canon):
				addf(&fe, path, "%s is set by the request itself and can't be given", canon)
				continue
			case strings.ContainsAny(val, "\r\n\x00"):
				addf(&fe, path, "must not hold a line break or a NUL character")
				continue
			}
			if _, dup := p.Headers[canon]; dup {
				addf(&fe, path, "%s is given twice (header names are not case-sensitive)", canon)
				continue
			}
			t, err := parseTemplate(val)
			if err != nil {
				addf(&fe, path, "%v", err)
				continue
			}
			checkNames(path, t)
			p.Headers[canon] = val
			p.headers = append(p.headers, header{name: canon, value: t.withEscaping(escHeader)})
			if canon == "Content-Type" {
				contentType = val
			}
		}
		if len(p.Headers) == 0 {
			p.Headers = nil
		}
	}

	if str("body", &p.Body) && p.Body != "" {
		t, err := parseTemplate(p.Body)
		switch {
		case err != nil:
			addf(&fe, "run.body", "%v", err)
		case p.Method == "HEAD":
			addf(&fe, "run.body", "a HEAD request carries no body: leave body out or use another method")
		default:
			checkNames("run.body", t)
			media, _, _ := mime.ParseMediaType(contentType)
			switch {
			case isJSONMedia(media):
				if err := t.jsonShaped(); err != nil {
					addf(&fe, "run.body", "is sent as %s but is not JSON (with its placeholders filled in): %v", media, err)
				}
				p.bodyKind, p.body = bodyJSON, t.forJSON()
			case media == "application/x-www-form-urlencoded":
				p.bodyKind, p.body = bodyForm, t.withEscaping(escQuery)
			case contentType == "" && t.jsonShaped() == nil:
				p.bodyKind, p.body = bodyJSON, t.forJSON()
			default:
				p.bodyKind, p.body = bodyText, t.withEscaping(escRaw)
			}
		}
	}

	if str("pick", &p.Pick) {
		p.pick = strings.Split(p.Pick, ".")
		switch {
		case slices.Contains(p.pick, ""):
			addf(&fe, "run.pick", "has an empty part: write the field's path with single dots, e.g. data.items.0.name")
		case p.Method == "HEAD":
			addf(&fe, "run.pick", "a HEAD response has no body to pick from: leave pick out or use another method")
		}
	}

	if v, ok := m["timeout_seconds"]; ok {
		n, msg := wholeNumber(v, "seconds", 1, int64(cfg.TimeoutSeconds))
		if msg != "" {
			addf(&fe, "run.timeout_seconds", "%s (at most [http] timeout_seconds of this host)", msg)
		} else {
			p.TimeoutSeconds = int(n)
		}
	}
	p.timeout = time.Duration(p.TimeoutSeconds) * time.Second

	if v, ok := m["redirect_hosts"]; ok {
		p.redirectHosts = parseRedirectHosts(v, &fe)
		p.RedirectHosts = p.redirectHosts
	}

	if fe != nil {
		return nil, fe
	}
	return p, nil
}

// sampleURL fills a URL template with sample values and checks that the
// result is an http or https URL with a host.
func sampleURL(t template) error {
	a := args{}
	for i, p := range t {
		switch {
		case p.name == "":
		case i == 0 && p.esc == escRaw:
			a[p.name] = json.RawMessage(`"https://example.com"`)
		default:
			a[p.name] = json.RawMessage(`"x"`)
		}
	}
	s, err := t.render(a, "the URL")
	if err != nil {
		return err
	}
	return checkURL(s)
}

// checkURL checks a URL as it will be requested. Its messages show the
// URL without its userinfo and query (see redact).
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%q is not a URL: %v", clip(redact(s), 200), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q is not an http or https URL", clip(safeURL(u), 200))
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host name", clip(safeURL(u), 200))
	}
	return nil
}

// paramList says which parameters a tool has, for messages.
func paramList(ps []sdk.Param) string {
	if len(ps) == 0 {
		return "the tool has no parameters"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return "its parameters are " + strings.Join(names, ", ")
}

func isJSONMedia(media string) bool {
	return media == "application/json" || strings.HasSuffix(media, "+json")
}

// validHeaderName says whether s is an HTTP token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
