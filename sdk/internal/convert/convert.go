// Package convert is the one converter between the SDK's types
// (sdk/internal/types, which package sdk re-exports) and the plugin
// protocol's generated ones (sdk/internal/pluginv1). Both halves of the
// protocol use it: the plugin's in package sdk and the host's in
// sdk/hostside, so what one side writes the other reads back field for
// field.
//
// As in terraform-plugin-go's toproto and fromproto, there is one function
// per message and direction: ToProtoX makes the message from the SDK's
// value, XFromProto the SDK's value from the message. A nil message reads
// as the zero value. What the protocol can't carry is said at each
// function (a file's time in milliseconds, a count above 2^32-1); what a
// side adds of its own (the protocol versions, a run's sequence numbers,
// the default of an empty argument object) stays with that side.
//
// Errors cross as pluginv1.FromError and (*pluginv1.Error).ToError, which
// sit beside the generated code.
package convert

import (
	"encoding/json"
	"net/netip"
	"time"

	"github.com/toolhost/toolhost/sdk/errcode"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
	"github.com/toolhost/toolhost/sdk/internal/types"
)

// ToProtoDescribeResponse is a kind's Info, with the protocol versions
// its plugin speaks. An empty RunSchema goes as "{}".
func ToProtoDescribeResponse(info types.Info, versions []uint32) *pluginv1.DescribeResponse {
	schema := string(info.RunSchema)
	if schema == "" {
		schema = "{}"
	}
	return &pluginv1.DescribeResponse{
		Kind: info.Kind, Version: info.Version, RunSchema: schema,
		ConfigSchema:     string(info.ConfigSchema),
		ProtocolVersions: versions,
		WantsCatalog:     info.WantsCatalog,
		ServesSessions:   info.ServesSessions,
		OutsideText:      ToProtoOutsideText(info.OutsideText),
		OutsideTextWhen:  info.OutsideTextWhen,
		SandboxRuns:      info.SandboxRuns,
		AdminWritesOnly:  info.AdminWritesOnly,
		OpenRunTable:     info.OpenRunTable,
		SessionTools:     ToProtoSessionTools(info.SessionTools),
	}
}

// InfoFromProto is the Info a plugin described, and the protocol versions
// it speaks. No config schema is nil.
func InfoFromProto(r *pluginv1.DescribeResponse) (types.Info, []uint32) {
	info := types.Info{
		Kind: r.GetKind(), Version: r.GetVersion(), RunSchema: json.RawMessage(r.GetRunSchema()),
		WantsCatalog: r.GetWantsCatalog(), ServesSessions: r.GetServesSessions(),
		OutsideText: OutsideTextFromProto(r.GetOutsideText()), OutsideTextWhen: r.GetOutsideTextWhen(),
		SandboxRuns: r.GetSandboxRuns(), AdminWritesOnly: r.GetAdminWritesOnly(), OpenRunTable: r.GetOpenRunTable(),
		SessionTools: SessionToolsFromProto(r.GetSessionTools()),
	}
	if s := r.GetConfigSchema(); s != "" {
		info.ConfigSchema = json.RawMessage(s)
	}
	return info, r.GetProtocolVersions()
}

// ToProtoOutsideText is a kind's word on outside text. OutsideTextUnsaid,
// which a kind never sets, goes as unspecified, as from a plugin built
// before kinds said.
func ToProtoOutsideText(o types.OutsideText) pluginv1.OutsideText {
	switch o {
	case types.OutsideTextNone:
		return pluginv1.OutsideText_OUTSIDE_TEXT_NONE
	case types.OutsideTextAlways:
		return pluginv1.OutsideText_OUTSIDE_TEXT_ALWAYS
	}
	return pluginv1.OutsideText_OUTSIDE_TEXT_UNSPECIFIED
}

// OutsideTextFromProto is a kind's word on outside text; a plugin built
// before kinds said sends none, which is OutsideTextUnsaid.
func OutsideTextFromProto(o pluginv1.OutsideText) types.OutsideText {
	switch o {
	case pluginv1.OutsideText_OUTSIDE_TEXT_NONE:
		return types.OutsideTextNone
	case pluginv1.OutsideText_OUTSIDE_TEXT_ALWAYS:
		return types.OutsideTextAlways
	}
	return types.OutsideTextUnsaid
}

// ToProtoTool is a tool as the host sends it to its kind.
func ToProtoTool(t types.Tool) *pluginv1.Tool {
	params := make([]*pluginv1.Param, len(t.Params))
	for i, p := range t.Params {
		params[i] = ToProtoParam(p)
	}
	return &pluginv1.Tool{
		Name: t.Name, Description: t.Description, Effect: t.Effect,
		Params: params, RunJson: string(t.Run), Source: t.Source,
	}
}

// ToolFromProto is a tool as the kind reads it. Its Params is never nil
// for a tool that was sent, as kinds have always had it.
func ToolFromProto(t *pluginv1.Tool) types.Tool {
	if t == nil {
		return types.Tool{}
	}
	params := make([]types.Param, len(t.GetParams()))
	for i, p := range t.GetParams() {
		params[i] = ParamFromProto(p)
	}
	return types.Tool{
		Name: t.GetName(), Description: t.GetDescription(), Effect: t.GetEffect(),
		Params: params, Run: json.RawMessage(t.GetRunJson()), Source: t.GetSource(),
	}
}

// ToProtoTools is a catalog of tools; none is nil.
func ToProtoTools(ts []types.Tool) []*pluginv1.Tool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*pluginv1.Tool, len(ts))
	for i, t := range ts {
		out[i] = ToProtoTool(t)
	}
	return out
}

// ToolsFromProto is a catalog of tools; none is nil.
func ToolsFromProto(ts []*pluginv1.Tool) []types.Tool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]types.Tool, len(ts))
	for i, t := range ts {
		out[i] = ToolFromProto(t)
	}
	return out
}

// ToProtoSessionTools are the tools a kind serves in conversation
// sandboxes; none is nil.
func ToProtoSessionTools(ts []types.SessionTool) []*pluginv1.SessionTool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*pluginv1.SessionTool, len(ts))
	for i, t := range ts {
		params := make([]*pluginv1.Param, len(t.Params))
		for j, p := range t.Params {
			params[j] = ToProtoParam(p)
		}
		out[i] = &pluginv1.SessionTool{Name: t.Name, Description: t.Description, Effect: t.Effect, Params: params, Session: t.Session}
	}
	return out
}

// SessionToolsFromProto are the tools a kind serves in conversation
// sandboxes; none is nil, and so is a tool's no params.
func SessionToolsFromProto(ts []*pluginv1.SessionTool) []types.SessionTool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]types.SessionTool, len(ts))
	for i, t := range ts {
		var params []types.Param
		for _, p := range t.GetParams() {
			params = append(params, ParamFromProto(p))
		}
		out[i] = types.SessionTool{Name: t.GetName(), Description: t.GetDescription(), Effect: t.GetEffect(), Params: params, Session: t.GetSession()}
	}
	return out
}

// ToProtoParam is one of a tool's parameters.
func ToProtoParam(p types.Param) *pluginv1.Param {
	return &pluginv1.Param{Name: p.Name, Kind: p.Type, Required: p.Required, Options: p.Options, Description: p.Description}
}

// ParamFromProto is one of a tool's parameters.
func ParamFromProto(p *pluginv1.Param) types.Param {
	return types.Param{Name: p.GetName(), Type: p.GetKind(), Required: p.GetRequired(), Options: p.GetOptions(), Description: p.GetDescription()}
}

// ToProtoFieldErrors is what Check or Configure found wrong.
func ToProtoFieldErrors(fe types.FieldErrors) []*pluginv1.FieldError {
	out := make([]*pluginv1.FieldError, len(fe))
	for i, e := range fe {
		out[i] = &pluginv1.FieldError{Path: e.Path, Message: e.Message}
	}
	return out
}

// FieldErrorsFromProto is what Check or Configure found wrong; nil for
// nothing.
func FieldErrorsFromProto(pe []*pluginv1.FieldError) types.FieldErrors {
	if len(pe) == 0 {
		return nil
	}
	out := make(types.FieldErrors, len(pe))
	for i, e := range pe {
		out[i] = types.FieldError{Path: e.GetPath(), Message: e.GetMessage()}
	}
	return out
}

// ToProtoInvokeRequest is a run as the host asks its kind for it, with
// the broker id of the host's HostService. Call.Host does not cross.
func ToProtoInvokeRequest(c types.Call, hostServiceID uint32) *pluginv1.InvokeRequest {
	return &pluginv1.InvokeRequest{
		Tool:     ToProtoTool(c.Tool),
		ArgsJson: string(c.Args),
		Call: &pluginv1.Call{
			RunId: c.RunID, Principal: c.Principal, Session: c.Session,
			HostServiceId:  hostServiceID,
			SessionNetwork: c.SessionNetwork, SessionProxy: c.SessionProxy,
		},
	}
}

// CallFromProto is a run as the kind reads it, and the broker id of the
// host's HostService; the plugin sets Call.Host.
func CallFromProto(r *pluginv1.InvokeRequest) (types.Call, uint32) {
	pc := r.GetCall()
	return types.Call{
		Tool:           ToolFromProto(r.GetTool()),
		Args:           json.RawMessage(r.GetArgsJson()),
		RunID:          pc.GetRunId(),
		Principal:      pc.GetPrincipal(),
		Session:        pc.GetSession(),
		SessionNetwork: pc.GetSessionNetwork(),
		SessionProxy:   pc.GetSessionProxy(),
	}, pc.GetHostServiceId()
}

// ToProtoEvent is a run's event as it streams, without its sequence
// number (the sender counts). An event with none of Stdout, Stderr,
// Progress and Log set (a result's Content, which goes with the Result)
// is nil.
func ToProtoEvent(e types.Event) *pluginv1.Event {
	switch {
	case e.Stdout != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stdout{Stdout: &pluginv1.Output{Data: e.Stdout, Node: e.Node}}}
	case e.Stderr != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stderr{Stderr: &pluginv1.Output{Data: e.Stderr, Node: e.Node}}}
	case e.Progress != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Progress{Progress: &pluginv1.Progress{Fraction: e.Progress.Fraction, Message: e.Progress.Message, Node: e.Progress.Node}}}
	case e.Log != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Log{Log: &pluginv1.Log{Level: e.Log.Level, Message: e.Log.Message, ToCaller: e.Log.ToCaller}}}
	case e.Display != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Display{Display: ToProtoContent(*e.Display)}}
	}
	return nil
}

// EventFromProto is a streamed event as the SDK's Event, and true; false
// for the terminal ones (a Result or an Error), which the reader takes
// apart itself, and for a kind of event this SDK doesn't know.
func EventFromProto(pe *pluginv1.Event) (types.Event, bool) {
	switch k := pe.GetKind().(type) {
	case *pluginv1.Event_Stdout:
		return types.Event{Stdout: k.Stdout.GetData(), Node: k.Stdout.GetNode()}, true
	case *pluginv1.Event_Stderr:
		return types.Event{Stderr: k.Stderr.GetData(), Node: k.Stderr.GetNode()}, true
	case *pluginv1.Event_Progress:
		return types.Event{Progress: &types.Progress{Fraction: k.Progress.GetFraction(), Message: k.Progress.GetMessage(), Node: k.Progress.GetNode()}}, true
	case *pluginv1.Event_Log:
		return types.Event{Log: &types.Log{Level: k.Log.GetLevel(), Message: k.Log.GetMessage(), ToCaller: k.Log.GetToCaller()}}, true
	case *pluginv1.Event_Display:
		part := ContentFromProto(k.Display)
		return types.Event{Display: &part}, true
	}
	return types.Event{}, false
}

// ToProtoResult is a run's result: its JSON value and its content.
func ToProtoResult(value json.RawMessage, parts []types.Content) *pluginv1.Result {
	return &pluginv1.Result{Json: string(value), Content: ToProtoContents(parts)}
}

// ResultFromProto is a run's result: its JSON value and its content (nil
// for none).
func ResultFromProto(r *pluginv1.Result) (json.RawMessage, []types.Content) {
	return json.RawMessage(r.GetJson()), ContentsFromProto(r.GetContent())
}

// ToProtoContents is a result's content; no parts is nil.
func ToProtoContents(parts []types.Content) []*pluginv1.Content {
	if len(parts) == 0 {
		return nil
	}
	out := make([]*pluginv1.Content, len(parts))
	for i, c := range parts {
		out[i] = ToProtoContent(c)
	}
	return out
}

// ContentsFromProto is a result's content; no parts is nil.
func ContentsFromProto(pc []*pluginv1.Content) []types.Content {
	if len(pc) == 0 {
		return nil
	}
	out := make([]types.Content, len(pc))
	for i, c := range pc {
		out[i] = ContentFromProto(c)
	}
	return out
}

// ToProtoContent is one part of a result's content.
func ToProtoContent(c types.Content) *pluginv1.Content {
	return &pluginv1.Content{Type: c.Type, Text: c.Text, Data: c.Data, MimeType: c.MIMEType, Uri: c.URI}
}

// ContentFromProto is one part of a result's content.
func ContentFromProto(c *pluginv1.Content) types.Content {
	return types.Content{Type: c.GetType(), Text: c.GetText(), Data: c.GetData(), MIMEType: c.GetMimeType(), URI: c.GetUri()}
}

// ToProtoCallToolRequest is a nested call as the plugin asks the host for
// it; OnEvent does not cross.
func ToProtoCallToolRequest(c types.ToolCall) *pluginv1.CallToolRequest {
	return &pluginv1.CallToolRequest{ParentRunId: c.ParentRunID, Tool: c.Tool, ArgsJson: string(c.Args)}
}

// ToolCallFromProto is a nested call as the host reads it.
func ToolCallFromProto(r *pluginv1.CallToolRequest) types.ToolCall {
	return types.ToolCall{ParentRunID: r.GetParentRunId(), Tool: r.GetTool(), Args: json.RawMessage(r.GetArgsJson())}
}

// ToProtoCallToolResponse is a nested call's outcome, whole (CallTool,
// before CallToolStream).
func ToProtoCallToolResponse(r types.ToolResult) *pluginv1.CallToolResponse {
	return &pluginv1.CallToolResponse{ResultJson: string(r.Result), Printed: r.Printed, Error: pluginv1.FromError(r.Error), Content: ToProtoContents(r.Content)}
}

// ToolResultFromProto is a nested call's outcome, whole. No result is a
// nil Result.
func ToolResultFromProto(r *pluginv1.CallToolResponse) types.ToolResult {
	res := types.ToolResult{Printed: r.GetPrinted(), Error: r.GetError().ToError(), Content: ContentsFromProto(r.GetContent())}
	if s := r.GetResultJson(); s != "" {
		res.Result = json.RawMessage(s)
	}
	return res
}

// ToProtoAskModelRequest is a question for the host's model; a negative
// MaxTokens goes as 0 (the host's), and OnText does not cross.
func ToProtoAskModelRequest(r types.ModelRequest) *pluginv1.AskModelRequest {
	return &pluginv1.AskModelRequest{
		ParentRunId: r.ParentRunID, System: r.System, Prompt: r.Prompt,
		Json: r.JSON, MaxTokens: clampU32(r.MaxTokens),
	}
}

// ModelRequestFromProto is a question for the host's model.
func ModelRequestFromProto(r *pluginv1.AskModelRequest) types.ModelRequest {
	return types.ModelRequest{
		ParentRunID: r.GetParentRunId(), System: r.GetSystem(), Prompt: r.GetPrompt(),
		JSON: r.GetJson(), MaxTokens: int(r.GetMaxTokens()),
	}
}

// ToProtoAskModelResponse is the model's whole answer (its error unset: a
// failure goes as pluginv1.FromError).
func ToProtoAskModelResponse(a types.ModelAnswer) *pluginv1.AskModelResponse {
	return &pluginv1.AskModelResponse{
		Text: a.Text, Model: a.Model,
		InputTokens: clampU32(a.InputTokens), OutputTokens: clampU32(a.OutputTokens),
	}
}

// ModelAnswerFromProto is the model's whole answer (read its error
// first).
func ModelAnswerFromProto(r *pluginv1.AskModelResponse) types.ModelAnswer {
	return types.ModelAnswer{Text: r.GetText(), Model: r.GetModel(), InputTokens: int(r.GetInputTokens()), OutputTokens: int(r.GetOutputTokens())}
}

// ToProtoDoctorResponse is what a kind's Doctor found.
func ToProtoDoctorResponse(rep types.DoctorReport) *pluginv1.DoctorResponse {
	out := &pluginv1.DoctorResponse{Summary: rep.Summary}
	for _, c := range rep.Checks {
		out.Checks = append(out.Checks, &pluginv1.DoctorCheck{Name: c.Name, Ok: c.OK, Detail: c.Detail, Fix: c.Fix})
	}
	return out
}

// DoctorReportFromProto is what a kind's Doctor found; no checks is nil.
func DoctorReportFromProto(r *pluginv1.DoctorResponse) types.DoctorReport {
	rep := types.DoctorReport{Summary: r.GetSummary()}
	for _, pc := range r.GetChecks() {
		rep.Checks = append(rep.Checks, types.DoctorCheck{Name: pc.GetName(), OK: pc.GetOk(), Detail: pc.GetDetail(), Fix: pc.GetFix()})
	}
	return rep
}

// ToProtoMetrics is what a kind reports.
func ToProtoMetrics(ms []types.Metric) *pluginv1.MetricsResponse {
	out := make([]*pluginv1.Metric, len(ms))
	for i, m := range ms {
		out[i] = &pluginv1.Metric{Name: m.Name, Help: m.Help, Type: m.Type, Value: m.Value, Labels: m.Labels}
	}
	return &pluginv1.MetricsResponse{Metrics: out}
}

// MetricsFromProto is what a kind reports.
func MetricsFromProto(r *pluginv1.MetricsResponse) []types.Metric {
	out := make([]types.Metric, len(r.GetMetrics()))
	for i, m := range r.GetMetrics() {
		out[i] = types.Metric{Name: m.GetName(), Help: m.GetHelp(), Type: m.GetType(), Value: m.GetValue(), Labels: m.GetLabels()}
	}
	return out
}

// ToProtoSessionsConfig is the host's [sessions] table; a count goes
// clamped to 0…2^32-1, and no proxy as "".
func ToProtoSessionsConfig(c types.SessionsConfig) *pluginv1.SessionsConfig {
	out := &pluginv1.SessionsConfig{
		DiskMb: clampU32(c.DiskMB), MemoryMb: clampU32(c.MemoryMB), Pids: clampU32(c.Pids),
		IdleMinutes: clampU32(c.IdleMinutes), Seconds: clampU32(c.Seconds),
	}
	if c.ProxyAddr.IsValid() {
		out.ProxyAddr = c.ProxyAddr.String()
	}
	return out
}

// SessionsConfigFromProto is the host's [sessions] table, or an error
// (errcode.BadArgs) when its proxy is not an address and port.
func SessionsConfigFromProto(r *pluginv1.SessionsConfig) (types.SessionsConfig, *errcode.Error) {
	cfg := types.SessionsConfig{
		DiskMB: int(r.GetDiskMb()), MemoryMB: int(r.GetMemoryMb()), Pids: int(r.GetPids()),
		IdleMinutes: int(r.GetIdleMinutes()), Seconds: int(r.GetSeconds()),
	}
	if a := r.GetProxyAddr(); a != "" {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return types.SessionsConfig{}, errcode.Errorf(errcode.BadArgs, "the egress proxy's address %q is not an address and port like \"10.0.0.1:3128\"", a)
		}
		cfg.ProxyAddr = ap
	}
	return cfg, nil
}

// ToProtoFileInfo is one file of a session's workspace; its time goes in
// whole milliseconds, and the zero time as 0.
func ToProtoFileInfo(f types.SessionFile) *pluginv1.FileInfo {
	pf := &pluginv1.FileInfo{Path: f.Path, Size: f.Size, Dir: f.Dir}
	if !f.ModTime.IsZero() {
		pf.ModTimeUnixMs = f.ModTime.UnixMilli()
	}
	return pf
}

// SessionFileFromProto is one file of a session's workspace; a time of 0
// is the zero time.
func SessionFileFromProto(f *pluginv1.FileInfo) types.SessionFile {
	out := types.SessionFile{Path: f.GetPath(), Size: f.GetSize(), Dir: f.GetDir()}
	if ms := f.GetModTimeUnixMs(); ms != 0 {
		out.ModTime = time.UnixMilli(ms)
	}
	return out
}

func clampU32(n int) uint32 {
	return uint32(min(max(n, 0), 1<<32-1))
}
