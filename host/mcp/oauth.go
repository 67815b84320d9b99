package mcp

import (
	"encoding/json"
	"github.com/toolhost/toolhost/client/wire"
	"net/http"
	"strings"
)

// The host takes bearer tokens that an admin issues (toolhost.toml's
// [[tokens]]); it is no OAuth authorization server and names none. What
// follows tells OAuth clients so, the way RFC 9728 (OAuth 2.0 Protected
// Resource Metadata) and MCP's authorization spec let a server: a 401's
// WWW-Authenticate names the resource's metadata, and that document lists
// the header as the only way to send a token and no authorization server.
// A client that then looks for an authorization server's metadata
// (RFC 8414, OpenID Connect discovery) at the host gets 501 and an
// error saying why, rather than a 404 it would take as "try the default
// endpoints": so it stops before any /authorize or /register.

// Well-known paths this package answers (WellKnown).
const (
	WellKnownPrefix       = "/.well-known/"
	protectedResourcePath = "/.well-known/oauth-protected-resource"
	authServerPath        = "/.well-known/oauth-authorization-server"
	openIDPath            = "/.well-known/openid-configuration"
)

// noOAuth is the sentence every answer here carries.
const noOAuth = "toolhost takes bearer tokens only (Authorization: Bearer <token>), which its admin issues in toolhost.toml; " +
	"it is no OAuth authorization server and names none, so OAuth can't get a token for it: configure the client with a token instead"

// origin is the scheme and host the request was made to.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// metadataURL is the RFC 9728 metadata URL of the resource a request was
// for: /mcp has its own (RFC 9728 §3.1: the resource's path after the
// well-known prefix), the rest of the API the host's.
func metadataURL(r *http.Request) string {
	if r.URL.Path == Path {
		return origin(r) + protectedResourcePath + Path
	}
	return origin(r) + protectedResourcePath
}

// Challenge is the WWW-Authenticate value of a 401 for r (RFC 6750 §3,
// RFC 9728 §5.1): the realm, the resource's metadata, and invalid_token
// when a token was sent but is not good (none when none was sent, as RFC
// 6750 §3.1 says).
func Challenge(r *http.Request, tokenSent bool) string {
	c := `Bearer realm="toolhost", resource_metadata="` + metadataURL(r) + `"`
	if tokenSent {
		c += `, error="invalid_token", error_description="the token is not one this host knows"`
	}
	return c
}

// WellKnown serves the well-known documents about OAuth, to anyone (they
// hold nothing secret): the protected resource metadata of the host and
// of /mcp, and 501 for an authorization server's metadata. Other
// well-known paths are 404.
func WellKnown(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]string{"code": wire.CodeBadMethod, "message": "only GET reads these documents"}})
		return
	}
	p := r.URL.Path
	switch {
	case p == protectedResourcePath || p == protectedResourcePath+Path:
		resource := origin(r) + strings.TrimPrefix(p, protectedResourcePath)
		writeJSON(w, http.StatusOK, map[string]any{
			"resource":                 resource,
			"bearer_methods_supported": []string{"header"},
			"resource_name":            "toolhost",
			// RFC 9728 §2 lets a document carry more; this says it in words.
			"toolhost_authorization": noOAuth,
		})
	case under(p, authServerPath) || under(p, openIDPath):
		writeJSON(w, http.StatusNotImplemented, map[string]any{"error": map[string]string{"code": wire.CodeNoOAuth, "message": noOAuth}})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": wire.CodeNotFound, "message": "there is no such document here"}})
	}
}

// under says whether p is prefix or a path below it.
func under(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
