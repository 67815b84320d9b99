package main

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	r := newRanges()
	cases := []struct {
		addr    string
		private bool
		what    string // part of the description, when private
	}{
		// public
		{"1.1.1.1", false, ""},
		{"8.8.8.8", false, ""},
		{"93.184.215.14", false, ""},
		{"100.63.255.255", false, ""},
		{"100.128.0.0", false, ""},
		{"172.15.255.255", false, ""},
		{"172.32.0.0", false, ""},
		{"192.0.1.1", false, ""},
		{"198.17.255.255", false, ""},
		{"198.20.0.0", false, ""},
		{"223.255.255.255", false, ""},
		{"2606:4700:4700::1111", false, ""},
		{"2001:4860:4860::8888", false, ""},
		{"::ffff:8.8.8.8", false, ""},
		{"64:ff9b::808:808", false, ""},
		{"2002:808:808::1", false, ""},
		// this network, 0.0.0.0/8
		{"0.0.0.0", true, "this network"},
		{"0.1.2.3", true, "this network"},
		// loopback
		{"127.0.0.1", true, "loopback"},
		{"127.255.255.254", true, "loopback"},
		{"::1", true, "loopback"},
		// RFC 1918
		{"10.0.0.1", true, "RFC 1918"},
		{"10.255.255.255", true, "RFC 1918"},
		{"172.16.0.1", true, "RFC 1918"},
		{"172.31.255.255", true, "RFC 1918"},
		{"192.168.1.1", true, "RFC 1918"},
		// CGNAT
		{"100.64.0.1", true, "carrier-grade NAT"},
		{"100.127.255.255", true, "carrier-grade NAT"},
		// link-local and metadata
		{"169.254.0.1", true, "link-local"},
		{"169.254.169.254", true, "metadata"},
		{"fe80::1", true, "link-local"},
		{"fe80::1%eth0", true, "link-local"},
		{"febf::1", true, "link-local"},
		// unique local, site-local
		{"fc00::1", true, "unique local"},
		{"fd00:ec2::254", true, "unique local"},
		{"fec0::1", true, "site-local"},
		// unspecified
		{"::", true, "unspecified"},
		// multicast and broadcast
		{"224.0.0.1", true, "multicast"},
		{"239.255.255.250", true, "multicast"},
		{"ff02::1", true, "multicast"},
		{"255.255.255.255", true, "broadcast"},
		// special-purpose IPv4
		{"192.0.0.8", true, "IETF"},
		{"192.0.2.1", true, "documentation"},
		{"198.51.100.7", true, "documentation"},
		{"203.0.113.9", true, "documentation"},
		{"198.18.0.1", true, "benchmarking"},
		{"198.19.255.255", true, "benchmarking"},
		{"240.0.0.1", true, "reserved"},
		{"254.1.2.3", true, "reserved"},
		{"192.88.99.1", true, "6to4 relay"},
		// special-purpose IPv6
		{"::7f00:1", true, "IPv4-compatible"},
		{"100::1", true, "discard"},
		{"2001:db8::1", true, "documentation"},
		{"2001::1", true, "Teredo"},
		{"2001:2::1", true, "benchmarking"},
		{"64:ff9b:1::1", true, "NAT64"},
		// IPv4-mapped IPv6 forms
		{"::ffff:127.0.0.1", true, "loopback, as an IPv4-mapped"},
		{"::ffff:10.1.2.3", true, "RFC 1918, as an IPv4-mapped"},
		{"::ffff:169.254.169.254", true, "metadata address, as an IPv4-mapped"},
		{"::ffff:0.0.0.0", true, "this network\", as an IPv4-mapped"},
		{"::ffff:100.64.0.1", true, "carrier-grade NAT, as an IPv4-mapped"},
		{"::ffff:255.255.255.255", true, "broadcast, as an IPv4-mapped"},
		{"::ffff:7f00:1", true, "loopback, as an IPv4-mapped"},
		// NAT64 and 6to4 carrying private IPv4
		{"64:ff9b::7f00:1", true, "loopback, through NAT64"},
		{"64:ff9b::a9fe:a9fe", true, "metadata address, through NAT64"},
		{"2002:c0a8:101::1", true, "RFC 1918, through 6to4"},
		{"2002:7f00:1::", true, "loopback, through 6to4"},
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		what, private := r.classify(a)
		if private != c.private {
			t.Errorf("%s: private = %v (%q), want %v", c.addr, private, what, c.private)
			continue
		}
		if c.private && !strings.Contains(what, c.what) {
			t.Errorf("%s: described as %q, want it to mention %q", c.addr, what, c.what)
		}
	}
	if _, private := r.classify(netip.Addr{}); !private {
		t.Errorf("the zero address is not refused")
	}
}

func TestDialControl(t *testing.T) {
	g := &guard{classify: newRanges().classify}
	open := &guard{allowPrivate: true, classify: newRanges().classify}
	cases := []struct {
		address string
		refused bool
	}{
		{"1.1.1.1:443", false},
		{"[2606:4700:4700::1111]:80", false},
		{"127.0.0.1:80", true},
		{"127.0.0.53:53", true},
		{"10.0.0.1:8080", true},
		{"169.254.169.254:80", true},
		{"[::1]:80", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"[::ffff:169.254.169.254]:80", true},
		{"[fe80::1%eth0]:80", true},
		{"[fd00::1]:443", true},
		{"0.0.0.0:80", true},
		{"[::]:80", true},
		{"not an address", true},
		{"localhost:80", true}, // a name never reaches Control; refuse if it did
	}
	for _, c := range cases {
		err := g.control("tcp", c.address, nil)
		if (err != nil) != c.refused {
			t.Errorf("control(%q) = %v, want refused %v", c.address, err, c.refused)
		}
		var r *refusal
		if err != nil && (!errors.As(err, &r) || r.code != "private_address") {
			t.Errorf("control(%q) = %#v, want a private_address refusal", c.address, err)
		}
		if err := open.control("tcp", c.address, nil); err != nil {
			t.Errorf("with allow_private, control(%q) = %v", c.address, err)
		}
	}
	err := g.control("tcp", "127.0.0.1:8080", nil)
	want := "the address 127.0.0.1 is private (loopback): this host only calls public addresses unless [http] allow_private = true"
	if err == nil || err.Error() != want {
		t.Errorf("message = %v, want %q", err, want)
	}
}

func TestCheckRedirect(t *testing.T) {
	g := &guard{classify: newRanges().classify}
	open := &guard{allowPrivate: true, classify: newRanges().classify}
	via := func(n int) []*http.Request {
		out := make([]*http.Request, n)
		for i := range out {
			out[i] = &http.Request{URL: &url.URL{Scheme: "https", Host: "example.com", Path: "/"}}
		}
		return out
	}
	cases := []struct {
		to   string
		hops int
		g    *guard
		code string // "" when followed
	}{
		{"https://example.com/next", 1, g, ""},
		{"http://93.184.215.14/", 1, g, ""},
		{"https://example.com/next", 5, g, ""},
		{"https://example.com/next", 6, g, "too_many_redirects"},
		{"https://example.com/next", 6, open, "too_many_redirects"},
		{"ftp://example.com/file", 1, g, "bad_redirect"},
		{"file:///etc/passwd", 1, open, "bad_redirect"},
		{"http://127.0.0.1/", 1, g, "private_address"},
		{"http://127.0.0.1/", 1, open, ""},
		{"http://169.254.169.254/latest/meta-data/", 1, g, "private_address"},
		{"http://[::1]:8080/", 1, g, "private_address"},
		{"http://[::ffff:10.0.0.1]/", 1, g, "private_address"},
		{"http://[fe80::1%25eth0]/", 1, g, "private_address"},
		{"http://10.1.2.3:9000/?key=secret", 2, g, "private_address"},
		// a name is checked when it is dialled
		{"http://localhost/", 1, g, ""},
	}
	for _, c := range cases {
		u, err := url.Parse(c.to)
		if err != nil {
			t.Fatal(err)
		}
		err = c.g.checkRedirect(&http.Request{URL: u}, via(c.hops))
		code := ""
		var r *refusal
		if errors.As(err, &r) {
			code = r.code
		} else if err != nil {
			code = "?" + err.Error()
		}
		if code != c.code {
			t.Errorf("redirect to %s after %d hops (allow_private %v): %q, want %q", c.to, c.hops, c.g.allowPrivate, code, c.code)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the message shows the query: %v", err)
		}
	}
}
