// Package sdk is what a tool-kind plugin imports: the Kind interface a kind
// implements (and the optional MetricsSource, Doctor, Closer and
// SessionKeeper), the event
// types it emits, its errors (package errcode's), and Serve to run it as a
// plugin process. sdktest tests a kind without building a binary.
//
// A kind is a separate process speaking plugin protocol v1 (sdk/proto/v1)
// over hashicorp/go-plugin's gRPC transport. The Go types here are the public
// surface; the generated protocol code is internal (sdk/internal/pluginv1),
// and the host's half of the protocol is package sdk/hostside.
package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// Kind is one tool kind (http, python, …). The host calls, in order:
// Describe once after the plugin starts, Configure with the kind's table of
// the host config, then Check for each tool of this kind it loads, and
// Invoke for every call. Check and Invoke may run concurrently.
type Kind interface {
	// Describe names the kind and gives the JSON Schema of its run table.
	Describe(ctx context.Context) (Info, error)
	// Configure receives the kind's config table (a JSON object, "{}" when
	// the config has none). Return FieldErrors for a bad value.
	Configure(ctx context.Context, config json.RawMessage) error
	// Check validates a tool of this kind and returns its run table
	// normalised (defaults filled in, "type" kept). Return FieldErrors with
	// paths such as "run.url" for what is wrong.
	Check(ctx context.Context, tool Tool) (json.RawMessage, error)
	// Invoke runs a tool once. What it prints goes out through emit as it
	// happens; the returned JSON is the result, and the parts given to
	// emit.Content go with it (images, audio, resources: see Content).
	// Return an *Error for a failure the user should read. ctx is
	// cancelled when the caller cancels the run.
	Invoke(ctx context.Context, call Call, emit Emit) (json.RawMessage, error)
}

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
	Kind        string // text, number, integer, bool, json or list
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
	// is set: SessionNetworkOff, SessionNetworkWeb or
	// SessionNetworkPackages ("" from an older host: off).
	SessionNetwork string
	// SessionProxy is the egress proxy's URL for SessionNetworkPackages,
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

// CatalogChecker is a Kind whose Check needs the other tools the host
// serves (a graph checks the tools its nodes call): the host then calls
// CheckWithCatalog instead of Check, with every tool loaded with this one
// (itself included; each with name, effect, params and source, and Run
// only {"type": kind}). Check is still called by hosts that send no
// catalog.
type CatalogChecker interface {
	CheckWithCatalog(ctx context.Context, tool Tool, catalog []Tool) (json.RawMessage, error)
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

// CallerLogLevels are the levels of a log line for the caller, least
// severe first: syslog's (RFC 5424), as MCP names them.
var CallerLogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// Content types: what a part of a result's Content is.
const (
	ContentText     = "text"
	ContentImage    = "image"
	ContentAudio    = "audio"
	ContentResource = "resource"
)

// MaxContentBytes bounds the content of one result: the bytes of its
// parts' text and data together. The SDK fails a run whose content is
// larger (errcode.TooLarge), and the host refuses such a result from any
// plugin.
const MaxContentBytes = 16 << 20

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

// CheckContent says what is wrong with a result's content, naming the
// part (from 1): an unknown type, a part missing what its type needs or
// carrying what it can't, or more than MaxContentBytes in all. The error
// is an *Error with code errcode.TooLarge or errcode.Failed.
func CheckContent(parts []Content) error {
	total := 0
	for i, c := range parts {
		n := i + 1
		total += len(c.Text) + len(c.Data)
		var wrong string
		switch c.Type {
		case ContentText:
			if len(c.Data) > 0 || c.MIMEType != "" || c.URI != "" {
				wrong = "a text part has text only"
			}
		case ContentImage, ContentAudio:
			switch {
			case len(c.Data) == 0:
				wrong = "an " + c.Type + " part needs its data (bytes)"
			case c.MIMEType == "":
				wrong = "an " + c.Type + " part needs its MIME type (\"" + c.Type + "/png\", say)"
			case c.Text != "" || c.URI != "":
				wrong = "an " + c.Type + " part has data and a MIME type only"
			}
		case ContentResource:
			switch {
			case c.URI == "":
				wrong = "a resource part needs its URI"
			case c.Text != "" && len(c.Data) > 0:
				wrong = "a resource part has text or data (a blob), not both"
			}
		default:
			wrong = fmt.Sprintf("its type is %q; a part is text, image, audio or resource", c.Type)
		}
		if wrong != "" {
			return Errorf(errcode.Failed, "part %d of the result's content is wrong: %s", n, wrong)
		}
	}
	if total > MaxContentBytes {
		return Errorf(errcode.TooLarge, "the result's content is %d bytes, over the %d MiB a result's content may be", total, MaxContentBytes>>20)
	}
	return nil
}

// Emit sends one event of a run to the host. It is safe to call from
// several goroutines; events sent after Invoke returned are dropped.
type Emit func(Event)

// Stdout emits a chunk of standard output.
func (e Emit) Stdout(p []byte) { e(Event{Stdout: append([]byte(nil), p...)}) }

// Stderr emits a chunk of standard error.
func (e Emit) Stderr(p []byte) { e(Event{Stderr: append([]byte(nil), p...)}) }

// Progress emits a progress report.
func (e Emit) Progress(fraction float64, message string) {
	e(Event{Progress: &Progress{Fraction: fraction, Message: message}})
}

// Log emits a line for the host's log.
func (e Emit) Log(level, message string) { e(Event{Log: &Log{Level: level, Message: message}}) }

// LogToCaller emits a log line for the run's caller, level one of
// CallerLogLevels.
func (e Emit) LogToCaller(level, message string) {
	e(Event{Log: &Log{Level: level, Message: message, ToCaller: true}})
}

// Content adds parts to the run's result: they go with the result, after
// any parts added before, and are dropped if the run fails.
func (e Emit) Content(parts ...Content) {
	if len(parts) > 0 {
		e(Event{Content: append([]Content(nil), parts...)})
	}
}

// StdoutWriter is an io.Writer whose writes are emitted as stdout.
func (e Emit) StdoutWriter() *EmitWriter { return &EmitWriter{emit: e} }

// StderrWriter is an io.Writer whose writes are emitted as stderr.
func (e Emit) StderrWriter() *EmitWriter { return &EmitWriter{emit: e, stderr: true} }

// EmitWriter turns writes into stdout or stderr events.
type EmitWriter struct {
	emit   Emit
	stderr bool
}

func (w *EmitWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if w.stderr {
		w.emit.Stderr(p)
	} else {
		w.emit.Stdout(p)
	}
	return len(p), nil
}
