package wire

// Error is the error object of the protocol, {"code","message"}: a short
// machine-readable code (one of the Code constants, or a kind's own) and a
// sentence for people. It is toolhost's one error type: a kind returns it
// (sdk.Error), the plugin protocol carries it, the host keeps it on a run
// and a client reads it; errors.Is(err, &Error{Code: c}) matches any of
// code c. Package errcode has its helpers (New, Errorf, Code, FromRun).
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

// The codes of the host and the protocol, each with what it means; the
// table in docs/protocol.md ("Error codes") lists the same set, which a
// test checks. A kind may add its own (the http kind's http_status, the
// python kind's memory …); a client treats a code it does not know as
// CodeFailed.
const (
	// CodeFailed: the run failed for a reason no other code names.
	CodeFailed = "failed"
	// CodeCancelled: the run was cancelled (by its caller, or the host
	// stopping). Decided by errcode.FromRun only.
	CodeCancelled = "cancelled"
	// CodeTimeout: the run took longer than it may.
	CodeTimeout = "timeout"
	// CodePluginCrashed: the kind's plugin died during the run; it is being
	// restarted.
	CodePluginCrashed = "plugin_crashed"
	// CodePluginUnavailable: the tool's kind is not running (not started,
	// restarting, or the host is shutting down).
	CodePluginUnavailable = "plugin_unavailable"
	// CodeBadArgs: the arguments don't match the tool's params.
	CodeBadArgs = "bad_args"
	// CodeUnknownTool: no tool of that name is served.
	CodeUnknownTool = "unknown_tool"
	// CodeTooDeep: tools called tools deeper than the host allows.
	CodeTooDeep = "too_deep"
	// CodeNotFound: no such session, or no such file in it (a session of
	// another caller is not found either).
	CodeNotFound = "not_found"
	// CodeBadPath: a path that leaves its folder (.., absolute, a symbolic link
	// pointing out) or names what is not a regular file.
	CodeBadPath = "bad_path"
	// CodeDiskFull: a session's workspace has no room left ([sessions] disk_mb),
	// or the host's session folder has no room for a new one (its free
	// space, less [python] sessions_keep_free_mb).
	CodeDiskFull = "disk_full"
	// CodeTooManySandboxes: every sandbox the host may run at once ([python.pool]
	// max, tool runs and conversation sandboxes together) is running code,
	// none idle to stop; try again when a run has ended.
	CodeTooManySandboxes = "too_many_sandboxes"
	// CodeTooManyCalls: a run and the runs under it made more nested calls
	// (of tools and the model) than the host allows one call to make.
	CodeTooManyCalls = "too_many_calls"
	// CodeForbidden: the caller's role does not allow it, or the run is
	// someone else's.
	CodeForbidden = "forbidden"
	// CodeTooManyRuns: the caller already has its max_running runs going.
	CodeTooManyRuns = "too_many_runs"
	// CodeTooManySessions: making one more conversation session would pass
	// [sessions] max_sessions_per_principal (the caller's) or max_sessions
	// (the host's); the message says which. Sessions already there keep
	// working.
	CodeTooManySessions = "too_many_sessions"
	// CodeTooManyTransfers: the caller (max_transfers_per_principal) or the
	// host (max_transfers) already has its most file uploads and
	// downloads of sessions going; refused at once, try again shortly.
	CodeTooManyTransfers = "too_many_transfers"
	// CodeUnknownRun: no such run, or it was forgotten.
	CodeUnknownRun = "unknown_run"
	// CodeUnsupported: the host does not offer what was asked (e.g. a model).
	CodeUnsupported = "unsupported"
	// CodeNoHost: a test kit's host that serves no nested calls (sdktest).
	CodeNoHost = "no_host"
	// CodeBadFrame: a websocket frame that is not one of the protocol's.
	CodeBadFrame = "bad_frame"
	// CodeTooLarge: a frame or a request body over its limit.
	CodeTooLarge = "too_large"
	// CodeTooSlow: a websocket client read nothing while its replies piled
	// up past twice its queue's limit; it was disconnected.
	CodeTooSlow = "too_slow"
	// CodeShuttingDown: the host is stopping and closed the websocket; connect
	// again once it is back.
	CodeShuttingDown = "shutting_down"
	// CodeUnsupportedProtocol: the client asked for a protocol version the
	// host does not speak.
	CodeUnsupportedProtocol = "unsupported_protocol"
	// CodeUnauthorized: no token, or a wrong one.
	CodeUnauthorized = "unauthorized"
	// CodeTokenRevoked: the token a connection signed in with was removed.
	CodeTokenRevoked = "token_revoked"
	// CodeTokenDowngraded: the token's role was lowered.
	CodeTokenDowngraded = "token_downgraded"
	// CodeBudget: the caller used up one of its budgets per hour
	// (runs_per_hour, sandbox_cpu_seconds_per_hour); the message says
	// which, the use and when it resets.
	CodeBudget = "budget"
	// CodeIdempotencyConflict: an idempotency key sent again with another
	// call (another tool, session or arguments).
	CodeIdempotencyConflict = "idempotency_conflict"
	// CodeInterrupted: the call of an idempotency key was running when the
	// host stopped (or, with a shared store, its host's lease ran out);
	// whether it acted is unknown.
	CodeInterrupted = "interrupted"
	// CodeInProgress: the call of an idempotency key is running on another
	// host sharing the store, which holds its lease; its message names that
	// host's id and address. Send the key again once it ended to get its
	// outcome.
	CodeInProgress = "in_progress"
	// CodeStoreUnavailable: the host's store ([store]'s PostgreSQL
	// database) can't be reached, so what needs it (budgets, idempotency
	// keys, sessions, the run ledger) was refused; nothing ran. Try again
	// shortly: the host picks the database up by itself once it is back.
	CodeStoreUnavailable = "store_unavailable"
	// CodeSessionUnavailable: the conversation (session) lives on another
	// host sharing the store, which is not running or can't be reached
	// now; the message names it. Its files come back with that host: try
	// again once it is back.
	CodeSessionUnavailable = "session_unavailable"

	// The model's codes: why the host's model ([model] in its config)
	// gave no answer. A run that asked it ends with the code unless its
	// kind says otherwise. No model configured is CodeUnsupported; a model
	// that took longer than [model] timeout_seconds is CodeTimeout.

	// CodeModelUnreachable: the model's server can't be reached (nothing
	// listens at base_url, the name does not resolve, TLS fails).
	CodeModelUnreachable = "model_unreachable"
	// CodeModelUnauthorized: the model's server refused the API key, or wants
	// one and none is configured (HTTP 401 or 403).
	CodeModelUnauthorized = "model_unauthorized"
	// CodeModelNotFound: the model's server does not serve the configured
	// model (HTTP 404).
	CodeModelNotFound = "model_not_found"
	// CodeModelRateLimited: the model's server is refusing calls for now
	// (HTTP 429), still after the one wait it asked for.
	CodeModelRateLimited = "model_rate_limited"
	// CodeModelFailed: the model's server failed (HTTP 5xx), refused the
	// request for another reason, or sent an error in its answer.
	CodeModelFailed = "model_failed"
	// CodeModelCutOff: the answer stopped midway: the stream ended without
	// the model saying it had finished.
	CodeModelCutOff = "model_cut_off"

	// The codes of approvals (docs/protocol.md, Approvals).

	// CodeApprovalRequired: (MCP) the call waits for a person to approve
	// it; it goes on once approved.
	CodeApprovalRequired = "approval_required"
	// CodeDeclined: the run ended because a person declined its approval.
	CodeDeclined = "declined"
	// CodeApprovalExpired: the run ended because nobody decided its
	// approval within [approvals] expire_minutes.
	CodeApprovalExpired = "approval_expired"
	// CodeSelfApproval: the token that started the run tried to decide its
	// approval, where [approvals] by is not "caller".
	CodeSelfApproval = "self_approval"
	// CodeAlreadyDecided: a second decision, or one after the approval
	// expired or its run was cancelled.
	CodeAlreadyDecided = "already_decided"

	// The codes of the HTTP endpoints' requests.

	// CodeBadRequest: a request body or query that is not what the
	// endpoint takes (not one JSON object, an unknown format).
	CodeBadRequest = "bad_request"
	// CodeUnsupportedMediaType: a body of a Content-Type the endpoint does
	// not read.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeBadName: an address that names no tool or session as a name
	// may (a path, a name of the wrong form).
	CodeBadName = "bad_name"
	// CodeBadMethod: an HTTP method the path does not serve.
	CodeBadMethod = "bad_method"
	// CodeNoOAuth: an OAuth authorization server's document was asked
	// for; toolhost takes bearer tokens only.
	CodeNoOAuth = "no_oauth"
	// CodeNotEditable: the tool is defined where the API does not write:
	// the main config, a symbolic link, a file holding another tool.
	CodeNotEditable = "not_editable"
	// CodeNoToolsDir: no tools_dir is configured, so there is nowhere to
	// write a tool.
	CodeNoToolsDir = "no_tools_dir"
)
