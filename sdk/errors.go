package sdk

import "github.com/toolhost/toolhost/sdk/errcode"

// Error is a run's failure as the user reads it: a short code (one of
// package errcode's, or the kind's own) and a sentence. It is errcode's
// Error, the one error type of the host, the plugin protocol and the
// client protocol; errors.Is(err, &sdk.Error{Code: c}) matches any of
// code c.
type Error = errcode.Error

// Errorf makes an *Error with a code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return errcode.Errorf(code, format, args...)
}
