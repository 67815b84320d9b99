// Package sessions is the host's side of conversation sandboxes: who owns
// which session, the store (SQLite, or PostgreSQL with [store]) that keeps
// the sessions and the ledger of their runs across restarts, expiry, the reconcile at start, and the gate
// and wrapper that let a call of a session tool (run_python, run_bash,
// sandbox_files, sandbox_file) run in its caller's session.
//
// A session is named by its caller (1 to 128 of A-Z a-z 0-9 . _ : -) and
// belongs to the principal that made it: the same name given by another
// principal is another session, and one principal never finds another's
// (not_found). Behind the plugin boundary a session is known only by its
// backend id (BackendID), which the sandboxes, the workspaces and the
// egress proxy's credentials use.
//
// The sandboxes themselves are the Backend's: the python plugin's, reached
// through the plugin protocol's Sessions service.
package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Config is what the backend takes of [sessions]: the sandboxes' limits
// and the egress proxy's address. It is the SDK's own type, so the plugin
// protocol's client (hostside.SessionsClient) is a Backend as it is.
type Config = sdk.SessionsConfig

// File is one file or folder of a session's workspace: its path relative
// to /work, size, time of change, and whether it is a folder.
type File = sdk.SessionFile

// Backend keeps the sandboxes and workspaces of sessions, each named by its
// backend id. It is the SDK's SessionKeeper, the one interface on both sides
// of the plugin protocol: a kind implements it, the protocol's client
// (hostside.SessionsClient) is one, and so is a backend in memory for tests.
// Its errors the user reads are *errcode.Error: not_found (no such file, or
// no such session), bad_path, too_large, disk_full.
type Backend = sdk.SessionKeeper

// Preparer is a Backend that has something to do before a run or a file
// operation (e.g. configure again a plugin that was restarted).
type Preparer interface {
	Prepare(ctx context.Context) error
}

// MaxIDLength is the longest a session's id may be.
const MaxIDLength = 128

var idRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// IDRule says what a session id may be, for messages.
const IDRule = "a session id is 1 to 128 letters, digits, '.', '_', ':' or '-', and not \".\" or \"..\""

// CheckID says what is wrong with a session id, as a bad_args error. "."
// and ".." are refused: no URL could name them.
func CheckID(id string) error {
	if idRE.MatchString(id) && id != "." && id != ".." {
		return nil
	}
	if id == "" {
		return errcode.New(wire.CodeBadArgs, "no session was named: "+IDRule)
	}
	shown := id
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	return errcode.Errorf(wire.CodeBadArgs, "%q is not a session id: %s", shown, IDRule)
}

// BackendID is a session's id behind the plugin boundary: "s" and the
// first 24 hex digits of the SHA-256 of its principal, a zero byte and its
// id. It says nothing of either, and two principals' sessions of the same
// name never share one.
func BackendID(principal, session string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + session))
	return "s" + hex.EncodeToString(sum[:12])
}

// NotFound is the one answer for a session that is not there and for a
// session of someone else: the same code and words, so that an answer
// never tells which.
func NotFound(session string) error {
	return errcode.Errorf(wire.CodeNotFound, "there is no session %q (a session belongs to the token that made it)", session)
}

// describe names a session in logs.
func describe(se Session) string {
	return fmt.Sprintf("%s of %s (%s)", se.ID, se.Principal, se.Backend)
}
