package main

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/sdk"
)

// A redirect may lead anywhere the server likes. What the tool wrote for
// the host in its URL (its headers, and the body) goes on only to that
// host, and to the hosts the tool lists in run.redirect_hosts:
//
//   - A hop to any other host (scheme, host or port not those of the URL,
//     and not listed) gets none of the tool's headers: the request carries
//     only this kind's User-Agent. The headers stay dropped for the rest
//     of the redirects, even back on the first host (that hop's URL was
//     chosen by the host that was not trusted).
//   - A hop from https to plain http gets none of them either, listed or
//     not: they would cross the network in the clear.
//   - No hop ever carries a Referer, unless the tool sets one: net/http
//     would send the previous URL in it, query and all.
//   - The body: a 301, 302 or 303 turns the request into a GET without its
//     body anyway. A 307 or 308 asks for the same request, body included,
//     at the new place. To another host that is refused with bad_redirect
//     rather than sent as a GET without its body: a 307 promises the server
//     the method and the body unchanged, and the tool's user would get the
//     answer to a different request than the one the tool makes, with no
//     sign of it. The message says what to list to let the body go there.

// redirectPolicy is the http.Client's CheckRedirect of one call: the
// address rules of g, then the rules above for the tool p.
func redirectPolicy(g *guard, p *plan) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if err := g.checkRedirect(req, via); err != nil {
			return err
		}
		first := via[0]
		_, toolReferer := p.Headers["Referer"]
		if p.trustedChain(via, req) {
			// net/http drops Authorization and Cookie on its own when the
			// host name changes; a listed host gets them back.
			for _, name := range sensitiveHeaders() {
				if v, ok := first.Header[name]; ok {
					req.Header[name] = v
				}
			}
			if !toolReferer {
				req.Header.Del("Referer")
			}
			return nil
		}
		last := via[len(via)-1]
		downgrade := slices.ContainsFunc(via, func(r *http.Request) bool { return r.URL.Scheme == "https" }) && req.URL.Scheme == "http"
		if (req.Body != nil && req.Body != http.NoBody) || req.GetBody != nil {
			status := "a redirect"
			if req.Response != nil {
				status = req.Response.Status
			}
			msg := fmt.Sprintf("the server answered %s to %s %s, which would send the request's body on to %s", status, last.Method, safeURL(last.URL), safeURL(req.URL))
			if downgrade {
				msg += " from https to plain http: this host never sends a tool's body over plain http once the request has gone over https"
			} else {
				msg += fmt.Sprintf(", another host: this host sends a tool's body only to the host in its URL and to the hosts in run.redirect_hosts (add %q there if it may have it)", hostEntry(req.URL))
			}
			return &refusal{code: "bad_redirect", msg: msg}
		}
		req.Header = http.Header{"User-Agent": {userAgent()}}
		return nil
	}
}

// userAgent is the User-Agent of a request whose tool does not set one.
func userAgent() string { return "toolhost-http/" + version }

// sensitiveHeaders are the headers net/http drops on its own when a
// redirect leads to another host name.
func sensitiveHeaders() []string {
	return []string{"Authorization", "Www-Authenticate", "Cookie", "Cookie2", "Proxy-Authorization", "Proxy-Authenticate"}
}

// trustedChain says whether every hop so far, and req, may have the
// tool's headers: each is on the first request's host or a listed one,
// and none is plain http after one was https.
func (p *plan) trustedChain(via []*http.Request, req *http.Request) bool {
	tls := false
	for _, r := range append(slices.Clip(via), req) {
		switch {
		case r.URL.Scheme == "https":
			tls = true
		case tls:
			return false
		}
		if r != via[0] && !p.trusted(via[0].URL, r.URL) {
			return false
		}
	}
	return true
}

// trusted says whether a redirect from the URL from to the URL to may
// carry the tool's headers: to is on the same scheme, host and port as
// from, or on a host of run.redirect_hosts and not plain http after https.
func (p *plan) trusted(from, to *url.URL) bool {
	toHost, toPort := canonHost(to.Hostname()), portOf(to)
	if strings.EqualFold(from.Scheme, to.Scheme) && canonHost(from.Hostname()) == toHost && portOf(from) == toPort {
		return true
	}
	if strings.EqualFold(from.Scheme, "https") && !strings.EqualFold(to.Scheme, "https") {
		return false
	}
	for _, e := range p.redirectHosts {
		host, port := splitEntry(e)
		if host == toHost && (port == toPort || (port == "" && toPort == defaultPort(to.Scheme))) {
			return true
		}
	}
	return false
}

// portOf is u's port, or its scheme's when none is written.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return defaultPort(u.Scheme)
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// canonHost is a host name in lower case, or an address written the one
// way netip writes it.
func canonHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" {
		return a.String()
	}
	return strings.ToLower(h)
}

// splitEntry splits a normalised entry of redirect_hosts into its host
// (without brackets) and its port ("" when not given).
func splitEntry(e string) (host, port string) {
	if h, p, err := net.SplitHostPort(e); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"), ""
}

// hostEntry is how redirect_hosts would list the host of u: the port only
// when it is not the scheme's.
func hostEntry(u *url.URL) string {
	host := canonHost(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && p != defaultPort(u.Scheme) {
		return host + ":" + p
	}
	return host
}

// parseRedirectHosts reads run.redirect_hosts from t (where its problems
// go), and returns its entries normalised: host names in
// lower case, addresses written one way, IPv6 in brackets, a port kept
// when given.
func parseRedirectHosts(t *sdk.RunTable) []string {
	const key = "redirect_hosts"
	const example = `e.g. "api2.example.com" or "api2.example.com:8443"`
	items, ok := t.List(key, `must be a list of host names that redirects may carry the tool's headers and body to, e.g. ["api2.example.com"]`)
	if !ok {
		return nil
	}
	var out []string
	for i := range items.Len() {
		at := fmt.Sprintf("%s[%d]", key, i)
		s, ok := items.String(i, "must be a string: a host name, "+example)
		if !ok {
			continue
		}
		// The entry is not quoted in these messages: one written with a
		// user and password would show them.
		s = strings.TrimSpace(s)
		var host, port string
		switch {
		case s == "":
			t.Errorf(at, "is empty: write a host name, %s", example)
			continue
		case strings.ContainsAny(s, "/?#@\\"):
			t.Errorf(at, "is not a host: write the host alone, without a scheme, user, path or query, %s", example)
			continue
		case strings.Contains(s, "*"):
			t.Errorf(at, "can't hold a wildcard: each host must be named, %s", example)
			continue
		case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
			host = s[1 : len(s)-1]
		case strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "["):
			t.Errorf(at, "an IPv6 address goes in brackets, e.g. \"[2001:db8::1]\" or \"[2001:db8::1]:8443\"")
			continue
		case strings.Contains(s, ":"):
			h, p, err := net.SplitHostPort(s)
			if err != nil {
				t.Errorf(at, "is not a host name and port: write it as %s", example)
				continue
			}
			host, port = h, p
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
				t.Errorf(at, "has a port that is not a number from 1 to 65535: %s", example)
				continue
			}
		default:
			host = s
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if a.Zone() != "" {
				t.Errorf(at, "can't name an address with a zone (%%…): give the address alone")
				continue
			}
			host = a.String()
			if a.Is6() {
				host = "[" + host + "]"
			}
		} else if strings.Contains(host, ":") || !validHostName(host) {
			t.Errorf(at, "is not a host name: use letters, digits, dots and hyphens, %s", example)
			continue
		} else {
			host = strings.ToLower(host)
		}
		entry := host
		if port != "" {
			entry += ":" + port
		}
		if slices.Contains(out, entry) {
			t.Errorf(at, "is listed twice (host names are not case-sensitive)")
			continue
		}
		out = append(out, entry)
	}
	return out
}

// validHostName says whether s is made of letters, digits, hyphens,
// underscores and dots, in labels that are not empty.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
