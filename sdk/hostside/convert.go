package hostside

import (
	"github.com/toolhost/toolhost/sdk"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// The host's conversions between the SDK's types and the generated ones;
// the plugin's are in sdk/convert.go.

func toolToProto(t sdk.Tool) *pluginv1.Tool {
	params := make([]*pluginv1.Param, len(t.Params))
	for i, p := range t.Params {
		params[i] = &pluginv1.Param{Name: p.Name, Kind: p.Kind, Required: p.Required, Options: p.Options, Description: p.Description}
	}
	return &pluginv1.Tool{
		Name: t.Name, Description: t.Description, Effect: t.Effect,
		Params: params, RunJson: string(t.Run), Source: t.Source,
	}
}

func fieldErrorsFromProto(pe []*pluginv1.FieldError) sdk.FieldErrors {
	if len(pe) == 0 {
		return nil
	}
	out := make(sdk.FieldErrors, len(pe))
	for i, e := range pe {
		out[i] = sdk.FieldError{Path: e.GetPath(), Message: e.GetMessage()}
	}
	return out
}

func eventFromProto(pe *pluginv1.Event) (sdk.Event, bool) {
	switch k := pe.GetKind().(type) {
	case *pluginv1.Event_Stdout:
		return sdk.Event{Stdout: k.Stdout.GetData(), Node: k.Stdout.GetNode()}, true
	case *pluginv1.Event_Stderr:
		return sdk.Event{Stderr: k.Stderr.GetData(), Node: k.Stderr.GetNode()}, true
	case *pluginv1.Event_Progress:
		return sdk.Event{Progress: &sdk.Progress{Fraction: k.Progress.GetFraction(), Message: k.Progress.GetMessage(), Node: k.Progress.GetNode()}}, true
	case *pluginv1.Event_Log:
		return sdk.Event{Log: &sdk.Log{Level: k.Log.GetLevel(), Message: k.Log.GetMessage(), ToCaller: k.Log.GetToCaller()}}, true
	}
	return sdk.Event{}, false
}

// eventToProto is a nested run's event as HostService streams it to the
// plugin that made the call.
func eventToProto(e sdk.Event) *pluginv1.Event {
	switch {
	case e.Stdout != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stdout{Stdout: &pluginv1.Output{Data: e.Stdout, Node: e.Node}}}
	case e.Stderr != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stderr{Stderr: &pluginv1.Output{Data: e.Stderr, Node: e.Node}}}
	case e.Progress != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Progress{Progress: &pluginv1.Progress{Fraction: e.Progress.Fraction, Message: e.Progress.Message, Node: e.Progress.Node}}}
	}
	return nil
}

// contentsToProto and contentsFromProto convert a result's content (the
// plugin's twins are in sdk/convert.go). No parts is nil either way.
func contentsToProto(parts []sdk.Content) []*pluginv1.Content {
	if len(parts) == 0 {
		return nil
	}
	out := make([]*pluginv1.Content, len(parts))
	for i, c := range parts {
		out[i] = contentToProto(c)
	}
	return out
}

func contentToProto(c sdk.Content) *pluginv1.Content {
	return &pluginv1.Content{Type: c.Type, Text: c.Text, Data: c.Data, MimeType: c.MIMEType, Uri: c.URI}
}

func contentsFromProto(pc []*pluginv1.Content) []sdk.Content {
	if len(pc) == 0 {
		return nil
	}
	out := make([]sdk.Content, len(pc))
	for i, c := range pc {
		out[i] = contentFromProto(c)
	}
	return out
}

func contentFromProto(c *pluginv1.Content) sdk.Content {
	return sdk.Content{Type: c.GetType(), Text: c.GetText(), Data: c.GetData(), MIMEType: c.GetMimeType(), URI: c.GetUri()}
}

// outsideTextFromProto is a kind's word on outside text; a plugin built
// before kinds said sends none, which is sdk.OutsideTextUnsaid.
func outsideTextFromProto(o pluginv1.OutsideText) sdk.OutsideText {
	switch o {
	case pluginv1.OutsideText_OUTSIDE_TEXT_NONE:
		return sdk.OutsideTextNone
	case pluginv1.OutsideText_OUTSIDE_TEXT_ALWAYS:
		return sdk.OutsideTextAlways
	}
	return sdk.OutsideTextUnsaid
}
