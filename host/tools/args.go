package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolhost/toolhost/config"
)

// ArgError is a call's argument that doesn't fit the tool's params.
type ArgError struct {
	// Param names the argument ("" when the problem is the whole object).
	Param   string
	Message string
}

func (e *ArgError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return fmt.Sprintf("argument %q %s", e.Param, e.Message)
}

// CheckArgs checks a call's arguments (a JSON object) against the tool's
// Schema, the very schema its specs publish, with a JSON Schema 2020-12
// validator. An optional param given null is taken as not given; a
// required param may be null only when it is a json one. It
// returns the arguments as JSON, without the nulls, with integers written
// as whole numbers (2.0 and 2e0 are 2) and every other number kept
// exactly as sent. A refusal is an *ArgError naming the param and what is
// wrong with its value.
func CheckArgs(t *Tool, raw json.RawMessage) (json.RawMessage, error) {
	args, err := decodeArgs(t, raw)
	if err != nil {
		return nil, err
	}
	values := make(map[string]any, len(args))
	for name, v := range args {
		f, err := asFloats(v)
		if err != nil {
			return nil, &ArgError{Param: name, Message: err.Error()}
		}
		values[name] = f
	}
	resolved := t.resolved
	if resolved == nil {
		if resolved, err = t.resolvedSchema(); err != nil {
			return nil, err
		}
	}
	if err := resolved.Validate(values); err != nil {
		// The schema refused: say which param, and why, in words.
		if ae := explain(t, args); ae != nil {
			return nil, ae
		}
		return nil, &ArgError{Message: "the arguments don't fit the tool's parameters: " + err.Error()}
	}
	for _, p := range t.Params {
		if v, ok := args[p.Name]; ok {
			args[p.Name] = wholeNumbers(p, v)
		}
	}
	return json.Marshal(args)
}

// decodeArgs reads a call's arguments as a JSON object, numbers as
// json.Number, leaving out the optional params given null. Nothing and
// null are no arguments.
func decodeArgs(t *Tool, raw json.RawMessage) (map[string]any, error) {
	if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || string(trimmed) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil || args == nil || dec.More() {
		return nil, &ArgError{Message: "the arguments must be a JSON object of parameter names to values"}
	}
	for _, p := range t.Params {
		if v, ok := args[p.Name]; ok && v == nil && !p.Required {
			delete(args, p.Name)
		}
	}
	return args, nil
}

// asFloats is a value decoded with json.Number as the validator takes it,
// with float64 numbers: what every JSON parser holds. A number beyond a
// float64 (1e400) is refused here.
func asFloats(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("holds %s, a number beyond what JSON numbers hold here (a float64, ±1.8e308)", x)
		}
		return f, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			f, err := asFloats(e)
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			f, err := asFloats(e)
			if err != nil {
				return nil, err
			}
			out[k] = f
		}
		return out, nil
	}
	return v, nil
}

// resolvedSchema is Schema, as published (through JSON), ready to
// validate with.
func (t *Tool) resolvedSchema() (*jsonschema.Resolved, error) {
	data, err := json.Marshal(t.Schema())
	if err != nil {
		return nil, fmt.Errorf("the schema of %s can't be made: %w", t.Name, err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("the schema of %s can't be read: %w", t.Name, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s is not one a validator takes: %w", t.Name, err)
	}
	return r, nil
}

// explain finds what the schema refused in args, in the order a person
// reads it: a name that is not a param, a required param missing, then
// each param's value in order. It is the schema's rules written out, so
// that an error names the param; nil when it finds nothing.
func explain(t *Tool, args map[string]any) *ArgError {
	known := make(map[string]bool, len(t.Params))
	for _, p := range t.Params {
		known[p.Name] = true
	}
	var unknown []string
	for name := range args {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		if unknown[0] == "" {
			return &ArgError{Message: fmt.Sprintf("an argument's name is empty (\"\"): it is not a parameter of %s (it takes: %s)", t.Name, paramNames(t))}
		}
		return &ArgError{Param: unknown[0], Message: fmt.Sprintf("is not a parameter of %s (it takes: %s)", t.Name, paramNames(t))}
	}
	for _, p := range t.Params {
		v, ok := args[p.Name]
		if !ok || v == nil && p.Type != "json" {
			if p.Required {
				return &ArgError{Param: p.Name, Message: "is required"}
			}
			continue
		}
		if v == nil {
			continue // a required json param's null
		}
		if msg := checkValue(p.Type, p.Items, v); msg != "" {
			return &ArgError{Param: p.Name, Message: msg}
		}
		if len(p.Options) > 0 && !inOptions(v, p.Options) {
			return &ArgError{Param: p.Name, Message: fmt.Sprintf("must be one of %s", strings.Join(quoteAll(p.Options), ", "))}
		}
	}
	return nil
}

func paramNames(t *Tool) string {
	if len(t.Params) == 0 {
		return "no arguments"
	}
	names := make([]string, len(t.Params))
	for i, p := range t.Params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// checkValue says what is wrong with a value (not null) for a param of a
// kind, "" when nothing is.
func checkValue(kind, items string, v any) string {
	switch kind {
	case "text":
		if _, ok := v.(string); !ok {
			return "must be text (a JSON string), not " + jsonKind(v)
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return "must be a number, not " + jsonKind(v)
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return "must be a whole number, not " + jsonKind(v)
		}
		f, _ := n.Float64() // asFloats took it
		if f != math.Trunc(f) {
			return fmt.Sprintf("must be a whole number, not %s", n)
		}
		if math.Abs(f) > config.MaxInteger {
			return fmt.Sprintf("must be a whole number from -%d to %d, not %s", int64(config.MaxInteger), int64(config.MaxInteger), n)
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return "must be true or false, not " + jsonKind(v)
		}
	case "list":
		l, ok := v.([]any)
		if !ok {
			return "must be a list (a JSON array), not " + jsonKind(v)
		}
		if items == "" {
			items = config.DefaultItems
		}
		if items == "json" {
			return ""
		}
		for i, e := range l {
			if e == nil {
				return fmt.Sprintf("item %d must be %s, not null", i, itemWords[items])
			}
			if msg := checkValue(items, "", e); msg != "" {
				return fmt.Sprintf("item %d %s", i, msg)
			}
		}
	case "json":
		// any JSON value
	}
	return ""
}

// itemWords name what a list's items must be.
var itemWords = map[string]string{"text": "text", "number": "a number", "integer": "a whole number", "bool": "true or false"}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "text"
	case json.Number:
		return "a number"
	case bool:
		return "true/false"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// inOptions says whether v is one of options, as the schema's enum does:
// text equal to one, or a number of the same value (2 and 2.0 are one).
func inOptions(v any, options []string) bool {
	switch x := v.(type) {
	case string:
		for _, o := range options {
			if o == x {
				return true
			}
		}
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return false
		}
		for _, o := range options {
			if g, err := strconv.ParseFloat(o, 64); err == nil && g == f {
				return true
			}
		}
	}
	return false
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// wholeNumbers writes the numbers of an integer param (or a list of
// integers) as whole numbers: 2.0, 2e0 and 20e-1 are 2. The schema took
// them, so each is whole and within ±MaxInteger.
func wholeNumbers(p config.Param, v any) any {
	whole := func(v any) any {
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return json.Number(strconv.FormatInt(int64(f), 10))
			}
		}
		return v
	}
	switch {
	case p.Type == "integer":
		return whole(v)
	case p.Type == "list" && p.Items == "integer":
		if l, ok := v.([]any); ok {
			for i, e := range l {
				l[i] = whole(e)
			}
		}
	}
	return v
}
