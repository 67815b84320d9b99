// Package errcode is what a kind and the host do with toolhost's one
// error type, wire.Error ({"code","message"}: a kind returns it, the
// plugin protocol carries it, the host keeps it on a run and a client
// reads it): make one (New, Errorf), read its code through wrapping (Code,
// Has), and decide how a run ended (FromRun). Every code is declared once,
// in package wire; errcode names the ones a kind returns or meets, so a
// plugin writes errcode.BadArgs as it always has.
//
// It imports nothing but the standard library and package wire (a leaf),
// so a kind (through the sdk, whose Error is this one), the host and a
// client alike can use it without pulling in the plugin transport.
// docs/protocol.md lists the codes and what each means for a client.
package errcode

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolhost/toolhost/client/wire"
)

// The codes a kind returns or meets (an argument, a session's file, a
// nested call, the host's model), re-exported for kinds: a plugin imports
// the SDK, and names them errcode.BadArgs … as it always has. Each is
// declared once, with its meaning, in package wire (CodeBadArgs …),
// where the host's other codes are; these only name them, and a test
// keeps it so.
const (
	Failed            = wire.CodeFailed
	Cancelled         = wire.CodeCancelled
	Timeout           = wire.CodeTimeout
	PluginUnavailable = wire.CodePluginUnavailable
	BadArgs           = wire.CodeBadArgs
	UnknownTool       = wire.CodeUnknownTool
	TooDeep           = wire.CodeTooDeep
	NotFound          = wire.CodeNotFound
	BadPath           = wire.CodeBadPath
	DiskFull          = wire.CodeDiskFull
	TooManySandboxes  = wire.CodeTooManySandboxes
	TooManyCalls      = wire.CodeTooManyCalls
	TooLarge          = wire.CodeTooLarge
	Unsupported       = wire.CodeUnsupported
	NoHost            = wire.CodeNoHost
	ModelUnreachable  = wire.CodeModelUnreachable
	ModelUnauthorized = wire.CodeModelUnauthorized
	ModelNotFound     = wire.CodeModelNotFound
	ModelRateLimited  = wire.CodeModelRateLimited
	ModelFailed       = wire.CodeModelFailed
	ModelCutOff       = wire.CodeModelCutOff
)

// Error is a failure as the user reads it: a short machine-readable code
// and a sentence for people. Its JSON is the protocol's error object; it is
// wire's Error, the one error type.
type Error = wire.Error

// New makes an *Error.
func New(code, message string) *Error { return &Error{Code: code, Message: message} }

// Errorf makes an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Code is the code of the first *Error in err's chain, or "" when there
// is none.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Has says whether err's chain holds an *Error of code.
func Has(err error, code string) bool { return errors.Is(err, &Error{Code: code}) }

// FromRun is how a run that returned err ends, for everyone: the one place
// that decides a run was cancelled. nil stays nil. A run whose ctx was
// cancelled, or whose error is ctx's cancellation, ended Cancelled unless
// it said something more precise than Failed (a timeout, a crash); any
// other *Error is kept as it is; anything else is Failed with its text.
func FromRun(ctx context.Context, err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	coded := errors.As(err, &e) && e.Code != ""
	cancelled := errors.Is(err, context.Canceled) || ctx != nil && ctx.Err() != nil
	switch {
	case cancelled && (!coded || e.Code == Failed):
		return &Error{Code: Cancelled, Message: "the run was cancelled"}
	case coded:
		return &Error{Code: e.Code, Message: e.Message}
	}
	return &Error{Code: Failed, Message: err.Error()}
}
