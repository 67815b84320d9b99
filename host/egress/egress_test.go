package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// syncBuffer is a log the proxy's goroutines write to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testProxy is a proxy on loopback whose package servers (http on :80, https on :443) are in a
// lab namespace, reached through the test resolver's names.
type testProxy struct {
	p     *Proxy
	keys  *Keys
	lab   *lab
	up    *upstream
	log   *syncBuffer
	https *httptest.Server
}

const testSession = "s0123456789abcdef01234567"

func newTestProxy(t *testing.T) *testProxy {
	t.Helper()
	l := newLab(t)
	up := &upstream{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.record(r)
		fmt.Fprintf(w, "package server: %s %s", r.Host, r.URL.Path)
	})
	plain := &http.Server{Handler: handler}
	go func() { _ = plain.Serve(l.listen(t, l.nsIP.String()+":80")) }()
	t.Cleanup(func() { _ = plain.Close() })
	tlsSrv := httptest.NewUnstartedServer(handler)
	tlsSrv.Listener = l.listen(t, l.nsIP.String()+":443")
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	ns := []netip.Addr{l.nsIP}
	res := fakeResolver{
		"pkgs.test": ns, "a.files.test": ns, "deep.a.files.test": ns, "files.test": ns,
		"files.example.org": ns, "pkgs.test.evil.org": ns,
		"private.test": {netip.MustParseAddr("192.168.77.7")},
		"self.test":    {l.hostIP},
		"loop.test":    {netip.MustParseAddr("127.0.0.1")},
		"meta.test":    {netip.MustParseAddr("169.254.169.254")},
		"cgnat.test":   {netip.MustParseAddr("100.64.1.1")},
	}
	keys, err := NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logBuf := &syncBuffer{}
	p, err := New(context.Background(), Options{
		Listener:     ln,
		AllowedHosts: []string{"pkgs.test", "*.files.test", "private.test", "self.test", "loop.test", "meta.test", "cgnat.test", "nx.test"},
		Resolver:     res,
		AllowAddrs:   []netip.Prefix{l.net}, // the lab's /24: this machine's side (.1) among it
		Auth:         keys.Auth,
		Log:          hclog.New(&hclog.LoggerOptions{Output: logBuf, Level: hclog.Debug}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return &testProxy{p: p, keys: keys, lab: l, up: up, log: logBuf, https: tlsSrv}
}

// client is an HTTP client that goes through the proxy as session.
func (tp *testProxy) client(session string) *http.Client {
	u, _ := url.Parse(tp.keys.ProxyURL(tp.p.Addr(), session))
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(u),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the lab server's certificate names no test host
	}}
}

func (tp *testProxy) auth(session string) string {
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(session+":"+tp.keys.Token(session))) + "\r\n"
}

// TestProxyPassesListedHosts: with the session's credentials, plain http GET and https through
// CONNECT reach listed hosts (exact and below a wildcard), the proxy's credentials go no further,
// and each connection is counted.
func TestProxyPassesListedHosts(t *testing.T) {
	tp := newTestProxy(t)
	c := tp.client(testSession)
	for _, u := range []string{"http://pkgs.test/simple/", "https://pkgs.test/simple/", "https://a.files.test/x.whl", "http://deep.a.files.test/y", "http://PKGS.test./z"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Errorf("GET %s through the proxy: %v", u, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "package server: ") {
			t.Errorf("GET %s through the proxy: %s %q", u, resp.Status, body)
		}
	}
	for _, r := range tp.up.all() {
		if r.Header.Get("Proxy-Authorization") != "" || r.Header.Get(refusalHeader) != "" {
			t.Errorf("the package server saw the proxy's headers: %v", r.Header)
		}
	}
	if n := counted(t, tp.p, "allowed", ""); n < 5 {
		t.Errorf("%v connections counted as allowed; want 5 or more", n)
	}
	ch := make(chan prometheus.Metric, 100)
	tp.p.Collector().Collect(ch)
	if len(ch) == 0 {
		t.Error("the collector gives no metric")
	}
}

// TestProxyRefuses: every way a sandbox might go past the list is refused with a status line
// that says why (what pip shows), logged with the session and counted by why.
func TestProxyRefuses(t *testing.T) {
	tp := newTestProxy(t)
	auth := tp.auth(testSession)
	other := "s" + strings.Repeat("f", 24)
	wrong := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(other+":"+tp.keys.Token(testSession))) + "\r\n"
	nsIP := tp.lab.nsIP.String()
	cases := []struct {
		name, req string
		code      int
		reason    string
		why       string
	}{
		{"no credentials", "CONNECT pkgs.test:443 HTTP/1.1\r\nHost: pkgs.test:443\r\n\r\n", 407, "toolhost: the package proxy needs this session's credentials", whyCredentials},
		{"another session's token", "CONNECT pkgs.test:443 HTTP/1.1\r\nHost: pkgs.test:443\r\n" + wrong + "\r\n", 407, "toolhost: the package proxy refused these credentials", whyCredentials},
		{"unlisted host, https", "CONNECT files.example.org:443 HTTP/1.1\r\nHost: files.example.org:443\r\n" + auth + "\r\n", 403, "toolhost: files.example.org is not in [sessions] package_hosts", whyHost},
		{"unlisted host, http", "GET http://files.example.org/simple/ HTTP/1.1\r\nHost: files.example.org\r\n" + auth + "\r\n", 403, "toolhost: files.example.org is not in [sessions] package_hosts", whyHost},
		{"a listed name in Host, another in the URL", "GET http://files.example.org/simple/ HTTP/1.1\r\nHost: pkgs.test\r\n" + auth + "\r\n", 403, "toolhost: files.example.org is not in [sessions] package_hosts", whyHost},
		{"a listed name as a prefix", "CONNECT pkgs.test.evil.org:443 HTTP/1.1\r\nHost: pkgs.test.evil.org:443\r\n" + auth + "\r\n", 403, "is not in [sessions] package_hosts", whyHost},
		{"the domain of a wildcard itself", "CONNECT files.test:443 HTTP/1.1\r\nHost: files.test:443\r\n" + auth + "\r\n", 403, "toolhost: files.test is not in [sessions] package_hosts", whyHost},
		{"an address", "CONNECT " + nsIP + ":443 HTTP/1.1\r\nHost: " + nsIP + ":443\r\n" + auth + "\r\n", 403, "toolhost: " + nsIP + " is an address", whyHost},
		{"a private address", "CONNECT private.test:443 HTTP/1.1\r\nHost: private.test:443\r\n" + auth + "\r\n", 403, "toolhost: private.test resolves to 192.168.77.7, a private address (192.168.0.0/16), which the sandboxes may not reach", whyAddress},
		{"a private address, http", "GET http://private.test/simple/ HTTP/1.1\r\nHost: private.test\r\n" + auth + "\r\n", 403, "toolhost: private.test resolves to 192.168.77.7, a private address (192.168.0.0/16)", whyAddress},
		{"this machine, inside AllowAddrs", "CONNECT self.test:443 HTTP/1.1\r\nHost: self.test:443\r\n" + auth + "\r\n", 403, "toolhost: self.test resolves to " + tp.lab.hostIP.String() + ", an address of this machine", whyAddress},
		{"loopback", "CONNECT loop.test:443 HTTP/1.1\r\nHost: loop.test:443\r\n" + auth + "\r\n", 403, "toolhost: loop.test resolves to 127.0.0.1, a loopback address", whyAddress},
		{"the metadata address", "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\nHost: meta.test\r\n" + auth + "\r\n", 403, "toolhost: meta.test resolves to 169.254.169.254, a link-local address", whyAddress},
		{"CGNAT (the sandboxes' own range)", "CONNECT cgnat.test:443 HTTP/1.1\r\nHost: cgnat.test:443\r\n" + auth + "\r\n", 403, "toolhost: cgnat.test resolves to 100.64.1.1, a shared address", whyAddress},
		{"another port, https", "CONNECT pkgs.test:8443 HTTP/1.1\r\nHost: pkgs.test:8443\r\n" + auth + "\r\n", 403, "toolhost: the package proxy opens https to port 443 only, not pkgs.test:8443", whyPort},
		{"another port, http", "GET http://pkgs.test:8080/ HTTP/1.1\r\nHost: pkgs.test:8080\r\n" + auth + "\r\n", 403, "toolhost: the package proxy passes plain http to port 80 only", whyPort},
		{"POST over http", "POST http://pkgs.test/upload HTTP/1.1\r\nHost: pkgs.test\r\nContent-Length: 0\r\n" + auth + "\r\n", 403, "toolhost: over plain http the package proxy passes GET and HEAD only, not POST", whyRequest},
		{"a chain to another proxy", "CONNECT pkgs.test:443 HTTP/1.1\r\nHost: pkgs.test:443\r\nX-Upstream-Https-Proxy: http://" + nsIP + ":80\r\n" + auth + "\r\n", 403, "toolhost: the package proxy passes connections on to no other proxy", whyRequest},
		{"not a proxy request", "GET /simple/ HTTP/1.1\r\nHost: pkgs.test\r\n" + auth + "\r\n", 400, "toolhost: this is the sandboxes' package proxy", whyRequest},
		{"a name that doesn't resolve", "CONNECT nx.test:443 HTTP/1.1\r\nHost: nx.test:443\r\n" + auth + "\r\n", 502, "toolhost: nx.test doesn't resolve", whyResolve},
	}
	before := len(tp.up.all())
	for _, c := range cases {
		resp := rawProxyRequest(t, tp.p.Addr(), c.req)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code || !strings.Contains(resp.Status, c.reason) {
			t.Errorf("%s: %q (body %q); want %d with %q", c.name, resp.Status, body, c.code, c.reason)
		}
		if !strings.Contains(string(body), c.reason) {
			t.Errorf("%s: the body %q doesn't say %q", c.name, body, c.reason)
		}
		if c.code == 407 && !strings.HasPrefix(resp.Header.Get("Proxy-Authenticate"), "Basic") {
			t.Errorf("%s: no Proxy-Authenticate: %v", c.name, resp.Header)
		}
		if resp.Header.Get(refusalHeader) != "" {
			t.Errorf("%s: the proxy's own header reached the client", c.name)
		}
	}
	if n := len(tp.up.all()); n != before {
		t.Errorf("%d refused requests reached the package server", n-before)
	}
	log := tp.log.String()
	for _, c := range cases {
		if n := counted(t, tp.p, "refused", c.why); n == 0 {
			t.Errorf("%s: no refusal counted as %q", c.name, c.why)
		}
		if !strings.Contains(log, c.reason) {
			t.Errorf("%s: the refusal isn't logged:\n%s", c.name, log)
		}
	}
	if !strings.Contains(log, "session="+testSession+" host=files.example.org why=host") {
		t.Errorf("a refusal's log line doesn't name the session and the host:\n%s", log)
	}
}

// TestProxyReload: SetAllowedHosts takes effect at once and refuses a bad list whole.
func TestProxyReload(t *testing.T) {
	tp := newTestProxy(t)
	c := tp.client(testSession)
	get := func() int {
		resp, err := c.Get("http://files.example.org/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != 403 {
		t.Fatalf("an unlisted host: %d", code)
	}
	if err := tp.p.SetAllowedHosts([]string{"files.example.org"}); err != nil {
		t.Fatal(err)
	}
	if code := get(); code != 200 {
		t.Errorf("a host listed by a reload: %d", code)
	}
	if err := tp.p.SetAllowedHosts([]string{"pypi.org", "10.0.0.1"}); err == nil || !strings.Contains(err.Error(), `package_hosts[1] "10.0.0.1"`) {
		t.Errorf("a list with an address: %v", err)
	}
	if code := get(); code != 200 {
		t.Errorf("a refused reload changed the list: %d", code)
	}
}

// TestProxyListensOnItsOwnAddress: New adds the address it listens on to this machine (lo,
// labelled) and Close removes it again; the address works from the host.
func TestProxyListensOnItsOwnAddress(t *testing.T) {
	needRoot(t)
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	addr := netip.AddrFrom4([4]byte{100, 87, b[0], 1 + b[1]%250})
	keys, _ := NewKeys()
	p, err := New(context.Background(), Options{Listen: netip.AddrPortFrom(addr, 0), Auth: keys.Auth})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "-4", "addr", "show", "dev", "lo").Output()
	if !strings.Contains(string(out), addr.String()+"/32") || !strings.Contains(string(out), addrLabel) {
		t.Errorf("the proxy's address isn't on lo:\n%s", out)
	}
	if p.Addr().Addr() != addr || p.Addr().Port() == 0 {
		t.Errorf("Addr() = %s; want %s and a port", p.Addr(), addr)
	}
	resp := rawProxyRequest(t, p.Addr(), "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
	if resp.StatusCode != 407 {
		t.Errorf("the proxy on its address: %s", resp.Status)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command("ip", "-4", "addr", "show", "dev", "lo").Output()
	if strings.Contains(string(out), addr.String()+"/32") {
		t.Errorf("the proxy's address is left after Close:\n%s", out)
	}
}

// TestNewRefusesBadOptions: no Auth, a bad host list, or a hole for loopback are refused with
// what to do.
func TestNewRefusesBadOptions(t *testing.T) {
	keys, _ := NewKeys()
	for name, c := range map[string]struct {
		opts Options
		want string
	}{
		"no auth":        {Options{Listen: DefaultListen()}, "needs an Auth function"},
		"an address":     {Options{Auth: keys.Auth, AllowedHosts: []string{"192.168.1.1"}}, "not addresses"},
		"loopback hole":  {Options{Auth: keys.Auth, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, "may not hold 127.0.0.0/8"},
		"metadata hole":  {Options{Auth: keys.Auth, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}, "may not hold"},
		"everything":     {Options{Auth: keys.Auth, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, "may not hold"},
		"no listen addr": {Options{Auth: keys.Auth}, "needs an address to listen on"},
	} {
		p, err := New(context.Background(), c.opts)
		if err == nil {
			_ = p.Close(context.Background())
			t.Errorf("%s: New accepted it", name)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", name, err, c.want)
		}
	}
}

func TestCheckHosts(t *testing.T) {
	for _, ok := range [][]string{nil, {"pypi.org", "*.pythonhosted.org", "registry.npmjs.org.", "PyPI.org", "xn--bcher-kva.example"}} {
		if err := CheckHosts(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for h, want := range map[string]string{
		"":              "write a host name",
		"*":             "write a host name",
		"10.1.2.3":      "not addresses",
		"[::1]":         "not addresses",
		"a.*.org":       "a wildcard may only start",
		"**.org":        "a wildcard may only start",
		"bücher.de":     "xn-- form",
		"pypi.org:443":  "letters, digits",
		"-pypi.org":     "neither starts nor ends",
		"pypi..org":     "1 to 63 characters",
		"https://x.org": "letters, digits",
	} {
		err := CheckHosts([]string{"pypi.org", h})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "package_hosts[1]") {
			t.Errorf("%q: %v; want package_hosts[1] and %q", h, err, want)
		}
	}
	entries := normalizeHosts([]string{"PyPI.org.", "*.pythonhosted.org"})
	for host, want := range map[string]bool{"pypi.org": true, "files.pythonhosted.org": true, "a.b.pythonhosted.org": true,
		"pythonhosted.org": false, "evilpythonhosted.org": false, "pypi.org.evil.com": false, "xpypi.org": false, "": false} {
		if got := hostAllowed(entries, host); got != want {
			t.Errorf("hostAllowed(%q) = %v; want %v", host, got, want)
		}
	}
}

func TestKeys(t *testing.T) {
	k, err := NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	tok := k.Token(testSession)
	if s, ok := k.Auth(testSession, tok); !ok || s != testSession {
		t.Errorf("Auth with the session's token: %q %v", s, ok)
	}
	for name, c := range map[string][2]string{
		"another session's token": {"s" + strings.Repeat("a", 24), tok},
		"no password":             {testSession, ""},
		"no user":                 {"", tok},
	} {
		if _, ok := k.Auth(c[0], c[1]); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	k2, _ := NewKeys()
	if _, ok := k2.Auth(testSession, tok); ok {
		t.Error("a token of another Keys (before a restart) was accepted")
	}
	u := k.ProxyURL(netip.MustParseAddrPort("100.87.255.254:3128"), testSession)
	if u != "http://"+testSession+":"+tok+"@100.87.255.254:3128" {
		t.Errorf("ProxyURL = %s", u)
	}
}

// counted reads the proxy's counter of result and why.
func counted(t *testing.T, p *Proxy, result, why string) float64 {
	t.Helper()
	var m dto.Metric
	if err := p.conns.WithLabelValues(result, why).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
