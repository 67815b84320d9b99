package client

import "github.com/toolhost/toolhost/client/wire"

// The protocol's types and constants are declared once, in package wire
// (which the host imports too); these aliases keep client's API as it was,
// so a client names client.Event, client.TypeResult … as before.

// ProtocolVersion is the version of the protocol these types describe; the
// host says the version it speaks in its hello reply.
const ProtocolVersion = wire.ProtocolVersion

// Error is the error object of the protocol, {"code","message"} (package
// wire has the codes). A call refused before it ran, a run that ended
// with an error, and a connection the host closed all come back to a
// client as an *Error; errors.Is(err, &Error{Code: c}) matches any of
// code c.
type Error = wire.Error

// The protocol's frames and records: see package wire.
type (
	Message        = wire.Message
	Event          = wire.Event
	Content        = wire.Content
	ErrorFrame     = wire.ErrorFrame
	Behind         = wire.Behind
	Closing        = wire.Closing
	HelloReply     = wire.HelloReply
	Decided        = wire.Decided
	ToolsReply     = wire.ToolsReply
	ToolSpecs      = wire.ToolSpecs
	NotStrict      = wire.NotStrict
	OpenAITool     = wire.OpenAITool
	OpenAIFunction = wire.OpenAIFunction
	AnthropicTool  = wire.AnthropicTool
	MCPTool        = wire.MCPTool
	MCPAnnotations = wire.MCPAnnotations
	Pong           = wire.Pong
	Tool           = wire.Tool
	Function       = wire.Function
	RunRecord      = wire.RunRecord
	CallResult     = wire.CallResult
)

// Event types: every run's event has one of these.
const (
	TypeStarted          = wire.TypeStarted
	TypeStdout           = wire.TypeStdout
	TypeStderr           = wire.TypeStderr
	TypeProgress         = wire.TypeProgress
	TypeLog              = wire.TypeLog
	TypeDisplay          = wire.TypeDisplay
	TypeResult           = wire.TypeResult
	TypeError            = wire.TypeError
	TypeApprovalRequired = wire.TypeApprovalRequired
)

// Content types: what a part of a result's Content is.
const (
	ContentText     = wire.ContentText
	ContentImage    = wire.ContentImage
	ContentAudio    = wire.ContentAudio
	ContentResource = wire.ContentResource
)

// The formats of a tool list (list_tools' "format", GET /api/v1/tools'
// ?format=).
const (
	FormatToolhost  = wire.FormatToolhost
	FormatOpenAI    = wire.FormatOpenAI
	FormatAnthropic = wire.FormatAnthropic
	FormatMCP       = wire.FormatMCP
)
