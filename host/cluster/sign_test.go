package cluster

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func signer(t *testing.T, host, secret string) *Signer {
	t.Helper()
	s, err := NewSigner(host, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSignedRequestsHoldOnlyAsSigned: a request signed with the shared
// secret is taken for the principal it was signed for; changed on the
// way (its path, its principal), signed with another secret, or too old,
// it is refused, saying why.
func TestSignedRequestsHoldOnlyAsSigned(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	a, b := signer(t, "web-1", secret), signer(t, "web-2", secret)

	r := httptest.NewRequest("POST", "http://web-2:8080/internal/v1/calls", nil)
	a.Sign(r, "ann")
	f, err := b.Verify(r)
	if err != nil || f.Host != "web-1" || f.Principal != "ann" {
		t.Fatalf("a signed request reads as %+v, %v; want web-1 for ann", f, err)
	}

	r = httptest.NewRequest("GET", "http://web-2:8080/internal/v1/runs/r1/events?from=3", nil)
	a.Sign(r, "")
	if f, err := b.Verify(r); err != nil || f.Principal != "" {
		t.Errorf("a request signed for no principal reads as %+v, %v", f, err)
	}

	refused := func(name string, r0 func() (*Signer, string, func(h string) string), want string) {
		t.Helper()
		s, path, change := r0()
		r := httptest.NewRequest("POST", "http://web-2:8080"+path, nil)
		s.Sign(r, "ann")
		r.Header.Set(Header, change(r.Header.Get(Header)))
		if path == "/other" {
			r.URL.Path = "/internal/v1/calls"
		}
		if _, err := b.Verify(r); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, want)
		}
	}
	same := func(h string) string { return h }
	refused("another path", func() (*Signer, string, func(string) string) { return a, "/other", same }, "does not hold")
	refused("another secret", func() (*Signer, string, func(string) string) {
		return signer(t, "web-1", "another secret, 32 bytes long...."), "/internal/v1/calls", same
	}, "does not hold")
	refused("another principal", func() (*Signer, string, func(string) string) {
		return a, "/internal/v1/calls", func(h string) string { return strings.Replace(h, " YW5u ", " YWRtaW4 ", 1) }
	}, "does not hold")
	refused("no fields", func() (*Signer, string, func(string) string) {
		return a, "/internal/v1/calls", func(string) string { return "v1 web-1" }
	}, "must be")
	old := signer(t, "web-1", secret)
	old.now = func() time.Time { return time.Now().Add(-2 * MaxSkew) }
	refused("too old", func() (*Signer, string, func(string) string) { return old, "/internal/v1/calls", same }, "from this host's clock")

	if _, err := b.Verify(httptest.NewRequest("GET", "/internal/v1/calls", nil)); err != ErrNotForwarded {
		t.Errorf("an unsigned request: %v, want ErrNotForwarded", err)
	}
	if _, err := NewSigner("web-1", []byte("short")); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short secret: %v", err)
	}
}
