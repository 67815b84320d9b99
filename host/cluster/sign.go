// Package cluster is what the hosts sharing a store say to each other: a
// conversation's calls, the events of its runs, attaches and
// cancellations forwarded to the host that holds it (Router, Client), over
// HTTP requests signed with the secret they share ([cluster] secret_file
// or secret_env), which the receiving host checks (Signer.Verify) before
// it acts on one.
package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header carries a forwarded request's signature: the forwarding host's
// id, when it signed, for which principal, and the HMAC-SHA256 of those
// with the request's method and path under the shared secret.
const Header = "Toolhost-Forwarded"

// MaxSkew is how far a signature's time may be from the receiving host's
// clock: a request captured on the way is refused once it is older.
const MaxSkew = time.Minute

// Signer signs the requests this host forwards and checks those it takes.
type Signer struct {
	hostID string
	key    []byte
	now    func() time.Time
}

// NewSigner signs as the host hostID with secret, which must be at least
// 16 bytes (the same on every host).
func NewSigner(hostID string, secret []byte) (*Signer, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("the hosts' shared secret ([cluster] secret_file or secret_env) is %d bytes: it must be at least 16, like the output of `openssl rand -hex 32`", len(secret))
	}
	return &Signer{hostID: hostID, key: append([]byte(nil), secret...), now: time.Now}, nil
}

// Forwarded is what a checked signature says.
type Forwarded struct {
	// Host is the id of the host that forwarded the request.
	Host string
	// Principal is who the forwarding host signed the request in as; ""
	// for a request of the host itself (following or cancelling a run).
	Principal string
}

// Sign signs r as forwarded by this host for principal.
func (s *Signer) Sign(r *http.Request, principal string) {
	t := strconv.FormatInt(s.now().UnixMilli(), 10)
	p := "-" // no principal: a single "-" is no base64 of anything
	if principal != "" {
		p = base64.RawURLEncoding.EncodeToString([]byte(principal))
	}
	r.Header.Set(Header, fmt.Sprintf("v1 %s %s %s %s", s.hostID, t, p, s.mac(s.hostID, t, p, r)))
}

func (s *Signer) mac(host, t, p string, r *http.Request) string {
	m := hmac.New(sha256.New, s.key)
	for _, part := range []string{"v1", host, t, p, r.Method, r.URL.RequestURI()} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// ErrNotForwarded is Verify's answer for a request with no signature.
var ErrNotForwarded = errors.New("the request is not signed by a host")

// Verify checks r's signature: made with the shared secret, for this
// method and path, within MaxSkew of now.
func (s *Signer) Verify(r *http.Request) (Forwarded, error) {
	h := r.Header.Get(Header)
	if h == "" {
		return Forwarded{}, ErrNotForwarded
	}
	f := strings.Fields(h)
	if len(f) != 5 || f[0] != "v1" {
		return Forwarded{}, fmt.Errorf("the %s header must be \"v1 <host> <time> <principal> <signature>\"", Header)
	}
	host, t, p, sig := f[1], f[2], f[3], f[4]
	if !hmac.Equal([]byte(sig), []byte(s.mac(host, t, p, r))) {
		return Forwarded{}, errors.New("the signature does not hold: the hosts' [cluster] secrets differ, or the request was changed on the way")
	}
	ms, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return Forwarded{}, fmt.Errorf("the signature's time %q is not a number", t)
	}
	if skew := s.now().Sub(time.UnixMilli(ms)); skew > MaxSkew || skew < -MaxSkew {
		return Forwarded{}, fmt.Errorf("the signature was made %s from this host's clock, more than %s: keep the hosts' clocks in time (NTP)", skew.Round(time.Second), MaxSkew)
	}
	if p == "-" {
		return Forwarded{Host: host}, nil
	}
	principal, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return Forwarded{}, errors.New("the signature's principal is not base64url")
	}
	return Forwarded{Host: host, Principal: string(principal)}, nil
}
