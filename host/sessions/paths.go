package sessions

import (
	"strings"
	"unicode/utf8"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// PathRule says what a file's path in a session may be, for messages.
const PathRule = "a file's path is relative to the session's /work, with '/' between folders: " +
	"not starting with '/', no empty part, no '.' or '..' part, no control characters, " +
	"at most 4096 bytes and 255 a part"

// CheckPath says what is wrong with a file's path in a session, as a
// bad_path error. The backend confines every path to the workspace itself
// (symbolic links included); this refuses early, and in the same words
// whatever the backend, what can never name a file in it.
func CheckPath(p string) error {
	bad := func(why string) error {
		shown := p
		if len(shown) > 80 {
			shown = shown[:80] + "…"
		}
		return errcode.Errorf(wire.CodeBadPath, "%q is not a path in the session: %s; %s", shown, why, PathRule)
	}
	switch {
	case p == "":
		return errcode.New(wire.CodeBadPath, "no file was named: "+PathRule)
	case len(p) > 4096:
		return bad("it is longer than 4096 bytes")
	case !utf8.ValidString(p):
		return bad("it is not UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("it is absolute")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return bad("it holds a control character")
		}
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case part == "":
			return bad("it has an empty part")
		case part == "." || part == "..":
			return bad("it has a '" + part + "' part")
		case len(part) > 255:
			return bad("a part is longer than 255 bytes")
		}
	}
	return nil
}
