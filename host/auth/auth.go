// Package auth says who a caller is from the bearer token they present,
// and what their role lets them do. Tokens are known only by their
// SHA-256, compared in constant time; the token itself is never kept.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/toolhost/toolhost/config"
)

// Roles, from least to most allowed.
const (
	Viewer = "viewer"
	Editor = "editor"
	Admin  = "admin"
)

// Identity is who a caller is: the token's name and its role.
type Identity struct {
	Name string // the principal, as logs and run records show it
	Role string
}

// Local is every caller of a host with no tokens configured.
func Local() Identity { return Identity{Name: "local", Role: Admin} }

// CanCall says whether the identity may run tools (and check them).
func (id Identity) CanCall() bool { return id.Role == Admin || id.Role == Editor }

// CanSee says whether the identity may read, attach to or cancel a run
// made by principal.
func (id Identity) CanSee(principal string) bool {
	return id.Role == Admin || (id.Name != "" && id.Name == principal)
}

type entry struct {
	sum  [sha256.Size]byte
	name string
	role string
}

// Tokens knows the configured tokens.
type Tokens struct {
	entries []entry
}

// New returns the tokens of a config. Hashes were checked when the config
// was loaded; one that does not decode is skipped.
func New(list []config.Token) *Tokens {
	t := &Tokens{}
	for _, tok := range list {
		b, err := hex.DecodeString(tok.SHA256)
		if err != nil || len(b) != sha256.Size {
			continue
		}
		e := entry{name: tok.Name, role: tok.Role}
		copy(e.sum[:], b)
		t.entries = append(t.entries, e)
	}
	return t
}

// Required says whether callers must present a token: whether any are
// configured.
func (t *Tokens) Required() bool { return len(t.entries) > 0 }

// Check returns the identity of a token. It compares the token's SHA-256
// with every configured one, in constant time, and looks at them all
// whichever matches.
func (t *Tokens) Check(token string) (Identity, bool) {
	if token == "" {
		return Identity{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, false
	}
	return Identity{Name: t.entries[found].name, Role: t.entries[found].role}, true
}

// Bearer returns the token of an "Authorization: Bearer …" header, and
// whether the request carried an Authorization header at all.
func Bearer(r *http.Request) (token string, present bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}
