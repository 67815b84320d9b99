// Package egress is the egress proxy of conversation sandboxes in packages mode: an HTTP proxy in
// the host process through which a sandbox's pip (or npm) reaches the package hosts the admin
// listed ([sessions] package_hosts), and nothing else.
//
// It is stripe/smokescreen used as a library (BuildProxy, not its server: that one installs
// signal handlers and exits the process on errors), behind a handler of ours that checks each
// request's credentials first. What it allows:
//
//   - CONNECT to port 443 and plain-http GET and HEAD to port 80 (pip with an http index), of a
//     host name in the list: exact ("pypi.org") or every name below a domain ("*.pythonhosted.org");
//     never an address, never another proxy (X-Upstream-Https-Proxy).
//   - Only with the session's credentials (Proxy-Authorization, basic: user = the session's
//     backend id, password = its token; Keys makes and checks them): without them, 407.
//   - To an address the proxy resolved itself (IPv4) that is public: private, loopback,
//     link-local, CGNAT, multicast, reserved and test ranges and every address of this machine are
//     refused after resolving (smokescreen's classification at resolution, then ours again right
//     before each dial, with this machine's addresses read anew). Options.AllowAddrs opens a hole
//     for tests, never for loopback, link-local, multicast or this machine's addresses.
//
// Every refusal is logged with the session and the reason, counted, and answered with a status
// line the user reads in pip's error, e.g. "403 toolhost: files.example.org is not in [sessions]
// package_hosts".
//
// Sandboxes reach the proxy at one fixed address of this machine (DefaultListen,
// 100.87.255.254:3128, which New adds to lo, labelled lo:toolhost, when it isn't an address of the
// machine yet): a packages-mode sandbox's firewall (runsc/sandbox NetworkOptions.OnlyTo) admits
// exactly that address and port, and the sandbox has a route to it alone.
//
// goproxy, under smokescreen, passes CONNECTs on to the proxy in the host process's HTTPS_PROXY
// when that is set; the connection to that proxy goes through the same address checks (a proxy on
// a private address is refused), but past it the upstream proxy resolves and connects. Leave
// HTTPS_PROXY unset in the host's environment, or give the upstream proxy the same rules.
package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stripe/goproxy"
	"github.com/stripe/smokescreen/pkg/smokescreen"
	acl "github.com/stripe/smokescreen/pkg/smokescreen/acl/v1"
	"github.com/stripe/smokescreen/pkg/smokescreen/conntrack"
	"github.com/stripe/smokescreen/pkg/smokescreen/metrics"
)

// DefaultListen is where the proxy listens when the config names no address: an address of the
// shared (CGNAT) range outside the sandboxes' own pool (100.88.0.0/14), which New adds to lo.
func DefaultListen() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{100, 87, 255, 254}), 3128)
}

// Resolver resolves host names; *net.Resolver is one (net.DefaultResolver: the host's own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Proxy.
type Options struct {
	// Listen is the address and port the proxy listens on (port 0: any), added to lo when it is
	// not an address of this machine yet (and removed again by Close). Ignored when Listener is
	// set.
	Listen netip.AddrPort
	// Listener, when set, is where the proxy accepts connections (tests).
	Listener net.Listener
	// AllowedHosts are the host names the proxy reaches: "pypi.org" or "*.pythonhosted.org"
	// (every name below pythonhosted.org, not pythonhosted.org itself). See CheckHosts.
	AllowedHosts []string
	// Resolver resolves the allowed names; the host's (net.DefaultResolver) when nil.
	Resolver Resolver
	// AllowAddrs are addresses the proxy connects to despite being private or reserved. For
	// tests only: they open a hole. Loopback, link-local, multicast and this machine's own
	// addresses stay refused.
	AllowAddrs []netip.Prefix
	// Auth checks a request's credentials (Proxy-Authorization, basic) and names its session.
	// Keys.Auth is one. Required.
	Auth func(user, pass string) (session string, ok bool)
	// Log hears of every refusal (Warn) and every connection made (Debug).
	Log hclog.Logger
	// ConnectTimeout bounds a connection to a package host (10 s when 0); IdleTimeout closes a
	// connection nothing went through for that long (2 min when 0).
	ConnectTimeout, IdleTimeout time.Duration
}

// Proxy is a running egress proxy. Its methods are safe for concurrent use.
type Proxy struct {
	log     hclog.Logger
	auth    func(user, pass string) (string, bool)
	allowed []netip.Prefix
	hosts   atomic.Pointer[[]string]
	cfg     *smokescreen.Config
	ln      net.Listener
	srv     *http.Server
	addr    netip.AddrPort
	removal func(context.Context) error // removes the address New added, or nil
	conns   *prometheus.CounterVec

	closeOnce sync.Once
	closeErr  error
}

// Reasons a request is refused (the "why" label of the counter and of the log line).
const (
	whyCredentials = "credentials" // no or wrong credentials
	whyRequest     = "request"     // not a proxy request, another proxy, a method or scheme it doesn't pass
	whyPort        = "port"        // a port other than 443 (CONNECT) or 80 (http)
	whyHost        = "host"        // not in package_hosts, or an address instead of a name
	whyAddress     = "address"     // resolves to an address the sandboxes may not reach
	whyResolve     = "resolve"     // doesn't resolve
	whyConnect     = "connect"     // the package host doesn't answer
	whyOther       = "other"
)

// New checks the options, listens and serves until Close.
func New(ctx context.Context, opts Options) (*Proxy, error) {
	if opts.Auth == nil {
		return nil, errors.New("the egress proxy needs an Auth function: without one every sandbox could use it as any session")
	}
	if err := CheckHosts(opts.AllowedHosts); err != nil {
		return nil, err
	}
	for _, p := range opts.AllowAddrs {
		a := p.Addr()
		if !p.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || p.Bits() == 0 {
			return nil, fmt.Errorf("the egress proxy's AllowAddrs may not hold %s: loopback, link-local, multicast and everything stay refused", p)
		}
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 2 * time.Minute
	}
	p := &Proxy{log: opts.Log.Named("egress"), auth: opts.Auth, allowed: opts.AllowAddrs,
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhost_egress_connections_total",
			Help: "Connections and requests of packages-mode sandboxes through the egress proxy, by result (allowed, refused) and why a refused one was.",
		}, []string{"result", "why"})}
	hosts := normalizeHosts(opts.AllowedHosts)
	p.hosts.Store(&hosts)

	p.ln = opts.Listener
	if p.ln == nil {
		if !opts.Listen.IsValid() {
			return nil, errors.New("the egress proxy needs an address to listen on (egress.DefaultListen() if the config names none)")
		}
		remove, err := ensureAddress(ctx, opts.Listen.Addr())
		if err != nil {
			return nil, err
		}
		p.removal = remove
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", opts.Listen.String())
		if err != nil {
			if remove != nil {
				_ = remove(context.WithoutCancel(ctx))
			}
			return nil, fmt.Errorf("the egress proxy can't listen on %s: %w", opts.Listen, err)
		}
		p.ln = ln
	}
	if ap, err := netip.ParseAddrPort(p.ln.Addr().String()); err == nil {
		p.addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}

	p.cfg = p.smokescreenConfig(opts)
	proxy := smokescreen.BuildProxy(p.cfg)
	proxy.Tr.Proxy = nil                                                                       // never the host process's HTTP_PROXY for plain http
	proxy.Logger = p.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}) // goproxy's own lines: tunnels' copy errors
	proxy.NonproxyHandler = http.NotFoundHandler()                                             // unreachable: ServeHTTP answers those first
	p.srv = &http.Server{
		Handler:           &front{p: p, next: proxy},
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       opts.IdleTimeout,
		ErrorLog:          p.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	go func() {
		if err := p.srv.Serve(p.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("the egress proxy stopped serving", "error", err)
		}
	}()
	p.log.Info("egress proxy serving", "addr", p.addr.String(), "hosts", strings.Join(hosts, ","))
	return p, nil
}

// Addr is where the proxy listens: what the sandboxes' firewall admits and their proxy URL names.
func (p *Proxy) Addr() netip.AddrPort { return p.addr }

// SetAllowedHosts replaces the allowed host names (a reload); requests from then on see them.
func (p *Proxy) SetAllowedHosts(hosts []string) error {
	if err := CheckHosts(hosts); err != nil {
		return err
	}
	h := normalizeHosts(hosts)
	p.hosts.Store(&h)
	p.log.Info("egress proxy hosts", "hosts", strings.Join(h, ","))
	return nil
}

// Collector is the proxy's counter (toolhost_egress_connections_total{result,why}) for the host's
// registry.
func (p *Proxy) Collector() prometheus.Collector { return p.conns }

// Close stops the proxy: no new connection, every open one closed, and the address New added
// removed. Later calls return the first one's result.
func (p *Proxy) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		var errs []error
		p.cfg.ShuttingDown.Store(true)
		if err := p.srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the egress proxy: %w", err))
		}
		// Tunnels were taken over from the server: closing their far ends ends them.
		p.cfg.ConnTracker.Range(func(k, _ any) bool {
			if c, ok := k.(*conntrack.InstrumentedConn); ok {
				_ = c.Close()
			}
			return true
		})
		if p.removal != nil {
			errs = append(errs, p.removal(ctx))
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

func (p *Proxy) smokescreenConfig(opts Options) *smokescreen.Config {
	cfg := smokescreen.NewConfig()
	lg := logrus.New()
	lg.SetOutput(io.Discard) // refusals and connections are logged by us, with the session
	cfg.Log = lg
	cfg.Resolver = resolver{opts.Resolver}
	cfg.Network = "ip4" // as the sandboxes: IPv4 only, whose ranges are listed below
	cfg.ConnectTimeout = opts.ConnectTimeout
	cfg.IdleTimeout = opts.IdleTimeout
	cfg.DNSTimeout = 5 * time.Second
	cfg.Port = p.addr.Port()
	cfg.LocalIPs = nil
	cfg.EgressACL = decider{p}
	cfg.RoleFromRequest = func(r *http.Request) (string, error) {
		if s, ok := r.Context().Value(sessionKey{}).(string); ok {
			return s, nil
		}
		return "", smokescreen.MissingRoleError("no session")
	}
	cfg.RejectResponseHandlerWithCtx = p.onReject
	cfg.ProxyDialTimeout = p.dial
	for _, a := range opts.AllowAddrs {
		cfg.AllowRanges = append(cfg.AllowRanges, smokescreen.RuleRange{Net: ipNet(a)})
	}
	for _, r := range refusedRanges() {
		cfg.DenyRanges = append(cfg.DenyRanges, smokescreen.RuleRange{Net: ipNet(r)})
	}
	cfg.MetricsClient = metrics.NewNoOpMetricsClient()
	cfg.ShuttingDown.Store(false)
	cfg.ConnTracker = conntrack.NewTracker(cfg.IdleTimeout, cfg.MetricsClient, cfg.Log, atomic.Value{}, nil)
	return cfg
}

// sessionKey carries the authenticated session in a request's context.
type sessionKey struct{}

// front checks credentials and that a request is a proxy request, then hands it to smokescreen
// with the session in its context; refusals smokescreen marks are written with their reason in
// the status line (see refusalWriter).
type front struct {
	p    *Proxy
	next http.Handler
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := f.p
	host := r.Host
	session, ok := p.authenticate(r)
	if !ok {
		why := "toolhost: the package proxy needs this session's credentials: use the proxy URL the sandbox was given (HTTP_PROXY and HTTPS_PROXY)"
		if r.Header.Get("Proxy-Authorization") != "" {
			why = "toolhost: the package proxy refused these credentials: they belong to no session, or to an earlier one; use the proxy URL the sandbox was given"
		}
		p.refused("", host, whyCredentials, why)
		writeRefusal(w, http.StatusProxyAuthRequired, why, http.Header{"Proxy-Authenticate": {`Basic realm="toolhost package proxy"`}})
		return
	}
	// Never past the proxy, and never a chain to another proxy.
	r.Header.Del("Proxy-Authorization")
	if r.Method != http.MethodConnect && !r.URL.IsAbs() {
		why := "toolhost: this is the sandboxes' package proxy: it answers proxy requests (HTTP_PROXY, HTTPS_PROXY) only"
		p.refused(session, host, whyRequest, why)
		writeRefusal(w, http.StatusBadRequest, why, nil)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, session))
	f.next.ServeHTTP(&refusalWriter{ResponseWriter: w}, r)
}

// authenticate reads Proxy-Authorization (basic) and asks Auth.
func (p *Proxy) authenticate(r *http.Request) (string, bool) {
	h := r.Header.Get("Proxy-Authorization")
	scheme, enc, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" {
		return "", false
	}
	return p.auth(user, pass)
}

// refusalHeader marks, on the response smokescreen builds for a refusal, the reason to put in
// the status line. It never leaves the proxy: refusalWriter takes the response over.
const refusalHeader = "X-Toolhost-Egress-Refusal"

// refusalWriter is what smokescreen writes plain-http responses to. net/http writes the standard
// reason phrase ("403 Forbidden"), but pip shows the status line's reason, not the body: so a
// response marked with refusalHeader is written raw instead, with the reason as its phrase.
// CONNECT refusals are written raw by goproxy already, status line and all.
type refusalWriter struct {
	http.ResponseWriter
	done bool
}

func (rw *refusalWriter) WriteHeader(code int) {
	if rw.done {
		return
	}
	if why := rw.Header().Get(refusalHeader); why != "" {
		rw.done = true
		writeRefusal(rw.ResponseWriter, code, why, nil)
		return
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *refusalWriter) Write(b []byte) (int, error) {
	if rw.done {
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (goproxy's Hijack for CONNECT, flushes) reach the
// connection.
func (rw *refusalWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// Hijack hands goproxy the connection of a CONNECT.
func (rw *refusalWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(rw.ResponseWriter).Hijack()
}

// writeRefusal answers with code and why as the status line's reason (and the body), then closes
// the connection.
func writeRefusal(w http.ResponseWriter, code int, why string, extra http.Header) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil { // not hijackable (HTTP/2: never here): the standard phrase, the reason in the body
		for k, v := range extra {
			w.Header()[k] = v
		}
		w.Header().Del(refusalHeader)
		http.Error(w, why, code)
		return
	}
	defer conn.Close()
	resp := refusalResponse(code, why)
	for k, v := range extra {
		resp.Header[k] = v
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_ = resp.Write(conn)
}

// refusalResponse is a complete refusal: the reason as the status line's phrase and as the body.
func refusalResponse(code int, why string) *http.Response {
	body := why + "\n"
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, reasonPhrase(why)),
		ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Close:         true,
	}
}

// reasonPhrase makes s fit a status line: printable ASCII, at most 300 characters.
func reasonPhrase(s string) string {
	b := make([]byte, 0, min(len(s), 300))
	for i := 0; i < len(s) && len(b) < 300; i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b = append(b, c)
		} else {
			b = append(b, '?')
		}
	}
	return string(b)
}

// decider is smokescreen's ACL: the port, method and host name of each request.
type decider struct{ p *Proxy }

func (d decider) Decide(a acl.DecideArgs) (acl.Decision, error) {
	deny := func(why, reason string) (acl.Decision, error) {
		return acl.Decision{Result: acl.Deny, Reason: reason, Project: why}, nil
	}
	host := strings.TrimSuffix(strings.ToLower(a.Host), ".")
	if a.ConnectProxyHost != "" {
		return deny(whyRequest, "toolhost: the package proxy passes connections on to no other proxy (X-Upstream-Https-Proxy)")
	}
	r := a.Req
	if r == nil {
		return deny(whyRequest, "toolhost: the package proxy couldn't read the request")
	}
	if r.Method == http.MethodConnect {
		if _, port, _ := net.SplitHostPort(r.Host); port != "443" {
			return deny(whyPort, fmt.Sprintf("toolhost: the package proxy opens https to port 443 only, not %s", reasonPhrase(r.Host)))
		}
	} else {
		if r.URL.Scheme != "http" {
			return deny(whyRequest, fmt.Sprintf("toolhost: the package proxy passes http:// requests and CONNECT only, not %s://", reasonPhrase(r.URL.Scheme)))
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return deny(whyRequest, fmt.Sprintf("toolhost: over plain http the package proxy passes GET and HEAD only, not %s", reasonPhrase(r.Method)))
		}
		for _, hp := range []string{r.Host, r.URL.Host} {
			if _, port, err := net.SplitHostPort(hp); err == nil && port != "80" {
				return deny(whyPort, fmt.Sprintf("toolhost: the package proxy passes plain http to port 80 only, not %s", reasonPhrase(hp)))
			}
		}
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return deny(whyHost, fmt.Sprintf("toolhost: %s is an address: the package proxy reaches the host names in [sessions] package_hosts only", reasonPhrase(host)))
	}
	if !hostAllowed(*d.p.hosts.Load(), host) {
		return deny(whyHost, fmt.Sprintf("toolhost: %s is not in [sessions] package_hosts", reasonPhrase(host)))
	}
	return acl.Decision{Result: acl.Allow, Reason: "in package_hosts"}, nil
}

// dial connects to a resolved address after checking it once more, this machine's addresses
// read anew: the last word on where a sandbox's connection goes.
func (p *Proxy) dial(ctx context.Context, network, address string, timeout time.Duration) (net.Conn, error) {
	sctx := smokescreenContext(ctx)
	session, host := "", address
	if sctx != nil {
		host = sctx.RequestedHost
		if sctx.Decision != nil {
			session = sctx.Decision.Role
		}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("the package proxy can't dial %q: %w", address, err)
	}
	if what := p.refusedAddr(ap.Addr()); what != "" {
		reason := fmt.Sprintf("toolhost: %s resolves to %s, %s, which the sandboxes may not reach", hostName(host), ap.Addr().Unmap(), what)
		if sctx != nil && sctx.Decision != nil {
			sctx.Decision.Reason, sctx.Decision.Project = reason, whyAddress
		}
		return nil, errors.New(reason)
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, network, ap.String())
	if err != nil {
		return nil, err
	}
	p.conns.WithLabelValues("allowed", "").Inc()
	p.log.Debug("egress proxy connected", "session", session, "host", hostName(host), "addr", ap.String())
	return c, nil
}

// smokescreenContext finds the request's smokescreen context in a dial's context.
func smokescreenContext(ctx context.Context) *smokescreen.SmokescreenContext {
	pctx, ok := ctx.Value(goproxy.ProxyContextKey).(*goproxy.ProxyCtx)
	if !ok {
		return nil
	}
	s, _ := pctx.UserData.(*smokescreen.SmokescreenContext)
	return s
}

// refusedAddr says what kind of address a is when the sandboxes may not reach it, or "".
func (p *Proxy) refusedAddr(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.Is4():
		return "an IPv6 address (the package proxy connects over IPv4 only)"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address (the cloud metadata address is one)"
	case a.IsMulticast():
		return "a multicast address"
	case isLocalAddr(a):
		return "an address of this machine"
	}
	for _, pr := range p.allowed {
		if pr.Contains(a) {
			return ""
		}
	}
	for _, r := range refusedRanges() {
		if r.Contains(a) {
			switch r.String() {
			case "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16":
				return "a private address (" + r.String() + ")"
			case "100.64.0.0/10":
				return "a shared address (" + r.String() + ", the sandboxes' own among them)"
			}
			return "a reserved address (" + r.String() + ")"
		}
	}
	return ""
}

// isLocalAddr reports whether a is an address of this machine now.
func isLocalAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: refused
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// refusedRanges are the IPv4 destinations the sandboxes never reach, as runsc/sandbox's
// blockedRanges: "this network", private, CGNAT, loopback, link-local, IETF and test ranges,
// benchmarking, multicast, reserved and broadcast.
func refusedRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// onReject is smokescreen's hook on every refusal it answers: it writes our reason into the
// response (status line and body), logs and counts it.
func (p *Proxy) onReject(sctx *smokescreen.SmokescreenContext, resp *http.Response) {
	code, why, reason := p.explain(sctx, resp)
	session := ""
	if sctx.Decision != nil {
		session = sctx.Decision.Role
	}
	p.refused(session, sctx.RequestedHost, why, reason)
	r := refusalResponse(code, reason)
	resp.StatusCode, resp.Status, resp.Body, resp.ContentLength = r.StatusCode, r.Status, r.Body, r.ContentLength
	resp.Header = r.Header
	resp.Close = true
	if sctx.ProxyType != "connect" {
		resp.Header.Set(refusalHeader, reasonPhrase(reason))
	}
}

var deniedByRule = regexp.MustCompile(`(\S+) denied by rule '([^']*)'`)

// explain turns what smokescreen refused into a status code, a why and the user's words.
func (p *Proxy) explain(sctx *smokescreen.SmokescreenContext, resp *http.Response) (int, string, string) {
	host := hostName(sctx.RequestedHost)
	reason, why := "", ""
	if sctx.Decision != nil {
		reason, why = sctx.Decision.Reason, sctx.Decision.Project
	}
	msg := resp.Header.Get("X-Smokescreen-Error")
	switch {
	case strings.HasPrefix(reason, "toolhost: "): // ours: the ACL or the dial
		if why == "" {
			why = whyOther
		}
		return http.StatusForbidden, why, reason
	case resp.StatusCode == http.StatusProxyAuthRequired: // smokescreen's own refusals
		if m := deniedByRule.FindStringSubmatch(msg); m != nil {
			what := ruleWords(m[2])
			if a, err := netip.ParseAddr(m[1]); err == nil {
				if w := p.refusedAddr(a); w != "" {
					what = w
				}
			}
			return http.StatusForbidden, whyAddress, fmt.Sprintf("toolhost: %s resolves to %s, %s, which the sandboxes may not reach", host, m[1], what)
		}
		return http.StatusForbidden, whyOther, fmt.Sprintf("toolhost: the package proxy refused %s: %s", host, strings.TrimSpace(msg))
	case resp.StatusCode == http.StatusBadGateway && strings.HasPrefix(msg, "Failed to resolve"):
		return http.StatusBadGateway, whyResolve, fmt.Sprintf("toolhost: %s doesn't resolve (%s)", host, strings.TrimPrefix(msg, "Failed to resolve remote hostname: "))
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout:
		return resp.StatusCode, whyConnect, fmt.Sprintf("toolhost: the package proxy couldn't connect to %s: %s", host, strings.TrimSpace(msg))
	default:
		return resp.StatusCode, whyOther, fmt.Sprintf("toolhost: the package proxy couldn't pass the request to %s: %s", host, strings.TrimSpace(msg))
	}
}

// ruleWords says what smokescreen's address classes are.
func ruleWords(rule string) string {
	switch rule {
	case "Deny: Private Range":
		return "a private address"
	case "Deny: Not Global Unicast":
		return "a loopback, link-local, multicast or unspecified address"
	case "Deny: User Configured":
		return "a private or reserved address"
	case "Deny: CGNAT Range":
		return "a shared (CGNAT) address"
	case "Deny: IPv6 Embedding":
		return "an IPv6 address carrying an IPv4 one"
	case "Deny: Self Connection":
		return "the package proxy's own address"
	}
	return "an address refused (" + rule + ")"
}

// refused logs and counts one refusal.
func (p *Proxy) refused(session, host, why, reason string) {
	p.conns.WithLabelValues("refused", why).Inc()
	p.log.Warn("egress proxy refused", "session", session, "host", hostName(host), "why", why, "reason", reason)
}

// hostName is host without its port.
func hostName(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// resolver adapts a Resolver to smokescreen's. Ports are numbers only: no service lookups.
type resolver struct{ r Resolver }

func (a resolver) LookupPort(_ context.Context, _, service string) (int, error) {
	n, err := strconv.Atoi(service)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is not a port number", service)
	}
	return n, nil
}

func (a resolver) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	addrs, err := a.r.LookupNetIP(ctx, network, host)
	if err != nil {
		return nil, err
	}
	out := make([]net.IP, 0, len(addrs))
	for _, ad := range addrs {
		out = append(out, net.IP(ad.Unmap().AsSlice()))
	}
	return out, nil
}

func ipNet(p netip.Prefix) net.IPNet {
	p = p.Masked()
	return net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
