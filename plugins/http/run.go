package main

import (
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

// runKeysMessage is the message for a key an http run doesn't have.
const runKeysMessage = "is not a key of an http run: the keys are type, method, url, headers, body, pick, timeout_seconds and redirect_hosts"

// compiler reads one tool's run table into a plan.
type compiler struct {
	tool   sdk.Tool
	params map[string]bool
	t      *sdk.RunTable
	p      *plan
}

// compile checks a tool's run table against the kind's config and its
// params, and parses its templates. The error is sdk.FieldErrors.
func compile(tool sdk.Tool, cfg config) (*plan, error) {
	t, err := sdk.DecodeRunTable(tool.Run)
	if err != nil {
		return nil, err
	}
	c := &compiler{tool: tool, params: map[string]bool{}, t: t,
		p: &plan{run: run{Type: "http", Method: "GET", TimeoutSeconds: cfg.TimeoutSeconds}}}
	for _, prm := range tool.Params {
		c.params[prm.Name] = true
	}
	c.readType()
	c.readMethod()
	c.readURL()
	contentType := c.readHeaders()
	c.readBody(contentType)
	c.readPick()
	c.readTimeout(cfg.TimeoutSeconds)
	c.p.redirectHosts = parseRedirectHosts(t)
	c.p.RedirectHosts = c.p.redirectHosts
	t.Done(func(string) string { return runKeysMessage })
	if err := t.Err(); err != nil {
		return nil, err
	}
	return c.p, nil
}

// checkNames reports placeholders of tmpl, read from key of t, that name
// no parameter.
func (c *compiler) checkNames(t *sdk.RunTable, key string, tmpl template) {
	for _, n := range tmpl.names() {
		if !c.params[n] {
			t.Errorf(key, "{{%s}} names no parameter of this tool: %s", n, paramList(c.tool.Params))
		}
	}
}

// readType checks run.type.
func (c *compiler) readType() {
	if typ, ok := c.t.String("type", "must be a string"); ok && typ != "http" {
		c.t.Errorf("type", "must be \"http\" for this kind, not %q", typ)
	}
}

// readMethod reads run.method, in upper case.
func (c *compiler) readMethod() {
	method, ok := c.t.String("method", "must be a string")
	if !ok {
		return
	}
	up := strings.ToUpper(strings.TrimSpace(method))
	if !slices.Contains(methods(), up) {
		c.t.Errorf("method", "must be one of %s, not %q", strings.Join(methods(), ", "), method)
		return
	}
	c.p.Method = up
}

// readURL reads run.url and parses its template.
func (c *compiler) readURL() {
	s, ok := c.t.String("url", "must be a string")
	if !ok {
		if !c.t.Has("url") {
			c.t.Errorf("url", "is missing: add url = \"https://…\", with {{param}} where a parameter goes")
		}
		return
	}
	c.p.URL = s
	t, err := parseTemplate(s)
	if err == nil {
		t, err = t.forURL()
	}
	if err == nil {
		err = sampleURL(t)
	}
	if err != nil {
		c.t.Errorf("url", "%v", err)
		return
	}
	c.p.url = t
	c.checkNames(c.t, "url", t)
}

// readHeaders reads run.headers and parses their templates. It returns
// the Content-Type given, or "".
func (c *compiler) readHeaders() (contentType string) {
	if !c.t.Has("headers") {
		return ""
	}
	c.p.Headers = map[string]string{}
	hs, _ := c.t.Table("headers", "must be a table of header names and values")
	if hs != nil {
		for _, name := range hs.Keys() {
			val, ok := hs.String(name, "must be a string")
			if ok && c.readHeader(hs, name, val) && http.CanonicalHeaderKey(name) == "Content-Type" {
				contentType = val
			}
		}
	}
	if len(c.p.Headers) == 0 {
		c.p.Headers = nil
	}
	return contentType
}

// readHeader checks one header of run.headers and adds it to the plan;
// false when it is refused.
func (c *compiler) readHeader(hs *sdk.RunTable, name, val string) bool {
	canon := http.CanonicalHeaderKey(name)
	switch {
	case !validHeaderName(name):
		hs.Errorf(name, "%q is not a header name: use letters, digits and hyphens", name)
		return false
	case slices.Contains(reservedHeaders(), canon):
		hs.Errorf(name, "%s is set by the request itself and can't be given", canon)
		return false
	case strings.ContainsAny(val, "\r\n\x00"):
		hs.Errorf(name, "must not hold a line break or a NUL character")
		return false
	}
	if _, dup := c.p.Headers[canon]; dup {
		hs.Errorf(name, "%s is given twice (header names are not case-sensitive)", canon)
		return false
	}
	t, err := parseTemplate(val)
	if err != nil {
		hs.Errorf(name, "%v", err)
		return false
	}
	c.checkNames(hs, name, t)
	c.p.Headers[canon] = val
	c.p.headers = append(c.p.headers, header{name: canon, value: t.withEscaping(escHeader)})
	return true
}

// readBody reads run.body and parses its template, escaping values as
// contentType (or, when none is given, the body's shape) says.
func (c *compiler) readBody(contentType string) {
	body, ok := c.t.String("body", "must be a string")
	if !ok {
		return
	}
	c.p.Body = body
	if body == "" {
		return
	}
	t, err := parseTemplate(body)
	switch {
	case err != nil:
		c.t.Errorf("body", "%v", err)
		return
	case c.p.Method == "HEAD":
		c.t.Errorf("body", "a HEAD request carries no body: leave body out or use another method")
		return
	}
	c.checkNames(c.t, "body", t)
	media, _, _ := mime.ParseMediaType(contentType)
	switch {
	case isJSONMedia(media):
		if err := t.jsonShaped(); err != nil {
			c.t.Errorf("body", "is sent as %s but is not JSON (with its placeholders filled in): %v", media, err)
		}
		c.p.bodyKind, c.p.body = bodyJSON, t.forJSON()
	case media == "application/x-www-form-urlencoded":
		c.p.bodyKind, c.p.body = bodyForm, t.withEscaping(escQuery)
	case contentType == "" && t.jsonShaped() == nil:
		c.p.bodyKind, c.p.body = bodyJSON, t.forJSON()
	default:
		c.p.bodyKind, c.p.body = bodyText, t.withEscaping(escRaw)
	}
}

// readPick reads run.pick, a dotted path.
func (c *compiler) readPick() {
	pick, ok := c.t.String("pick", "must be a string")
	if !ok {
		return
	}
	c.p.Pick = pick
	c.p.pick = strings.Split(pick, ".")
	switch {
	case slices.Contains(c.p.pick, ""):
		c.t.Errorf("pick", "has an empty part: write the field's path with single dots, e.g. data.items.0.name")
	case c.p.Method == "HEAD":
		c.t.Errorf("pick", "a HEAD response has no body to pick from: leave pick out or use another method")
	}
}

// readTimeout reads run.timeout_seconds, at most most, the host's.
func (c *compiler) readTimeout(most int) {
	wrong := fmt.Sprintf("must be a whole number of seconds from 1 to %d, not %s (at most [http] timeout_seconds of this host)",
		most, clip(c.t.Written("timeout_seconds"), 40))
	if n, ok := c.t.Int("timeout_seconds", 1, most, wrong); ok {
		c.p.TimeoutSeconds = n
	}
	c.p.timeout = time.Duration(c.p.TimeoutSeconds) * time.Second
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
