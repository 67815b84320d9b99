// Package wire is the contract of toolhost's client protocol
// (docs/protocol.md), and only that: the frames a client and the host send
// on the websocket and the names of their types, a run's events, the
// records of the HTTP endpoints, the error object and every error code the
// host sends. It is the one declaration of each; the host encodes these
// types, package client decodes them, and package errcode (the SDK's
// error helpers) uses the same Error and codes.
//
// It imports nothing but the standard library, so that everyone can
// import it and it can import no one: a guard test keeps it so.
package wire

import (
	"encoding/json"
	"time"
)

// ProtocolVersion is the version of the protocol these types describe; the
// host says the version it speaks in its hello reply.
const ProtocolVersion = 1

// The types of the frames a client sends: a Message's Type.
const (
	TypeHello     = "hello"
	TypeListTools = "list_tools"
	TypeCall      = "call"
	TypeCancel    = "cancel"
	TypeAttach    = "attach"
	TypePing      = "ping"
	TypeApprove   = "approve"
)

// The types of the frames the host sends that are not a run's events
// (hello, the reply, shares its type with the client's; an ErrorFrame's
// is TypeError, as a run's terminal error).
const (
	TypeTools   = "tools"
	TypeBehind  = "behind"
	TypePong    = "pong"
	TypeClosing = "closing"
	TypeDecided = "decided"
)

// The decisions of an approve frame (Message.Decision).
const (
	DecisionApprove = "approve"
	DecisionDecline = "decline"
)

// The ends of an approval that no person decided (the approval's decision in
// GET /api/v1/approvals and the decided frame): it ran out of time, or its
// run was cancelled.
const (
	DecisionExpired   = "expired"
	DecisionCancelled = "cancelled"
)

// Message is every field a frame a client sends may carry (hello,
// list_tools, call, cancel, attach, ping); which are needed depends on
// Type. The host decodes client frames into it, refusing unknown fields.
type Message struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	// call
	Tool           string          `json:"tool,omitempty"`
	Args           json.RawMessage `json:"args,omitempty"`
	Session        string          `json:"session,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	// cancel, attach
	Run string `json:"run,omitempty"`
	// AfterSeq is attach's last seq the client has; nil (or -1) for all.
	AfterSeq *int64 `json:"after_seq,omitempty"`
	// approve: the approval (from approval_required) and the decision,
	// "approve" or "decline".
	Approval string `json:"approval,omitempty"`
	Decision string `json:"decision,omitempty"`
	// list_tools: the format of the specs (FormatToolhost when "") and,
	// with FormatOpenAI, whether in OpenAI's strict mode.
	Format string `json:"format,omitempty"`
	Strict bool   `json:"strict,omitempty"`
	// hello
	Client   string `json:"client,omitempty"`
	Token    string `json:"token,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
}

// Event types: every run's event has one of these.
const (
	TypeStarted  = "started"
	TypeStdout   = "stdout"
	TypeStderr   = "stderr"
	TypeProgress = "progress"
	TypeLog      = "log"
	// TypeDisplay: a part the run shows as it runs (a figure, an image), in
	// order with its stdout and stderr; see Event.Content. The same part is
	// in the result's content too.
	TypeDisplay = "display"
	TypeResult  = "result"
	TypeError   = "error"
	// TypeApprovalRequired: the run (or a call nested in it) waits for a
	// person to approve a change; see Event.Approval.
	TypeApprovalRequired = "approval_required"
)

// Event is one event of a run: started, stdout, stderr, display, progress,
// log, then one terminal result or error. Every event carries its run and seq
// (0 for started, then 1, 2, … with no gaps); on the websocket it also
// carries the id of the call or attach it answers.
type Event struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	Run  string `json:"run"`
	Seq  uint64 `json:"seq"`
	// Tool is set on started.
	Tool string `json:"tool,omitempty"`
	// Data is set on stdout and stderr: text as printed, valid UTF-8.
	Data string `json:"data,omitempty"`
	// Node, on stdout and stderr, names the part of the run that printed
	// Data: a graph's node id (its nested calls and model answers); unset
	// for the run itself. On progress it names the node the progress is
	// about (a graph's "node done"), when the kind's plugin says it
	// (plugin protocol 2 and later).
	Node string `json:"node,omitempty"`
	// Fraction and Message are set on progress (Message, Level on log).
	Fraction *float64 `json:"fraction,omitempty"`
	Message  string   `json:"message,omitempty"`
	Level    string   `json:"level,omitempty"`
	// Result is set on result: any JSON value.
	Result json.RawMessage `json:"result,omitempty"`
	// Content, on result, is what the run returned beyond its JSON value:
	// text, images, audio and resources, in order (MCP's content). Unset
	// when the run returned a value only. On display it is the one part
	// shown (an image, most often), which the result's Content has too.
	Content []Content `json:"content,omitempty"`
	// Error is set on error.
	Error *Error `json:"error,omitempty"`
	// Approval, Args and Why are set on approval_required: the approval's
	// id (decide it with approve, or POST /api/v1/approvals/{id}), the
	// exact arguments of the call waiting, and why it asks. Tool names
	// the tool waiting, which is a nested call's when it differs from
	// the run's.
	Approval string          `json:"approval,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Why      string          `json:"why,omitempty"`
}

// Content types: what a part of a result's Content is.
const (
	ContentText     = "text"
	ContentImage    = "image"
	ContentAudio    = "audio"
	ContentResource = "resource"
)

// Content is one part of what a run returned beyond its JSON value. A text
// part has Text; an image or audio part Data and MIMEType; a resource part
// URI, MIMEType and either Text or Data (a blob).
type Content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     []byte `json:"data,omitempty"` // base64 in JSON
	MIMEType string `json:"mime_type,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// Terminal says whether the event ends its run.
func (e Event) Terminal() bool { return e.Type == TypeResult || e.Type == TypeError }

// ErrorFrame is the host's reply to a frame it can't act on, or to a call
// refused before it ran: an error with no seq (a run's terminal error is
// an Event).
type ErrorFrame struct {
	Type  string `json:"type"` // "error"
	ID    string `json:"id,omitempty"`
	Run   string `json:"run,omitempty"`
	Error Error  `json:"error"`
}

// Behind says the host stopped sending a run's events to this connection
// because the client read too slowly; every event up to LastSeq (-1 for
// none) came before it. Attach after the last seq you have to go on.
type Behind struct {
	Type    string `json:"type"` // "behind"
	ID      string `json:"id,omitempty"`
	Run     string `json:"run"`
	LastSeq int64  `json:"last_seq"`
}

// Closing says why the host closes the connection; the close frame follows.
type Closing struct {
	Type  string `json:"type"` // "closing"
	Error Error  `json:"error"`
}

// HelloReply is the host's answer to hello.
type HelloReply struct {
	Type         string `json:"type"` // "hello"
	ID           string `json:"id"`
	Protocol     int    `json:"protocol"`
	Server       string `json:"server"`
	Version      string `json:"version"`
	AuthRequired bool   `json:"auth_required"`
	// Principal and Role say who the connection is signed in as ("" when
	// it is not yet).
	Principal string `json:"principal"`
	Role      string `json:"role"`
}

// Decided is the host's answer to approve: the decision was taken.
type Decided struct {
	Type     string `json:"type"` // "decided"
	ID       string `json:"id,omitempty"`
	Approval string `json:"approval"`
	Run      string `json:"run"`
	Decision string `json:"decision"`
}

// ToolsReply is the host's answer to list_tools in the default format.
type ToolsReply struct {
	Type  string `json:"type"` // "tools"
	ID    string `json:"id"`
	Tools []Tool `json:"tools"`
}

// The formats of a tool list (list_tools' "format", GET /api/v1/tools'
// ?format=).
const (
	// FormatToolhost is the default: Tool, a function spec with Effect and
	// Kind.
	FormatToolhost = "toolhost"
	// FormatOpenAI is OpenAITool: OpenAI's function tool, to hand to its
	// Chat Completions API as it is.
	FormatOpenAI = "openai"
	// FormatAnthropic is AnthropicTool: Anthropic's tool, to hand to its
	// Messages API as it is.
	FormatAnthropic = "anthropic"
	// FormatMCP is MCPTool: MCP's Tool, as tools/list gives it.
	FormatMCP = "mcp"
)

// ToolSpecs is a tool list in a format: the host's answer to list_tools
// (as a "tools" frame) or to GET /api/v1/tools. Each of Tools is one tool
// in the format asked for, to be handed over untouched.
type ToolSpecs struct {
	Type   string            `json:"type,omitempty"` // "tools" on the websocket
	ID     string            `json:"id,omitempty"`
	Format string            `json:"format"`
	Strict bool              `json:"strict,omitempty"`
	Tools  []json.RawMessage `json:"tools"`
	// NotStrict, with Strict, lists the tools strict mode can't describe:
	// they are in Tools with "strict": false.
	NotStrict []NotStrict `json:"not_strict,omitempty"`
}

// NotStrict names a tool given without strict mode, and says why.
type NotStrict struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// OpenAITool is a tool as OpenAI's Chat Completions API takes a function
// tool: {"type":"function","function":{name, description, parameters,
// strict}}.
type OpenAITool struct {
	Type     string         `json:"type"` // "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool. Strict is set when
// strict mode was asked for: true when the tool is in its form, false
// when strict mode can't describe it.
type OpenAIFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	Strict      *bool          `json:"strict,omitempty"`
}

// AnthropicTool is a tool as Anthropic's Messages API takes it.
type AnthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// MCPTool is a tool as MCP's tools/list gives it.
type MCPTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema map[string]any  `json:"inputSchema"`
	Annotations *MCPAnnotations `json:"annotations,omitempty"`
}

// MCPAnnotations are the hints of an MCPTool: a read tool is read-only, a
// change tool destructive.
type MCPAnnotations struct {
	ReadOnlyHint    bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
}

// Pong is the host's answer to ping.
type Pong struct {
	Type string `json:"type"` // "pong"
	ID   string `json:"id"`
}

// Tool is a tool as a function spec in the shape models take for
// function calling, with toolhost's Effect and Kind.
type Tool struct {
	Type     string   `json:"type"` // "function"
	Function Function `json:"function"`
	// Effect is read or change (a toolhost extension to the shape).
	Effect string `json:"effect"`
	// Kind is the tool's kind (a toolhost extension to the shape).
	Kind string `json:"kind"`
}

// Function is the function part of a Tool: its parameters are a JSON
// Schema object.
type Function struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// RunRecord is a run's record and output, as GET /api/v1/runs/{id} gives
// it.
type RunRecord struct {
	Run            string    `json:"run"`
	Tool           string    `json:"tool"`
	Principal      string    `json:"principal"`
	Session        string    `json:"session"`
	IdempotencyKey string    `json:"idempotency_key"`
	Started        time.Time `json:"started"`
	// Ended is zero while the run runs.
	Ended   time.Time `json:"ended,omitzero"`
	Done    bool      `json:"done"`
	Stdout  string    `json:"stdout"`
	Stderr  string    `json:"stderr"`
	LastSeq int64     `json:"last_seq"`
	// Result or Error is set once the run has ended.
	Result  json.RawMessage `json:"result,omitempty"`
	Content []Content       `json:"content,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	// Events are the run's events, unless asked without them.
	Events []Event `json:"events,omitempty"`
}

// CallResult is the answer of POST /api/v1/tools/{name}/call: the run's
// result or its error, and what it printed.
type CallResult struct {
	Run     string          `json:"run"`
	Result  json.RawMessage `json:"result,omitempty"`
	Content []Content       `json:"content,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	// Printed is the run's stdout, with surrounding white space trimmed.
	Printed string `json:"printed"`
	Stderr  string `json:"stderr,omitempty"`
}
