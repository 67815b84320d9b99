package egress

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
)

// Keys makes and checks the proxy credentials of sessions: the user is the session's backend id,
// the password a token derived from it with a secret of the host process's (HMAC-SHA256), so the
// host stores none. A new Keys (a restart) makes earlier tokens invalid; a sandbox gets its proxy
// URL with each run.
type Keys struct {
	secret [32]byte
}

// NewKeys makes Keys with a fresh random secret.
func NewKeys() (*Keys, error) {
	k := &Keys{}
	if _, err := rand.Read(k.secret[:]); err != nil {
		return nil, fmt.Errorf("making the package proxy's secret: %w", err)
	}
	return k, nil
}

// Token is the session's password for the proxy (32 hex digits).
func (k *Keys) Token(session string) string {
	m := hmac.New(sha256.New, k.secret[:])
	m.Write([]byte("toolhost egress proxy\x00" + session))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Auth checks credentials (Options.Auth): the password must be the user's token; the session is
// the user.
func (k *Keys) Auth(user, pass string) (string, bool) {
	if user == "" || len(user) > 128 {
		return "", false
	}
	want := k.Token(user)
	if subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 {
		return "", false
	}
	return user, true
}

// ProxyURL is the proxy URL a session's sandbox is given (HTTP_PROXY, HTTPS_PROXY, http_proxy,
// https_proxy): http://SESSION:TOKEN@ADDR.
func (k *Keys) ProxyURL(addr netip.AddrPort, session string) string {
	u := url.URL{Scheme: "http", User: url.UserPassword(session, k.Token(session)), Host: addr.String()}
	return u.String()
}
