package convert

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/toolhost/toolhost/sdk/errcode"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
	"github.com/toolhost/toolhost/sdk/internal/types"
)

// The SDK's side: a value of each type that crosses, with every field set
// (allSet checks), goes to the protocol and back and comes back equal.

func TestSDKValuesRoundTrip(t *testing.T) {
	tool := types.Tool{
		Name: "get", Description: "gets a page", Effect: "read",
		Params: []types.Param{
			{Name: "url", Type: "text", Required: true, Options: []string{"a", "b"}, Description: "the page"},
			{Name: "n", Type: "integer", Required: true, Options: []string{"1"}, Description: "how many"},
		},
		Run: json.RawMessage(`{"type":"http"}`), Source: "tools/get.toml:1",
	}
	parts := []types.Content{
		{Type: "resource", Text: "hello", Data: []byte{1, 2}, MIMEType: "text/plain", URI: "file:///a"},
		{Type: "image", Text: "alt", Data: []byte{3}, MIMEType: "image/png", URI: "file:///b"},
	}
	cases := []struct {
		name string
		// ignore names the fields that don't cross, by design.
		ignore []string
		in     any
		back   func(any) any
	}{
		{"Info", nil, types.Info{
			Kind: "http", Version: "1.2.3", RunSchema: json.RawMessage(`{"type":"object"}`),
			ConfigSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			WantsCatalog: true, ServesSessions: true, OutsideText: types.OutsideTextAlways, OutsideTextWhen: "network",
			SandboxRuns: true, AdminWritesOnly: true, OpenRunTable: true,
			SessionTools: []types.SessionTool{
				{Name: "run_it", Description: "Runs it.", Effect: "change", Params: tool.Params, Session: "python"},
				{Name: "list_it", Description: "Lists it.", Effect: "read", Params: tool.Params[:1], Session: "files"},
			},
		}, func(v any) any {
			info, versions := InfoFromProto(ToProtoDescribeResponse(v.(types.Info), []uint32{1, 2, 3}))
			if !reflect.DeepEqual(versions, []uint32{1, 2, 3}) {
				return versions
			}
			return info
		}},
		{"Tool", nil, tool, func(v any) any { return ToolFromProto(ToProtoTool(v.(types.Tool))) }},
		{"Tools", nil, []types.Tool{tool, tool}, func(v any) any { return ToolsFromProto(ToProtoTools(v.([]types.Tool))) }},
		{"SessionTools", nil, []types.SessionTool{{Name: "a", Description: "A.", Effect: "read", Params: tool.Params, Session: "file"}},
			func(v any) any { return SessionToolsFromProto(ToProtoSessionTools(v.([]types.SessionTool))) }},
		{"Param", nil, tool.Params[0], func(v any) any { return ParamFromProto(ToProtoParam(v.(types.Param))) }},
		{"FieldErrors", nil, types.FieldErrors{{Path: "run.url", Message: "is empty"}, {Path: "run.n", Message: "is negative"}},
			func(v any) any { return FieldErrorsFromProto(ToProtoFieldErrors(v.(types.FieldErrors))) }},
		{"Call", []string{"Host"}, types.Call{
			Tool: tool, Args: json.RawMessage(`{"url":"x"}`), RunID: "r1", Principal: "ann",
			Session: "s1", SessionNetwork: "packages", SessionProxy: "http://u:p@10.0.0.1:3128",
		}, func(v any) any {
			c, id := CallFromProto(ToProtoInvokeRequest(v.(types.Call), 7))
			if id != 7 {
				return id
			}
			return c
		}},
		{"Event stdout", nil, types.Event{Stdout: []byte("out"), Node: "n1"}, eventBack},
		{"Event stderr", nil, types.Event{Stderr: []byte("err"), Node: "n2"}, eventBack},
		{"Event progress", nil, types.Event{Progress: &types.Progress{Fraction: 0.5, Message: "half", Node: "n3"}}, eventBack},
		{"Event log", nil, types.Event{Log: &types.Log{Level: "warning", Message: "careful", ToCaller: true}}, eventBack},
		{"Progress", nil, types.Progress{Fraction: 0.25, Message: "a quarter", Node: "n"}, func(v any) any {
			p := v.(types.Progress)
			e, _ := EventFromProto(ToProtoEvent(types.Event{Progress: &p}))
			return *e.Progress
		}},
		{"Log", nil, types.Log{Level: "info", Message: "hi", ToCaller: true}, func(v any) any {
			l := v.(types.Log)
			e, _ := EventFromProto(ToProtoEvent(types.Event{Log: &l}))
			return *e.Log
		}},
		{"Content", nil, parts[0], func(v any) any { return ContentFromProto(ToProtoContent(v.(types.Content))) }},
		{"Contents", nil, parts, func(v any) any { return ContentsFromProto(ToProtoContents(v.([]types.Content))) }},
		{"Result", nil, result{Value: json.RawMessage(`{"ok":true}`), Content: parts}, func(v any) any {
			r := v.(result)
			value, content := ResultFromProto(ToProtoResult(r.Value, r.Content))
			return result{Value: value, Content: content}
		}},
		{"ToolCall", []string{"OnEvent"}, types.ToolCall{ParentRunID: "r1", Tool: "get", Args: json.RawMessage(`{"url":"x"}`)},
			func(v any) any { return ToolCallFromProto(ToProtoCallToolRequest(v.(types.ToolCall))) }},
		{"ToolResult", nil, types.ToolResult{
			Result: json.RawMessage(`[1]`), Content: parts, Printed: "printed",
			Error: &errcode.Error{Code: errcode.Failed, Message: "it failed"},
		}, func(v any) any { return ToolResultFromProto(ToProtoCallToolResponse(v.(types.ToolResult))) }},
		{"ModelRequest", []string{"OnText"}, types.ModelRequest{
			ParentRunID: "r1", System: "be brief", Prompt: "why?", JSON: true, MaxTokens: 300,
		}, func(v any) any { return ModelRequestFromProto(ToProtoAskModelRequest(v.(types.ModelRequest))) }},
		{"ModelAnswer", nil, types.ModelAnswer{Text: "because", Model: "m1", InputTokens: 10, OutputTokens: 20},
			func(v any) any { return ModelAnswerFromProto(ToProtoAskModelResponse(v.(types.ModelAnswer))) }},
		{"DoctorReport", nil, types.DoctorReport{
			Checks: []types.DoctorCheck{
				{Name: "runsc", OK: true, Detail: "found", Fix: "none needed"},
				{Name: "cgroups", OK: true, Detail: "v2", Fix: "-"},
			},
			Summary: "this machine can run it",
		}, func(v any) any { return DoctorReportFromProto(ToProtoDoctorResponse(v.(types.DoctorReport))) }},
		{"Metrics", nil, []types.Metric{
			{Name: "pool_size", Help: "sandboxes ready", Type: "gauge", Value: 3, Labels: map[string]string{"pool": "a"}},
			{Name: "runs_total", Help: "runs", Type: "counter", Value: 9.5, Labels: map[string]string{"kind": "b"}},
		}, func(v any) any { return MetricsFromProto(ToProtoMetrics(v.([]types.Metric))) }},
		{"SessionsConfig", nil, types.SessionsConfig{
			DiskMB: 512, MemoryMB: 256, Pids: 64, IdleMinutes: 15, Seconds: 120,
			ProxyAddr: netip.MustParseAddrPort("10.0.0.1:3128"),
		}, func(v any) any {
			cfg, err := SessionsConfigFromProto(ToProtoSessionsConfig(v.(types.SessionsConfig)))
			if err != nil {
				return err
			}
			return cfg
		}},
		{"SessionFile", nil, types.SessionFile{Path: "a/b.txt", Size: 12, ModTime: time.UnixMilli(1_700_000_000_123), Dir: true},
			func(v any) any { return SessionFileFromProto(ToProtoFileInfo(v.(types.SessionFile))) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.HasPrefix(c.name, "Event ") {
				allSet(t, reflect.ValueOf(c.in), c.name, c.ignore)
			}
			if got := c.back(c.in); !reflect.DeepEqual(got, c.in) {
				t.Errorf("%s didn't come back the same:\n got %#v\nwant %#v", c.name, got, c.in)
			}
		})
	}
}

// result is a Result's two halves, for the table.
type result struct {
	Value   json.RawMessage
	Content []types.Content
}

func eventBack(v any) any {
	e, ok := EventFromProto(ToProtoEvent(v.(types.Event)))
	if !ok {
		return "not an event"
	}
	return e
}

// allSet fails the test for a field of v (a struct, or a slice of them,
// looked into one level) left zero, so that a field added to an SDK type
// has to be added to its value above, and then to the converter.
func allSet(t *testing.T, v reflect.Value, where string, ignore []string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("%s is empty", where)
		}
		for i := 0; i < v.Len(); i++ {
			allSet(t, v.Index(i), where, ignore)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if contains(ignore, f.Name) {
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set in the test's value: set it, and carry it in the converter", where, f.Name)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestOutsideTextRoundTrips(t *testing.T) {
	for _, o := range []types.OutsideText{types.OutsideTextNone, types.OutsideTextAlways, types.OutsideTextUnsaid} {
		if got := OutsideTextFromProto(ToProtoOutsideText(o)); got != o {
			t.Errorf("outside text %d came back as %d", o, got)
		}
	}
	for n := range pluginv1.OutsideText_name {
		o := pluginv1.OutsideText(n)
		if got := ToProtoOutsideText(OutsideTextFromProto(o)); got != o {
			t.Errorf("%v came back as %v", o, got)
		}
	}
}

// The protocol's side: a message with every field set (fill walks its
// descriptor) goes to the SDK's type and back and comes back proto.Equal,
// so a field the converter doesn't carry fails here.

// protoCase is one converted message and its round trip through the SDK.
type protoCase struct {
	msg  proto.Message
	back func(proto.Message) proto.Message
	// skip names the message's fields that the converter leaves to its
	// caller, by design.
	skip []protoreflect.Name
	// fix sets what fill can't make up (an address that parses).
	fix func(proto.Message)
}

func protoCases() map[string]protoCase {
	return map[string]protoCase{
		"DescribeResponse": {msg: &pluginv1.DescribeResponse{}, back: func(m proto.Message) proto.Message {
			return ToProtoDescribeResponse(InfoFromProto(m.(*pluginv1.DescribeResponse)))
		}},
		"Tool": {msg: &pluginv1.Tool{}, back: func(m proto.Message) proto.Message { return ToProtoTool(ToolFromProto(m.(*pluginv1.Tool))) }},
		"SessionTool": {msg: &pluginv1.SessionTool{}, back: func(m proto.Message) proto.Message {
			return ToProtoSessionTools(SessionToolsFromProto([]*pluginv1.SessionTool{m.(*pluginv1.SessionTool)}))[0]
		}},
		"Param": {msg: &pluginv1.Param{}, back: func(m proto.Message) proto.Message {
			return ToProtoParam(ParamFromProto(m.(*pluginv1.Param)))
		}},
		"FieldError": {msg: &pluginv1.FieldError{}, back: func(m proto.Message) proto.Message {
			return ToProtoFieldErrors(FieldErrorsFromProto([]*pluginv1.FieldError{m.(*pluginv1.FieldError)}))[0]
		}},
		"InvokeRequest": {msg: &pluginv1.InvokeRequest{}, back: func(m proto.Message) proto.Message {
			return ToProtoInvokeRequest(CallFromProto(m.(*pluginv1.InvokeRequest)))
		}},
		"Event": {msg: &pluginv1.Event{}, skip: []protoreflect.Name{"seq"}, back: func(m proto.Message) proto.Message {
			e, _ := EventFromProto(m.(*pluginv1.Event))
			return ToProtoEvent(e)
		}},
		"Result": {msg: &pluginv1.Result{}, back: func(m proto.Message) proto.Message {
			return ToProtoResult(ResultFromProto(m.(*pluginv1.Result)))
		}},
		"Content": {msg: &pluginv1.Content{}, back: func(m proto.Message) proto.Message {
			return ToProtoContent(ContentFromProto(m.(*pluginv1.Content)))
		}},
		"CallToolRequest": {msg: &pluginv1.CallToolRequest{}, back: func(m proto.Message) proto.Message {
			return ToProtoCallToolRequest(ToolCallFromProto(m.(*pluginv1.CallToolRequest)))
		}},
		"CallToolResponse": {msg: &pluginv1.CallToolResponse{}, back: func(m proto.Message) proto.Message {
			return ToProtoCallToolResponse(ToolResultFromProto(m.(*pluginv1.CallToolResponse)))
		}},
		"AskModelRequest": {msg: &pluginv1.AskModelRequest{}, back: func(m proto.Message) proto.Message {
			return ToProtoAskModelRequest(ModelRequestFromProto(m.(*pluginv1.AskModelRequest)))
		}},
		// A model's failure is the answer's error, read first and carried
		// by pluginv1.FromError and ToError.
		"AskModelResponse": {msg: &pluginv1.AskModelResponse{}, skip: []protoreflect.Name{"error"}, back: func(m proto.Message) proto.Message {
			return ToProtoAskModelResponse(ModelAnswerFromProto(m.(*pluginv1.AskModelResponse)))
		}},
		"DoctorResponse": {msg: &pluginv1.DoctorResponse{}, back: func(m proto.Message) proto.Message {
			return ToProtoDoctorResponse(DoctorReportFromProto(m.(*pluginv1.DoctorResponse)))
		}},
		"MetricsResponse": {msg: &pluginv1.MetricsResponse{}, back: func(m proto.Message) proto.Message {
			return ToProtoMetrics(MetricsFromProto(m.(*pluginv1.MetricsResponse)))
		}},
		"SessionsConfig": {msg: &pluginv1.SessionsConfig{}, back: func(m proto.Message) proto.Message {
			cfg, err := SessionsConfigFromProto(m.(*pluginv1.SessionsConfig))
			if err != nil {
				return &pluginv1.Error{Code: err.Code, Message: err.Message}
			}
			return ToProtoSessionsConfig(cfg)
		}, fix: func(m proto.Message) { m.(*pluginv1.SessionsConfig).ProxyAddr = "10.0.0.1:3128" }},
		"FileInfo": {msg: &pluginv1.FileInfo{}, back: func(m proto.Message) proto.Message {
			return ToProtoFileInfo(SessionFileFromProto(m.(*pluginv1.FileInfo)))
		}},
	}
}

// notConverted is every other message of the protocol, and why the
// converter has no function for it as a whole.
var notConverted = map[protoreflect.Name]string{
	"DescribeRequest":           "empty",
	"ConfigureRequest":          "a JSON text and a broker id, read where they are used",
	"ConfigureResponse":         "its field errors are converted (FieldError)",
	"DoctorRequest":             "a JSON text",
	"DoctorCheck":               "converted within DoctorResponse",
	"MetricsRequest":            "empty",
	"Metric":                    "converted within MetricsResponse",
	"CheckRequest":              "a Tool and a catalog of them, converted (Tool)",
	"CheckResponse":             "a JSON text and field errors, converted (FieldError)",
	"Call":                      "converted within InvokeRequest",
	"Output":                    "converted within Event (stdout, stderr)",
	"Progress":                  "converted within Event",
	"Log":                       "converted within Event",
	"Error":                     "pluginv1.FromError and (*Error).ToError, beside the generated code",
	"ModelEvent":                "a piece of text, an AskModelResponse or an Error, each converted",
	"SessionsConfigureResponse": "empty",
	"SessionRef":                "a session id",
	"FileList":                  "a list of FileInfo, converted",
	"FileRequest":               "a session id, a path and a size, read where they are used",
	"Chunk":                     "bytes of a file, streamed",
	"WriteChunk":                "bytes of a file, streamed",
	"RemoveFileResponse":        "empty",
	"StopSessionResponse":       "empty",
	"DeleteSessionResponse":     "empty",
	"ReconcileRequest":          "a list of session ids",
	"ReconcileResponse":         "a list of session ids",
}

func TestEveryProtocolMessageIsConvertedOrSaidWhyNot(t *testing.T) {
	cases := protoCases()
	msgs := pluginv1.File_v1_plugin_proto.Messages()
	for i := 0; i < msgs.Len(); i++ {
		name := msgs.Get(i).Name()
		_, converted := cases[string(name)]
		why, said := notConverted[name]
		switch {
		case converted && said:
			t.Errorf("%s is converted, yet said not to be (%s)", name, why)
		case !converted && !said:
			t.Errorf("%s, a message of the protocol, has no converter and no word on why: add it to sdk/internal/convert and protoCases, or to notConverted", name)
		}
	}
}

func TestProtocolMessagesRoundTrip(t *testing.T) {
	for name, c := range protoCases() {
		t.Run(name, func(t *testing.T) {
			var msgs []proto.Message
			if oneofs := c.msg.ProtoReflect().Descriptor().Oneofs(); oneofs.Len() > 0 {
				msgs = eachOneofCase(t, c.msg, c.skip)
			} else {
				m := proto.Clone(c.msg)
				fill(m.ProtoReflect(), c.skip)
				msgs = []proto.Message{m}
			}
			for _, m := range msgs {
				if c.fix != nil {
					c.fix(m)
				}
				got := c.back(proto.Clone(m))
				if !proto.Equal(got, m) {
					t.Errorf("%s didn't come back the same: a field is not carried\n got %v\nwant %v", name, got, m)
				}
			}
		})
	}
}

// eventCases are the kinds of Event the converter carries; a Result and
// an Error end a run and are taken apart by their reader.
var eventCases = map[protoreflect.Name]bool{"stdout": true, "stderr": true, "progress": true, "log": true, "display": true, "result": false, "error": false}

// eachOneofCase is msg filled once per case of its one oneof that the
// converter carries.
func eachOneofCase(t *testing.T, msg proto.Message, skip []protoreflect.Name) []proto.Message {
	t.Helper()
	od := msg.ProtoReflect().Descriptor().Oneofs().Get(0)
	var out []proto.Message
	for i := 0; i < od.Fields().Len(); i++ {
		fd := od.Fields().Get(i)
		carried, known := eventCases[fd.Name()]
		if !known {
			t.Errorf("%s has a case %s this test doesn't know: carry it in ToProtoEvent and EventFromProto, and add it to eventCases", od.FullName(), fd.Name())
			continue
		}
		if !carried {
			continue
		}
		m := proto.Clone(msg)
		r := m.ProtoReflect()
		fill(r, skip)
		r.Set(fd, value(r, fd))
		out = append(out, m)
	}
	return out
}

// fill sets every field of m that is not in a oneof or skip: a scalar to
// something not zero, a list to two elements, a map to one entry, a
// message to one filled in turn.
func fill(m protoreflect.Message, skip []protoreflect.Name) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil || contains(names(skip), string(fd.Name())) {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(e.Message(), nil)
					l.Append(e)
				} else {
					l.Append(scalar(fd))
				}
			}
		case fd.IsMap():
			m.Mutable(fd).Map().Set(scalar(fd.MapKey()).MapKey(), scalar(fd.MapValue()))
		default:
			m.Set(fd, value(m, fd))
		}
	}
}

func value(m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Value {
	if fd.Kind() == protoreflect.MessageKind {
		v := m.NewField(fd)
		fill(v.Message(), nil)
		return v
	}
	return scalar(fd)
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1_700_000_000_123)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(42)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(43)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0.75)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(fd.Name()) + " value")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fd.Name()))
	}
	panic("fill: no value for a field of kind " + fd.Kind().String())
}

func names(ns []protoreflect.Name) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n)
	}
	return out
}
