package sdk

import (
	"encoding/json"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// The plugin's conversions between the public types and the generated
// ones; the host's are in sdk/hostside/convert.go.

func toolFromProto(t *pluginv1.Tool) Tool {
	if t == nil {
		return Tool{}
	}
	params := make([]Param, len(t.GetParams()))
	for i, p := range t.GetParams() {
		params[i] = Param{Name: p.GetName(), Kind: p.GetKind(), Required: p.GetRequired(), Options: p.GetOptions(), Description: p.GetDescription()}
	}
	return Tool{
		Name: t.GetName(), Description: t.GetDescription(), Effect: t.GetEffect(),
		Params: params, Run: json.RawMessage(t.GetRunJson()), Source: t.GetSource(),
	}
}

func fieldErrorsToProto(fe FieldErrors) []*pluginv1.FieldError {
	out := make([]*pluginv1.FieldError, len(fe))
	for i, e := range fe {
		out[i] = &pluginv1.FieldError{Path: e.Path, Message: e.Message}
	}
	return out
}

func eventToProto(e Event) *pluginv1.Event {
	switch {
	case e.Stdout != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stdout{Stdout: &pluginv1.Output{Data: e.Stdout, Node: e.Node}}}
	case e.Stderr != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stderr{Stderr: &pluginv1.Output{Data: e.Stderr, Node: e.Node}}}
	case e.Progress != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Progress{Progress: &pluginv1.Progress{Fraction: e.Progress.Fraction, Message: e.Progress.Message, Node: e.Progress.Node}}}
	case e.Log != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Log{Log: &pluginv1.Log{Level: e.Log.Level, Message: e.Log.Message, ToCaller: e.Log.ToCaller}}}
	}
	return nil
}

func resultToProto(value json.RawMessage, parts []Content) *pluginv1.Result {
	return &pluginv1.Result{Json: string(value), Content: contentsToProto(parts)}
}

// eventFromProto is a nested run's event, as the host streams it.
func eventFromProto(pe *pluginv1.Event) (Event, bool) {
	switch k := pe.GetKind().(type) {
	case *pluginv1.Event_Stdout:
		return Event{Stdout: k.Stdout.GetData(), Node: k.Stdout.GetNode()}, true
	case *pluginv1.Event_Stderr:
		return Event{Stderr: k.Stderr.GetData(), Node: k.Stderr.GetNode()}, true
	case *pluginv1.Event_Progress:
		return Event{Progress: &Progress{Fraction: k.Progress.GetFraction(), Message: k.Progress.GetMessage(), Node: k.Progress.GetNode()}}, true
	}
	return Event{}, false
}

// contentsToProto and contentsFromProto convert a result's content (the
// host's twins are in sdk/hostside/convert.go). No parts is nil either
// way.
func contentsToProto(parts []Content) []*pluginv1.Content {
	if len(parts) == 0 {
		return nil
	}
	out := make([]*pluginv1.Content, len(parts))
	for i, c := range parts {
		out[i] = contentToProto(c)
	}
	return out
}

func contentToProto(c Content) *pluginv1.Content {
	return &pluginv1.Content{Type: c.Type, Text: c.Text, Data: c.Data, MimeType: c.MIMEType, Uri: c.URI}
}

func contentsFromProto(pc []*pluginv1.Content) []Content {
	if len(pc) == 0 {
		return nil
	}
	out := make([]Content, len(pc))
	for i, c := range pc {
		out[i] = contentFromProto(c)
	}
	return out
}

func contentFromProto(c *pluginv1.Content) Content {
	return Content{Type: c.GetType(), Text: c.GetText(), Data: c.GetData(), MIMEType: c.GetMimeType(), URI: c.GetUri()}
}

// outsideTextToProto is the kind's word on outside text (the host's twin
// is in sdk/hostside/convert.go). OutsideTextUnsaid, which a kind never
// sets, goes as unspecified, as from a plugin built before kinds said.
func outsideTextToProto(o OutsideText) pluginv1.OutsideText {
	switch o {
	case OutsideTextNone:
		return pluginv1.OutsideText_OUTSIDE_TEXT_NONE
	case OutsideTextAlways:
		return pluginv1.OutsideText_OUTSIDE_TEXT_ALWAYS
	}
	return pluginv1.OutsideText_OUTSIDE_TEXT_UNSPECIFIED
}
