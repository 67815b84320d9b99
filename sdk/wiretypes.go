package sdk

import "github.com/toolhost/toolhost/sdk/internal/types"

// The types that cross the plugin protocol are declared in
// sdk/internal/types, where the one converter between them and the
// protocol (sdk/internal/convert) reads them without importing sdk, the
// way terraform-plugin-go keeps tfprotov5 apart from its toproto and
// fromproto. They are the same types as these aliases, documented there.

// Info describes a kind.
type Info = types.Info

// OutsideText says whether a kind's runs bring outside text to the
// conversation (see types.OutsideText).
type OutsideText = types.OutsideText

// A kind's word on outside text (see types.OutsideText).
const (
	OutsideTextNone   = types.OutsideTextNone
	OutsideTextAlways = types.OutsideTextAlways
	OutsideTextUnsaid = types.OutsideTextUnsaid
)

// Tool is a tool as the host loaded it.
type Tool = types.Tool

// Param is one of a tool's parameters.
type Param = types.Param

// SessionTool is a tool a kind serves in conversation sandboxes.
type SessionTool = types.SessionTool

// Call is one run of a tool.
type Call = types.Call

// Host is what a kind may ask of the host during a call.
type Host = types.Host

// ToolCall is a nested call of a tool.
type ToolCall = types.ToolCall

// ToolResult is the outcome of a nested tool call: a result, or an error.
type ToolResult = types.ToolResult

// ModelRequest is a question for the host's model.
type ModelRequest = types.ModelRequest

// ModelAnswer is the model's whole answer.
type ModelAnswer = types.ModelAnswer

// FieldError is one problem with a tool or a config table, at a field.
type FieldError = types.FieldError

// FieldErrors is the list Check and Configure return for bad input.
type FieldErrors = types.FieldErrors

// Event is one thing a run emits before its result. Exactly one field is
// set.
type Event = types.Event

// Progress reports how far a run has got.
type Progress = types.Progress

// Log is a line for the host's log, not for the user, unless ToCaller.
type Log = types.Log

// Content is one part of what a run returns beyond its JSON value (MCP's
// content).
type Content = types.Content

// DoctorCheck is one line of `toolhost doctor`.
type DoctorCheck = types.DoctorCheck

// DoctorReport is what a kind's Doctor found.
type DoctorReport = types.DoctorReport

// Metric is one gauge or counter a kind reports.
type Metric = types.Metric

// SessionsConfig is the host's [sessions] table as a SessionKeeper needs it.
type SessionsConfig = types.SessionsConfig

// SessionFile is one file or folder of a session's workspace.
type SessionFile = types.SessionFile
