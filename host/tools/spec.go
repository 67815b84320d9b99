package tools

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
)

// FunctionSpec is a tool in the shape models take for function calling:
// {"type":"function","function":{"name","description","parameters"}},
// with toolhost's effect and kind: the protocol's own type, and the
// default format of a tool list.
type FunctionSpec = wire.Tool

// Function is the function part of a FunctionSpec.
type Function = wire.Function

// The formats a tool list can be given in (GET /api/v1/tools?format=…,
// list_tools' "format").
const (
	// FormatToolhost is the default: FunctionSpec, with effect and kind.
	FormatToolhost = wire.FormatToolhost
	// FormatOpenAI is OpenAI's function tool, as its Chat Completions API
	// takes it; with strict, in its strict mode.
	FormatOpenAI = wire.FormatOpenAI
	// FormatAnthropic is Anthropic's tool: name, description, input_schema.
	FormatAnthropic = wire.FormatAnthropic
	// FormatMCP is MCP's Tool: name, description, inputSchema, annotations.
	FormatMCP = wire.FormatMCP
)

// Formats are the formats a tool list can be given in, the default first.
var Formats = []string{FormatToolhost, FormatOpenAI, FormatAnthropic, FormatMCP}

// Schema returns the JSON Schema (2020-12) of the tool's arguments: the
// schema every format publishes as the tool's parameters, and the one
// CheckArgs checks a call's arguments against. Each param is a property;
// the required ones are listed in required; no other property is allowed.
// An optional param also takes null, which means "not given".
func (t *Tool) Schema() map[string]any {
	props := make(map[string]any, len(t.Params))
	required := []string{}
	for _, p := range t.Params {
		props[p.Name] = paramSchema(p)
		if p.Required {
			required = append(required, p.Name)
		}
	}
	return map[string]any{
		"type": "object", "properties": props, "required": required, "additionalProperties": false,
	}
}

// paramSchema is the schema of one param's value.
func paramSchema(p config.Param) map[string]any {
	s := kindSchema(p.Type, p.Items)
	if p.Description != "" {
		s["description"] = p.Description
	}
	if len(p.Options) > 0 {
		enum := make([]any, 0, len(p.Options)+1)
		for _, o := range p.Options {
			enum = append(enum, optionValue(p.Type, o))
		}
		s["enum"] = enum
		delete(s, "minimum") // the options are within them
		delete(s, "maximum")
	}
	if !p.Required {
		nullable(s)
	}
	return s
}

// kindSchema is the schema of a value of a param kind: a json param takes
// any value (no type), null too when it is required (an optional one's
// null is "not given"); a list's items are of its items kind, where json
// is any value.
func kindSchema(kind, items string) map[string]any {
	switch kind {
	case "text":
		return map[string]any{"type": "string"}
	case "number":
		return map[string]any{"type": "number"}
	case "integer":
		return map[string]any{"type": "integer", "minimum": -config.MaxInteger, "maximum": config.MaxInteger}
	case "bool":
		return map[string]any{"type": "boolean"}
	case "list":
		return map[string]any{"type": "array", "items": itemSchema(items)}
	}
	return map[string]any{}
}

// itemSchema is the schema of one item of a list param.
func itemSchema(items string) map[string]any {
	switch items {
	case "":
		return kindSchema(config.DefaultItems, "")
	case "json":
		return map[string]any{}
	}
	return kindSchema(items, "")
}

// nullable makes a param's schema take null too.
func nullable(s map[string]any) {
	if ty, ok := s["type"].(string); ok {
		s["type"] = []any{ty, "null"}
	}
	if enum, ok := s["enum"].([]any); ok {
		s["enum"] = append(enum, nil)
	}
}

// optionValue is an option as its JSON value: a number for number and
// integer params (checked to be one when the tool was loaded).
func optionValue(kind, o string) any {
	switch kind {
	case "integer":
		if n, err := strconv.ParseInt(o, 10, 64); err == nil {
			return n
		}
	case "number":
		if f, err := strconv.ParseFloat(o, 64); err == nil {
			return f
		}
	}
	return o
}

// Spec returns the tool in the default format: a function spec with
// Schema as its parameters, and the tool's effect and kind.
func (t *Tool) Spec() FunctionSpec {
	return FunctionSpec{
		Type:     "function",
		Function: Function{Name: t.Name, Description: t.Description, Parameters: t.Schema()},
		Effect:   t.Effect, Kind: t.Kind,
	}
}

// OpenAI returns the tool as OpenAI's Chat Completions API takes a
// function tool. With strict, it is in strict mode's form (every param
// listed in required, the optional ones taking null, which Schema already
// gives them) with "strict": true; a tool strict mode can't describe is
// given as it is with "strict": false, and why says why.
func (t *Tool) OpenAI(strict bool) (spec wire.OpenAITool, why string) {
	fn := wire.OpenAIFunction{Name: t.Name, Description: t.Description, Parameters: t.Schema()}
	if strict {
		why = t.notStrict()
		fn.Strict = new(why == "")
		if why == "" {
			all := make([]string, len(t.Params))
			for i, p := range t.Params {
				all[i] = p.Name
			}
			fn.Parameters["required"] = all
		}
	}
	return wire.OpenAITool{Type: "function", Function: fn}, why
}

// notStrict says why strict mode can't describe the tool: a json param
// (or a list of json) takes objects of any keys, and strict mode needs
// every object's keys listed. "" when it can.
func (t *Tool) notStrict() string {
	var why []string
	for _, p := range t.Params {
		switch {
		case p.Type == "json":
			why = append(why, fmt.Sprintf("%s is a json param (any JSON value)", p.Name))
		case p.Type == "list" && p.Items == "json":
			why = append(why, fmt.Sprintf("%s is a list of any JSON values (items = \"json\")", p.Name))
		}
	}
	if len(why) == 0 {
		return ""
	}
	return strings.Join(why, "; ") + ", and strict mode takes no object without its keys listed"
}

// Anthropic returns the tool as Anthropic's Messages API takes it.
func (t *Tool) Anthropic() wire.AnthropicTool {
	return wire.AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.Schema()}
}

// MCP returns the tool as MCP's tools/list gives it: Schema as the input
// schema, and the effect as hints (a read tool is read-only, a change
// tool destructive).
func (t *Tool) MCP() wire.MCPTool {
	m := wire.MCPTool{Name: t.Name, Description: t.Description, InputSchema: t.Schema()}
	switch t.Effect {
	case "read":
		m.Annotations = &wire.MCPAnnotations{ReadOnlyHint: true}
	case "change":
		m.Annotations = &wire.MCPAnnotations{DestructiveHint: new(true)}
	}
	return m
}

// Specs returns tools in a format ("" is the default). With strict (for
// the openai format only), notStrict lists the tools strict mode can't
// describe, given with "strict": false, and why. A format not known, or
// strict with another format, is an error saying what is taken.
func Specs(list []*Tool, format string, strict bool) (specs []any, notStrict []wire.NotStrict, err error) {
	if format == "" {
		format = FormatToolhost
	}
	if !slices.Contains(Formats, format) {
		return nil, nil, fmt.Errorf("format must be one of %s, not %q", strings.Join(Formats, ", "), format)
	}
	if strict && format != FormatOpenAI {
		return nil, nil, fmt.Errorf("strict is OpenAI's strict mode: it goes with format=openai, not %s", format)
	}
	specs = make([]any, 0, len(list))
	for _, t := range list {
		switch format {
		case FormatToolhost:
			specs = append(specs, t.Spec())
		case FormatOpenAI:
			spec, why := t.OpenAI(strict)
			if why != "" {
				notStrict = append(notStrict, wire.NotStrict{Name: t.Name, Why: why})
			}
			specs = append(specs, spec)
		case FormatAnthropic:
			specs = append(specs, t.Anthropic())
		case FormatMCP:
			specs = append(specs, t.MCP())
		}
	}
	return specs, notStrict, nil
}
