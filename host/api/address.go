package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/sessions"
)

// This file checks a request's address as the client sent it, before the
// router sees it. Go's router cleans an address with '.', '..' or empty
// parts and redirects to the clean one, and a client that follows the
// redirect (curl -L, with its method and body) reaches an endpoint it never
// named: PUT …/sessions/c1/files/../../../tools/x became a tool write.
// So the host never cleans and never redirects: such an address, also when
// its dots or slashes are escaped (%2e, %2f, %5c, or escaped twice), is
// refused with 400, and the code says what was wrong: bad_path for a
// session file's path, bad_name for a tool's name, bad_args for a session
// id (as their own checks would), bad_path for any other address.

// maxDecodes is how many times a part of an address is unescaped in search
// of a hidden '.', '..' or '/': the router unescapes once, and a client or
// proxy in front of the host may once more. Each round shortens the text,
// but a part escaped a thousand times would cost a thousand rounds.
const maxDecodes = 3

// refuseAddress answers a request whose address the router would clean or
// redirect, and says whether it did.
func refuseAddress(w http.ResponseWriter, r *http.Request) bool {
	e := checkAddress(rawPath(r))
	if e == nil {
		return false
	}
	writeError(w, e.status, e.code, e.message)
	return true
}

// rawPath is the path of the request as the client wrote it: the request
// line's target up to its query, not the URL the server has unescaped.
func rawPath(r *http.Request) string {
	p := r.RequestURI
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if !strings.HasPrefix(p, "/") { // an absolute URL, "*", or a request made in a test
		return r.URL.EscapedPath()
	}
	return p
}

// checkAddress says what is wrong with an address (a raw path), or nil.
// Under /api/ every part is checked where it stands; elsewhere (the web
// UI) only what the router would clean: '.', '..' and empty parts.
func checkAddress(raw string) *requestError {
	if !strings.HasPrefix(raw, "/") {
		return nil
	}
	parts := strings.Split(raw[1:], "/")
	if parts[0] != "api" {
		for i, part := range parts {
			if part == "." || part == ".." || (part == "" && i < len(parts)-1) {
				return &requestError{http.StatusBadRequest, wire.CodeBadPath, fmt.Sprintf(
					"the address %q has %s; the host takes addresses as written, never cleaned or redirected", shorten(raw), describePart(part))}
			}
		}
		return nil
	}
	if len(parts) == 1 {
		// "/api": the router would redirect it to "/api/".
		return &requestError{http.StatusNotFound, wire.CodeNotFound, "there is no such endpoint (see docs/protocol.md)"}
	}
	at := func(i int, name string) bool { return len(parts) > i && parts[i] == name }
	for i, part := range parts {
		switch {
		case i >= 5 && at(1, "v1") && at(2, "sessions") && at(4, "files"):
			return checkFilePath(strings.Join(parts[5:], "/"))
		}
		why := badPart(part, i == len(parts)-1)
		if why == "" {
			continue
		}
		switch {
		case i >= 3 && at(1, "v1") && at(2, "tools"):
			msg := fmt.Sprintf("the address %q of a tool has %s; a tool's address is /api/v1/tools/{name}, taken as written", shorten(raw), why)
			if i == 3 {
				if err := config.CheckToolName(unescapeAll(part)); err != nil {
					msg = err.Error() + " (the address names a tool as its name field does, and is taken as written)"
				}
			}
			return &requestError{http.StatusBadRequest, wire.CodeBadName, msg}
		case i == 3 && at(1, "v1") && at(2, "sessions"):
			if err := sessions.CheckID(unescapeAll(part)); err != nil {
				return &requestError{http.StatusBadRequest, wire.CodeBadArgs, err.Error()}
			}
			return &requestError{http.StatusBadRequest, wire.CodeBadArgs, fmt.Sprintf("the session id in %q has %s: %s", shorten(raw), why, sessions.IDRule)}
		}
		return &requestError{http.StatusBadRequest, wire.CodeBadPath, fmt.Sprintf(
			"the address %q has %s; the host takes addresses as written, never cleaned or redirected", shorten(raw), why)}
	}
	return nil
}

// badPart says what is wrong with one part of an address under /api/ (as
// sent, and unescaped up to maxDecodes times), or "". An empty last part
// (a final '/') is left to the endpoints: none has one.
func badPart(part string, last bool) string {
	if part == "" && !last {
		return "an empty part ('//')"
	}
	for _, form := range forms(part) {
		if strings.Contains(form, `\`) {
			return "a backslash (parts are separated by '/' only)"
		}
		if form == part {
			if why := dotPart(form); why != "" {
				return why
			}
			continue
		}
		// An escaped '/' hides parts: each must be good too.
		for _, p := range strings.Split(form, "/") {
			if why := dotPart(p); why != "" {
				return why + " once unescaped"
			}
		}
	}
	return ""
}

// checkFilePath checks the path of a session's file as sent (everything
// after …/files/): it must be one the session's own check takes when
// unescaped once, as the router does, and it must not become another
// when unescaped again, nor hold '.', '..' or empty parts as sent.
func checkFilePath(raw string) *requestError {
	bad := func(why string) *requestError {
		return &requestError{http.StatusBadRequest, wire.CodeBadPath, fmt.Sprintf(
			"%q is not a path in the session: %s (the address is taken as written, never cleaned); %s", shorten(raw), why, sessions.PathRule)}
	}
	all := forms(raw)
	// As the endpoint will see it: its own check, in its own words.
	if err := sessions.CheckPath(all[1]); err != nil {
		return &requestError{http.StatusBadRequest, wire.CodeBadPath, err.Error()}
	}
	for n, form := range all {
		if strings.Contains(form, `\`) {
			return bad("it holds a backslash (folders are separated by '/' only)")
		}
		if strings.HasPrefix(form, "/") {
			return bad("it is absolute")
		}
		for _, part := range strings.Split(form, "/") {
			if part == "" {
				return bad("it has an empty part")
			}
			if why := dotPart(part); why != "" {
				if n > 1 {
					why += " once unescaped twice"
				}
				return bad("it has " + why)
			}
		}
	}
	return nil
}

// forms are a part as sent and as unescaped, once and again up to
// maxDecodes times, while unescaping changes it.
func forms(s string) []string {
	out := []string{s}
	for range maxDecodes {
		u, err := url.PathUnescape(s)
		if err != nil || u == s {
			break
		}
		out = append(out, u)
		s = u
	}
	if len(out) == 1 {
		// Always give the endpoint's view (the same text when nothing is escaped).
		out = append(out, s)
	}
	return out
}

// unescapeAll is a part as far as forms unescapes it.
func unescapeAll(s string) string {
	f := forms(s)
	return f[len(f)-1]
}

// dotPart says whether a part is '.' or '..', also with a ';' parameter
// after it (some servers and proxies drop those), or "".
func dotPart(part string) string {
	name, _, params := strings.Cut(part, ";")
	if name == "." || name == ".." {
		if params {
			return fmt.Sprintf("a '%s' part (with a ';' parameter)", name)
		}
		return fmt.Sprintf("a '%s' part", name)
	}
	return ""
}

func describePart(part string) string {
	if part == "" {
		return "an empty part ('//')"
	}
	return dotPart(part)
}

// shorten keeps an address quoted in a message to a readable length.
func shorten(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
