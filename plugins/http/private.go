package main

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
)

// maxRedirects is how many redirects one request may follow.
const maxRedirects = 5

// special is a range of addresses that is not public, and what it is.
type special struct {
	prefix netip.Prefix
	what   string
}

// ranges is the table of address ranges that are not public, most
// specific first.
type ranges []special

// newRanges lists every range this kind treats as private: the IANA
// special-purpose registries' ranges that are not globally reachable, and a
// few that are but lead somewhere an admin would not expect (multicast,
// NAT64 and 6to4 are looked through to the IPv4 address they carry).
func newRanges() ranges {
	table := []struct{ cidr, what string }{
		// IPv4
		{"169.254.169.254/32", "the cloud metadata address"},
		{"255.255.255.255/32", "broadcast"},
		{"0.0.0.0/8", `"this network"`},
		{"10.0.0.0/8", "private network, RFC 1918"},
		{"100.64.0.0/10", "shared address space, carrier-grade NAT"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private network, RFC 1918"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation, TEST-NET-1"},
		{"192.31.196.0/24", "AS112 service"},
		{"192.52.193.0/24", "AMT relay"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private network, RFC 1918"},
		{"192.175.48.0/24", "AS112 service"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation, TEST-NET-2"},
		{"203.0.113.0/24", "documentation, TEST-NET-3"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"},
		// IPv6
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible, deprecated"},
		{"64:ff9b:1::/48", "local-use NAT64"},
		{"100::/64", "discard-only"},
		{"2001::/32", "Teredo tunnelling"},
		{"2001:2::/48", "benchmarking"},
		{"2001:10::/28", "ORCHID, deprecated"},
		{"2001:db8::/32", "documentation"},
		{"3fff::/20", "documentation"},
		{"5f00::/16", "segment routing (SRv6)"},
		{"fc00::/7", "unique local"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local, deprecated"},
		{"ff00::/8", "multicast"},
	}
	r := make(ranges, len(table))
	for i, t := range table {
		r[i] = special{prefix: netip.MustParsePrefix(t.cidr), what: t.what}
	}
	return r
}

// classify says whether a is private and, if so, what kind of range it is
// in. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and
// 6to4 (2002::/16) addresses are judged by the IPv4 address they carry.
func (r ranges) classify(a netip.Addr) (what string, private bool) {
	if !a.IsValid() {
		return "not a valid address", true
	}
	a = a.WithZone("")
	if a.Is4In6() {
		if what, private := r.classify(a.Unmap()); private {
			return what + ", as an IPv4-mapped IPv6 address", true
		}
		return "", false
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case [12]byte(b[:12]) == [12]byte{0, 0x64, 0xff, 0x9b}:
			v4 := netip.AddrFrom4([4]byte(b[12:16]))
			if what, private := r.classify(v4); private {
				return what + ", through NAT64", true
			}
			return "", false
		case b[0] == 0x20 && b[1] == 0x02:
			v4 := netip.AddrFrom4([4]byte(b[2:6]))
			if what, private := r.classify(v4); private {
				return what + ", through 6to4", true
			}
			return "", false
		}
	}
	for _, s := range r {
		if s.prefix.Contains(a) {
			return s.what, true
		}
	}
	return "", false
}

// refusal is a request this kind would not make, and the rule that said
// no. It travels inside the errors of net/http and is found with errors.As.
type refusal struct {
	code string
	msg  string
}

func (r *refusal) Error() string { return r.msg }

// privateRefusal says that a is private.
func privateRefusal(a netip.Addr, what string) *refusal {
	return &refusal{
		code: "private_address",
		msg: fmt.Sprintf("the address %s is private (%s): this host only calls public addresses unless [http] allow_private = true",
			a.WithZone(""), what),
	}
}

// guard applies the address rules to every connection and every redirect.
type guard struct {
	allowPrivate bool
	classify     func(netip.Addr) (string, bool)
	// exempt is one address and port treated as public, for tests (the
	// zero value matches nothing).
	exempt netip.AddrPort
}

// private says whether dialling ap is refused, and why.
func (g *guard) private(ap netip.AddrPort) (what string, private bool) {
	if g.allowPrivate || (g.exempt.IsValid() && netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()) == g.exempt) {
		return "", false
	}
	return g.classify(ap.Addr())
}

// control is the net.Dialer's Control function: it runs after the host
// name is resolved, with the address about to be connected to, so it sees
// what is really dialled whatever DNS said before.
func (g *guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		if g.allowPrivate {
			return nil
		}
		return &refusal{code: "private_address",
			msg: fmt.Sprintf("the address %q could not be read, so it was not dialled: this host only calls public addresses unless [http] allow_private = true", address)}
	}
	if what, private := g.private(ap); private {
		return privateRefusal(ap.Addr(), what)
	}
	return nil
}

// checkRedirect is the http.Client's redirect policy: at most maxRedirects
// redirects, to http or https only, and not to a private address written
// as such (a host name is checked when it is dialled).
func (g *guard) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &refusal{code: "too_many_redirects",
			msg: fmt.Sprintf("the server redirected more than %d times (last to %s): this host follows at most %d redirects", maxRedirects, safeURL(req.URL), maxRedirects)}
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return &refusal{code: "bad_redirect",
			msg: fmt.Sprintf("the server redirected to a %s: address: this host only follows redirects to http and https", req.URL.Scheme)}
	}
	if a, err := netip.ParseAddr(req.URL.Hostname()); err == nil {
		port, perr := strconv.ParseUint(req.URL.Port(), 10, 16)
		if perr != nil {
			port = map[string]uint64{"http": 80, "https": 443}[req.URL.Scheme]
		}
		if what, private := g.private(netip.AddrPortFrom(a, uint16(port))); private {
			r := privateRefusal(a, what)
			r.msg = fmt.Sprintf("the server redirected to %s, and %s", safeURL(req.URL), r.msg)
			return r
		}
	}
	return nil
}
