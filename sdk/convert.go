package sdk

import (
	"encoding/json"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// The conversions between the public types and the generated ones live
// here, so neither side of the wire spells out protocol messages.

func toolToProto(t Tool) *pluginv1.Tool {
	params := make([]*pluginv1.Param, len(t.Params))
	for i, p := range t.Params {
		params[i] = &pluginv1.Param{Name: p.Name, Kind: p.Kind, Required: p.Required, Options: p.Options, Description: p.Description}
	}
	return &pluginv1.Tool{
		Name: t.Name, Description: t.Description, Effect: t.Effect,
		Params: params, RunJson: string(t.Run), Source: t.Source,
	}
}

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

func fieldErrorsFromProto(pe []*pluginv1.FieldError) FieldErrors {
	if len(pe) == 0 {
		return nil
	}
	out := make(FieldErrors, len(pe))
	for i, e := range pe {
		out[i] = FieldError{Path: e.GetPath(), Message: e.GetMessage()}
	}
	return out
}

func errorToProto(e *Error) *pluginv1.Error {
	if e == nil {
		return nil
	}
	return &pluginv1.Error{Code: e.Code, Message: e.Message}
}

func errorFromProto(e *pluginv1.Error) *Error {
	if e == nil {
		return nil
	}
	return &Error{Code: e.GetCode(), Message: e.GetMessage()}
}

func eventToProto(e Event) *pluginv1.Event {
	switch {
	case e.Stdout != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stdout{Stdout: &pluginv1.Output{Data: e.Stdout}}}
	case e.Stderr != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Stderr{Stderr: &pluginv1.Output{Data: e.Stderr}}}
	case e.Progress != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Progress{Progress: &pluginv1.Progress{Fraction: e.Progress.Fraction, Message: e.Progress.Message}}}
	case e.Log != nil:
		return &pluginv1.Event{Kind: &pluginv1.Event_Log{Log: &pluginv1.Log{Level: e.Log.Level, Message: e.Log.Message}}}
	}
	return nil
}

func eventFromProto(pe *pluginv1.Event) (Event, bool) {
	switch k := pe.GetKind().(type) {
	case *pluginv1.Event_Stdout:
		return Event{Stdout: k.Stdout.GetData()}, true
	case *pluginv1.Event_Stderr:
		return Event{Stderr: k.Stderr.GetData()}, true
	case *pluginv1.Event_Progress:
		return Event{Progress: &Progress{Fraction: k.Progress.GetFraction(), Message: k.Progress.GetMessage()}}, true
	case *pluginv1.Event_Log:
		return Event{Log: &Log{Level: k.Log.GetLevel(), Message: k.Log.GetMessage()}}, true
	}
	return Event{}, false
}
