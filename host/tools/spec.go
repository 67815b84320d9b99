package tools

import (
	"strconv"

	"github.com/toolhost/toolhost/client"
)

// FunctionSpec is a tool in the shape models take for function calling:
// {"type":"function","function":{"name","description","parameters"}},
// with toolhost's effect and kind: the protocol's own type.
type FunctionSpec = client.Tool

// Function is the function part of a FunctionSpec.
type Function = client.Function

// Spec returns the tool as a function spec with a JSON Schema of its
// params.
func (t *Tool) Spec() FunctionSpec {
	props := map[string]any{}
	required := []string{}
	for _, p := range t.Params {
		s := map[string]any{}
		switch p.Kind {
		case "text":
			s["type"] = "string"
		case "number":
			s["type"] = "number"
		case "integer":
			s["type"] = "integer"
		case "bool":
			s["type"] = "boolean"
		case "list":
			s["type"] = "array"
		case "json":
			// any JSON value: no type constraint
		}
		if p.Description != "" {
			s["description"] = p.Description
		}
		if len(p.Options) > 0 {
			enum := make([]any, len(p.Options))
			for i, o := range p.Options {
				enum[i] = o
				if p.Kind == "number" || p.Kind == "integer" {
					if f, err := strconv.ParseFloat(o, 64); err == nil {
						enum[i] = f
					}
				}
			}
			s["enum"] = enum
		}
		props[p.Name] = s
		if p.Required {
			required = append(required, p.Name)
		}
	}
	return FunctionSpec{
		Type: "function",
		Function: Function{
			Name: t.Name, Description: t.Description,
			Parameters: map[string]any{
				"type": "object", "properties": props, "required": required, "additionalProperties": false,
			},
		},
		Effect: t.Effect, Kind: t.Kind,
	}
}
