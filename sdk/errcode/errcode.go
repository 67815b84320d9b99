// Package errcode is toolhost's one error vocabulary: the Error that a
// kind returns, the plugin protocol carries, the host keeps on a run and a
// client reads as {"code","message"}, and the codes it may carry.
//
// It imports nothing but the standard library, so a kind (through the
// sdk, whose Error is this one), the host and a client alike can use it
// without pulling in the plugin transport. docs/protocol.md lists the
// codes and what each means for a client.
package errcode

import (
	"context"
	"errors"
	"fmt"
)

// The codes of the host and the protocol. A kind may add its own (the http
// kind's http_status, the python kind's memory …); a client treats a code
// it does not know as Failed.
const (
	// Failed: the run failed for a reason no other code names.
	Failed = "failed"
	// Cancelled: the run was cancelled (by its caller, or the host
	// stopping). Decided by FromRun only.
	Cancelled = "cancelled"
	// Timeout: the run took longer than it may.
	Timeout = "timeout"
	// PluginCrashed: the kind's plugin died during the run; it is being
	// restarted.
	PluginCrashed = "plugin_crashed"
	// PluginUnavailable: the tool's kind is not running (not started,
	// restarting, or the host is shutting down).
	PluginUnavailable = "plugin_unavailable"
	// BadArgs: the arguments don't match the tool's params.
	BadArgs = "bad_args"
	// UnknownTool: no tool of that name is served.
	UnknownTool = "unknown_tool"
	// TooDeep: tools called tools deeper than the host allows.
	TooDeep = "too_deep"
	// NotFound: no such session, or no such file in it (a session of
	// another caller is not found either).
	NotFound = "not_found"
	// BadPath: a path that leaves its folder (.., absolute, a symbolic link
	// pointing out) or names what is not a regular file.
	BadPath = "bad_path"
	// DiskFull: a session's workspace has no room left ([sessions] disk_mb),
	// or the host's session folder has no room for a new one (its free
	// space, less [python] sessions_keep_free_mb).
	DiskFull = "disk_full"
	// TooManySandboxes: every sandbox the host may run at once ([python.pool]
	// max, tool runs and conversation sandboxes together) is running code,
	// none idle to stop; try again when a run has ended.
	TooManySandboxes = "too_many_sandboxes"
	// TooManyCalls: a run and the runs under it made more nested calls
	// (of tools and the model) than the host allows one call to make.
	TooManyCalls = "too_many_calls"
	// Forbidden: the caller's role does not allow it, or the run is
	// someone else's.
	Forbidden = "forbidden"
	// TooManyRuns: the caller already has its max_running runs going.
	TooManyRuns = "too_many_runs"
	// TooManySessions: making one more conversation session would pass
	// [sessions] max_sessions_per_principal (the caller's) or max_sessions
	// (the host's); the message says which. Sessions already there keep
	// working.
	TooManySessions = "too_many_sessions"
	// TooManyTransfers: the caller (max_transfers_per_principal) or the
	// host (max_transfers) already has its most file uploads and
	// downloads of sessions going; refused at once, try again shortly.
	TooManyTransfers = "too_many_transfers"
	// UnknownRun: no such run, or it was forgotten.
	UnknownRun = "unknown_run"
	// Unsupported: the host does not offer what was asked (e.g. a model).
	Unsupported = "unsupported"
	// NoHost: a test kit's host that serves no nested calls (sdktest).
	NoHost = "no_host"
	// BadFrame: a websocket frame that is not one of the protocol's.
	BadFrame = "bad_frame"
	// TooLarge: a frame or a request body over its limit.
	TooLarge = "too_large"
	// TooSlow: a websocket client read nothing while its replies piled
	// up past twice its queue's limit; it was disconnected.
	TooSlow = "too_slow"
	// ShuttingDown: the host is stopping and closed the websocket; connect
	// again once it is back.
	ShuttingDown = "shutting_down"
	// UnsupportedProtocol: the client asked for a protocol version the
	// host does not speak.
	UnsupportedProtocol = "unsupported_protocol"
	// Unauthorized: no token, or a wrong one.
	Unauthorized = "unauthorized"
	// TokenRevoked: the token a connection signed in with was removed.
	TokenRevoked = "token_revoked"
	// TokenDowngraded: the token's role was lowered.
	TokenDowngraded = "token_downgraded"
	// Budget: the caller used up one of its budgets per hour
	// (runs_per_hour, sandbox_cpu_seconds_per_hour); the message says
	// which, the use and when it resets.
	Budget = "budget"
	// IdempotencyConflict: an idempotency key sent again with another
	// call (another tool, session or arguments).
	IdempotencyConflict = "idempotency_conflict"
	// Interrupted: the call of an idempotency key was running when the
	// host stopped; whether it acted is unknown.
	Interrupted = "interrupted"

	// The model's codes: why the host's model ([model] in its config)
	// gave no answer. A run that asked it ends with the code unless its
	// kind says otherwise. No model configured is Unsupported; a model
	// that took longer than [model] timeout_seconds is Timeout.

	// ModelUnreachable: the model's server can't be reached (nothing
	// listens at base_url, the name does not resolve, TLS fails).
	ModelUnreachable = "model_unreachable"
	// ModelUnauthorized: the model's server refused the API key, or wants
	// one and none is configured (HTTP 401 or 403).
	ModelUnauthorized = "model_unauthorized"
	// ModelNotFound: the model's server does not serve the configured
	// model (HTTP 404).
	ModelNotFound = "model_not_found"
	// ModelRateLimited: the model's server is refusing calls for now
	// (HTTP 429), still after the one wait it asked for.
	ModelRateLimited = "model_rate_limited"
	// ModelFailed: the model's server failed (HTTP 5xx), refused the
	// request for another reason, or sent an error in its answer.
	ModelFailed = "model_failed"
	// ModelCutOff: the answer stopped midway: the stream ended without
	// the model saying it had finished.
	ModelCutOff = "model_cut_off"
)

// Error is a failure as the user reads it: a short machine-readable code
// and a sentence for people. Its JSON is the protocol's error object.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error is the sentence alone: it is what people read.
func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, &Error{Code: c}) true for any *Error of code c,
// whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code != "" && t.Code == e.Code
}

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
