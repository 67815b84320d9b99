// Package auth says who a caller is from the bearer token they present,
// and what their role lets them do. Tokens are known only by their
// SHA-256, compared in constant time; the token itself is never kept.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"github.com/toolhost/toolhost/client/wire"
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
	// Approver is set for a token with approver = true: it decides other
	// tokens' approvals, whatever its role.
	Approver bool
	// sum is the SHA-256 of the token the caller signed in with; zero for
	// Local.
	sum [sha256.Size]byte
}

// LocalName is the principal of every caller of a host with no tokens.
const LocalName = "local"

// Local is every caller of a host with no tokens configured.
func Local() Identity { return Identity{Name: LocalName, Role: Admin} }

// local says whether the identity is Local's, not a token's.
func (id Identity) local() bool { return id.sum == [sha256.Size]byte{} }

// rank orders the roles: a higher rank may do more.
func rank(role string) int {
	switch role {
	case Admin:
		return 3
	case Editor:
		return 2
	case Viewer:
		return 1
	}
	return 0
}

// Change says why an identity signed in under earlier tokens no longer
// holds under the tokens in force: Code is "token_revoked" (the token is
// gone, renamed, or tokens were turned on or off) or "token_downgraded"
// (its role is lower now); Message says so in words, and what to do.
type Change struct {
	Code    string
	Message string
}

// Recheck says who id, signed in under an earlier set of tokens, is under
// t: the same caller, in its role now (a role raised is taken as it is),
// or a Change when the identity no longer holds and the caller must sign
// in again.
func (t *Tokens) Recheck(id Identity) (Identity, *Change) {
	if id.local() {
		if t.Required() {
			return Identity{}, &Change{Code: wire.CodeTokenRevoked, Message: "this host now needs a token ([[tokens]] were added to its config); connect again with a token"}
		}
		return id, nil
	}
	if !t.Required() {
		return Identity{}, &Change{Code: wire.CodeTokenRevoked, Message: fmt.Sprintf("the token %q was removed from the config, with every other: the host now serves its own machine only, without a token; connect again from there", id.Name)}
	}
	e, ok := t.find(id.sum)
	switch {
	case !ok:
		return Identity{}, &Change{Code: wire.CodeTokenRevoked, Message: fmt.Sprintf("the token %q was removed from the config; connect again with another token", id.Name)}
	case e.name != id.Name:
		return Identity{}, &Change{Code: wire.CodeTokenRevoked, Message: fmt.Sprintf("the token %q is named %q in the config now; connect again to go on as %q", id.Name, e.name, e.name)}
	case rank(e.role) < rank(id.Role):
		return Identity{}, &Change{Code: wire.CodeTokenDowngraded, Message: fmt.Sprintf("the role of the token %q was lowered from %s to %s in the config; connect again to go on as %s", id.Name, id.Role, e.role, article(e.role))}
	}
	return e.identity(), nil
}

func article(role string) string {
	if role == Admin || role == Editor {
		return "an " + role
	}
	return "a " + role
}

// CanCall says whether the identity may run tools (and check them).
func (id Identity) CanCall() bool { return id.Role == Admin || id.Role == Editor }

// Local says whether the identity is the one caller of a host with no
// tokens, not a token's holder.
func (id Identity) IsLocal() bool { return id.local() }

// CanSee says whether the identity may read, attach to or cancel a run
// made by principal.
func (id Identity) CanSee(principal string) bool {
	return id.Role == Admin || (id.Name != "" && id.Name == principal)
}

type entry struct {
	sum      [sha256.Size]byte
	name     string
	role     string
	approver bool
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
		e := entry{name: tok.Name, role: tok.Role, approver: tok.Approver}
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
	e, ok := t.find(sum)
	if !ok {
		return Identity{}, false
	}
	return e.identity(), true
}

// find returns the entry of a token's SHA-256, looking at every entry
// whichever matches, each in constant time.
func (t *Tokens) find(sum [sha256.Size]byte) (entry, bool) {
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return entry{}, false
	}
	return t.entries[found], true
}

func (e entry) identity() Identity {
	return Identity{Name: e.name, Role: e.role, Approver: e.approver, sum: e.sum}
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
