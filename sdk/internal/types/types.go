// Package types holds the SDK's types that cross the plugin protocol, so
// that the one converter between them and the generated code
// (sdk/internal/convert) imports them without importing sdk: package sdk
// re-exports each as an alias (sdk.Tool is types.Tool), and its doc is
// here.
package types

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"time"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// Error is errcode's Error, as sdk.Error is.
type Error = errcode.Error

// Info describes a kind.
type Info struct {
	// Kind is the name tools use in run.type, e.g. "http".
	Kind string
	// Version is the kind's own version.
	Version string
	// RunSchema is the JSON Schema of the run table.
	RunSchema json.RawMessage
	// ConfigSchema is the JSON Schema of the kind's config table ([http],
	// [python], [kinds.NAME]); nil when it takes no settings. Mark a string
	// setting that is a file path with "format": "path": the host resolves
	// it against the config file's folder. Configure stays the validator;
	// see docs/plugins.md.
	ConfigSchema json.RawMessage
	// WantsCatalog says the kind's Check takes the other tools the host
	// serves. A kind does not set it: Serve says so for a kind that is a
	// CatalogChecker, and the host reads it from Describe.
	WantsCatalog bool
	// ServesSessions says the kind keeps conversation sandboxes. A kind
	// does not set it: Serve says so for a kind that is a SessionKeeper.
	ServesSessions bool
	// OutsideText says whether the kind's runs bring outside text (see
	// OutsideText). A kind whose tools read what others wrote (a web page,
	// an API's answer) sets OutsideTextAlways; the zero value says none.
	OutsideText OutsideText
	// OutsideTextWhen, for a kind whose tools differ, names a boolean
	// setting of the run table (a top-level key) that makes a tool's runs
	// bring outside text when true: a python tool with network = true
	// reads the web. Read when OutsideText is OutsideTextNone.
	OutsideTextWhen string
	// SandboxRuns says the kind's runs are code in sandboxes on the host's
	// machine: the seconds of its runs and checks count against a
	// principal's sandbox_cpu_seconds_per_hour.
	SandboxRuns bool
	// AdminWritesOnly says only admins may ever write or delete the kind's
	// tools (through the API or the web UI), whatever role may write
	// others: its tools are code that runs on the host's machine.
	AdminWritesOnly bool
	// OpenRunTable says the kind's run tables hold no secrets: every
	// signed-in role may read them (GET /api/v1/tools/{name}), as the web
	// UI draws a graph's wiring or a prompt's text. The zero value keeps a
	// run table (a header, a token, code) for admins.
	OpenRunTable bool
	// SessionTools are the tools a SessionKeeper serves in conversation
	// sandboxes (python's run_python, run_bash, sandbox_files,
	// sandbox_file). When [sessions] is on and the kind keeps the
	// sessions, the host serves each as a tool of its own; the host
	// reads them from no other kind.
	SessionTools []SessionTool
}

// SessionTool is a tool a kind serves in conversation sandboxes. The host
// serves it with the run table {"type": kind, "session": Session}, and
// runs each call in its caller's session.
type SessionTool struct {
	Name        string
	Description string
	// Effect is read or change.
	Effect string
	Params []Param
	// Session is the run table's "session" value: what the tool does in
	// the sandbox (python's "python", "bash", "files", "file").
	Session string
}

// OutsideText says whether a kind's runs bring outside text to the
// conversation: text written by someone other than the caller and the
// host's operator, which may hold instructions aimed at the model. The
// host taints the conversation of such a run, whether it succeeded or
// failed (an error carries the server's words too), and a tainted
// conversation's change calls ask a person first.
type OutsideText int

const (
	// OutsideTextNone: no run of the kind brings outside text of its own.
	// A run in a session whose sandbox reaches the network is outside text
	// all the same: the host knows the session's network.
	OutsideTextNone OutsideText = iota
	// OutsideTextAlways: every run of the kind brings outside text (http).
	OutsideTextAlways
	// OutsideTextUnsaid is what the host reads from a plugin built before
	// kinds said; the host takes every run of such a kind as outside text,
	// as it can't tell what its tools read. A kind never sets it.
	OutsideTextUnsaid
)

// Tool is a tool as the host loaded it.
type Tool struct {
	Name        string
	Description string
	Effect      string
	Params      []Param
	// Run is the tool's run table as a JSON object, "type" included.
	Run json.RawMessage
	// Source says where the tool was written, e.g. "tools/get.toml:1".
	Source string
}

// Param is one of a tool's parameters.
type Param struct {
	Name        string
	Type        string // its value's type (`kind` on the wire): text, number, integer, bool, json or list
	Required    bool
	Options     []string
	Description string
}

// Call is one run of a tool.
type Call struct {
	Tool Tool
	// Args are the arguments as a JSON object, already checked by the host
	// against the tool's params.
	Args json.RawMessage
	// RunID is the id the host gave this run.
	RunID string
	// Principal names who asked, for logs.
	Principal string
	// Session is the conversation the call belongs to, if any: for a
	// SessionKeeper, the backend id of the session whose sandbox runs it.
	Session string
	// SessionNetwork is the network of the session's sandbox when Session
	// is set: one of config.SessionNetworks, "off", "web" or "packages"
	// ("" from an older host: off).
	SessionNetwork string
	// SessionProxy is the egress proxy's URL for network "packages",
	// with the session's own credentials (http://USER:PASS@ADDR).
	SessionProxy string
	// Host reaches back into the host (nested tool calls). It is never nil;
	// when the host serves nothing its methods return an error.
	Host Host
}

// Host is what a kind may ask of the host during a call.
type Host interface {
	// CallTool calls another tool with the rights of the calling run: the
	// host checks its arguments, the caller's role and limits as for a call
	// from a client. The nested run's output reaches req.OnEvent as it is
	// printed. A call the host refused, or a nested run that failed, is a
	// ToolResult with Error set; the error returned is the transport's.
	CallTool(ctx context.Context, req ToolCall) (ToolResult, error)
	// AskModel asks the host's model ([model] in its config). The answer
	// reaches req.OnText as it is written, and the whole is returned. A
	// model that can't answer is an *Error (codes model_unreachable,
	// model_unauthorized, model_not_found, model_rate_limited,
	// model_failed, model_cut_off, timeout, unsupported).
	AskModel(ctx context.Context, req ModelRequest) (ModelAnswer, error)
}

// ToolCall is a nested call of a tool.
type ToolCall struct {
	// ParentRunID is the RunID of the run that makes the call: a run this
	// plugin is executing. The host refuses any other (unknown_run).
	ParentRunID string
	Tool        string
	// Args is a JSON object; nil is {}.
	Args json.RawMessage
	// OnEvent, when set, receives the nested run's stdout, stderr and
	// progress as they happen, from one goroutine at a time.
	OnEvent func(Event)
}

// ToolResult is the outcome of a nested tool call: a result, or an error.
type ToolResult struct {
	Result json.RawMessage
	// Content is what the nested run returned beyond its JSON value (a
	// host of protocol 2 or older sends none).
	Content []Content
	// Printed is what the nested run wrote to stdout.
	Printed string
	Error   *Error
}

// ModelRequest is a question for the host's model.
type ModelRequest struct {
	// ParentRunID is the RunID of the run that asks: a run this plugin is
	// executing. The host refuses any other (unknown_run).
	ParentRunID    string
	System, Prompt string
	// JSON asks for a JSON object as the answer.
	JSON bool
	// MaxTokens caps the answer; 0 takes the host's [model] max_tokens.
	MaxTokens int
	// OnText, when set, receives each piece of the answer as it is
	// written, from one goroutine at a time.
	OnText func(string)
}

// ModelAnswer is the model's whole answer.
type ModelAnswer struct {
	Text string
	// Model is the model that answered.
	Model                     string
	InputTokens, OutputTokens int
}

// FieldError is one problem with a tool or a config table, at a field.
type FieldError struct {
	// Path is the field as a dotted path, e.g. "run.url".
	Path    string
	Message string
}

// FieldErrors is the list Check and Configure return for bad input.
type FieldErrors []FieldError

func (fe FieldErrors) Error() string {
	lines := make([]string, len(fe))
	for i, e := range fe {
		if e.Path == "" {
			lines[i] = e.Message
		} else {
			lines[i] = e.Path + ": " + e.Message
		}
	}
	return strings.Join(lines, "\n")
}

// Event is one thing a run emits before its result. Exactly one field is
// set.
type Event struct {
	Stdout   []byte
	Stderr   []byte
	Progress *Progress
	Log      *Log
	// Content is a part of the run's result, not an event of its own: the
	// SDK sends every part emitted with the result, in the order emitted,
	// and drops them when the run fails. On the host's side (a nested
	// call's OnEvent, the host's Invoke) the result's parts come as one
	// such Event just before the result.
	Content []Content
	// Display is a part the run shows as it runs (a figure, an image), in
	// order with its output, as a notebook shows one. The SDK sends it as
	// it comes and puts it in the result's content as well (after the
	// parts emitted before it), so a caller that reads only the result
	// loses nothing.
	Display *Content
	// Node is the part of the run that Stdout or Stderr comes from: a
	// graph's node id; "" for the run itself. (A Progress has its own.)
	Node string
}

// Progress reports how far a run has got.
type Progress struct {
	// Fraction is from 0 to 1, or negative when unknown.
	Fraction float64
	Message  string
	// Node is the part of the run the progress is about: a composite
	// run's (a graph's) node id; "" for the run itself. Added in protocol
	// 2: a host of protocol 1 does not see it, so say the node in Message
	// too.
	Node string
}

// Log is a line for the host's log, not for the user, unless ToCaller.
type Log struct {
	// Level is trace, debug, info, warn or error; for a line ToCaller one
	// of CallerLogLevels.
	Level   string
	Message string
	// ToCaller makes the line the caller's: the host makes it a log event
	// of the run (an MCP client's notifications/message). Added in
	// protocol 3: a host of protocol 2 or older puts it in its own log.
	ToCaller bool
}

// Content is one part of what a run returns beyond its JSON value (MCP's
// content): a text part has Text; an image or an audio clip Data and
// MIMEType; a resource URI, MIMEType (optional) and either Text or Data
// (a blob).
type Content struct {
	Type     string // ContentText, ContentImage, ContentAudio or ContentResource
	Text     string
	Data     []byte
	MIMEType string
	URI      string
}

// DoctorCheck is one line of `toolhost doctor`: what was checked, whether
// it holds, what was found, and how to fix it when it doesn't.
type DoctorCheck struct {
	Name   string
	OK     bool
	Detail string
	Fix    string
}

// DoctorReport is what a kind's Doctor found.
type DoctorReport struct {
	Checks []DoctorCheck
	// Summary says what passing checks mean ("this machine can run python
	// tools in gVisor sandboxes"); the host has its own when empty.
	Summary string
}

// Metric is one gauge or counter a kind reports; the host serves it on
// /metrics as toolhost_kind_<Name>{kind="<kind>", Labels...}.
type Metric struct {
	// Name is snake_case, without a prefix.
	Name string
	Help string
	// Type is "gauge" or "counter".
	Type   string
	Value  float64
	Labels map[string]string
}

// SessionsConfig is the host's [sessions] table as a SessionKeeper needs it.
// Zero takes the kind's default.
type SessionsConfig struct {
	// DiskMB is the size of each session's workspace.
	DiskMB int
	// MemoryMB is the memory of each session's sandbox.
	MemoryMB int
	// Pids caps the tasks of each session's sandbox.
	Pids int
	// IdleMinutes: a sandbox unused this long is stopped, its files kept.
	IdleMinutes int
	// Seconds is the most a run in a session may take on the clock.
	Seconds int
	// ProxyAddr is the host's egress proxy, the one address a sandbox of
	// network "packages" may reach; the zero AddrPort when there is none.
	ProxyAddr netip.AddrPort
}

// SessionFile is one file or folder of a session's workspace.
type SessionFile struct {
	// Path is relative to the workspace, with "/" between folders.
	Path    string
	Size    int64
	ModTime time.Time
	Dir     bool
}
