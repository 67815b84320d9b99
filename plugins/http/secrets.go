package main

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// No message of this kind (an error, a log line, an event) shows a secret
// of a tool's request. A URL in a message is written by safeURL or
// redact: scheme, host and path, never the userinfo, the query or the
// fragment, where keys go. Header values and bodies are never written.
// Text that comes from elsewhere and may quote the request (the start of
// an error response, an error of net/http quoting a Location) goes
// through secrets.hide first.

// safeURL is u with only its scheme, host and path, for messages and
// logs: a query often carries a key, a userinfo a user and password.
func safeURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return v.String()
}

// redact is safeURL for a URL given as text, which may not parse: then
// everything from the first ? or #, and everything before the last @ of
// what follows the scheme, is cut.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return safeURL(u)
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	if j := strings.LastIndex(s[start:], "@"); j >= 0 {
		s = s[:start] + s[start+j+1:]
	}
	return s
}

// minSecret is the length from which a value is hidden: shorter ones are
// more likely words of the text (en, json, 1) than keys.
const minSecret = 6

// publicHeaders are headers whose values are not secrets.
func publicHeaders() []string {
	return []string{"User-Agent", "Accept", "Accept-Language", "Accept-Encoding", "Content-Type", "Content-Language", "Content-Encoding"}
}

// secrets are the values of a request that no message may show.
type secrets struct {
	values []string // longest first
}

// secretsOf collects the secrets of req: its userinfo, its query (whole,
// and each value as sent and as decoded), and its header values (whole,
// and each word of them, and the credentials of a Basic Authorization).
func secretsOf(req *http.Request) secrets {
	var vals []string
	add := func(v string) {
		if len(v) >= minSecret && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	if u := req.URL.User; u != nil {
		add(u.Username())
		pw, _ := u.Password()
		add(pw)
		add(u.String())
	}
	add(req.URL.RawQuery)
	for _, pair := range strings.FieldsFunc(req.URL.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		_, v, ok := strings.Cut(pair, "=")
		if !ok {
			v = pair
		}
		add(v)
		if d, err := url.QueryUnescape(v); err == nil {
			add(d)
		}
	}
	for name, vv := range req.Header {
		if slices.Contains(publicHeaders(), name) {
			continue
		}
		for _, v := range vv {
			add(v)
			for _, w := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' || r == ';' }) {
				add(w)
				if _, after, ok := strings.Cut(w, "="); ok {
					add(after)
				}
			}
			if name == "Authorization" {
				if scheme, cred, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Basic") {
					if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil {
						user, pw, _ := strings.Cut(string(raw), ":")
						add(string(raw))
						add(user)
						add(pw)
					}
				}
			}
		}
	}
	slices.SortStableFunc(vals, func(a, b string) int { return len(b) - len(a) })
	return secrets{values: vals}
}

// hide writes s with every secret replaced by [hidden].
func (sec secrets) hide(s string) string {
	if len(sec.values) == 0 {
		return s
	}
	pairs := make([]string, 0, 2*len(sec.values))
	for _, v := range sec.values {
		pairs = append(pairs, v, "[hidden]")
	}
	return strings.NewReplacer(pairs...).Replace(s)
}
