package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
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
// params: unknown names, required ones, types and options. It returns the
// arguments as JSON with numbers kept exactly as sent.
func CheckArgs(t *Tool, raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, &ArgError{Message: "the arguments must be a JSON object of parameter names to values"}
	}
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
		return nil, &ArgError{Param: unknown[0], Message: fmt.Sprintf("is not a parameter of %s (it takes: %s)", t.Name, paramNames(t))}
	}
	for _, p := range t.Params {
		v, ok := args[p.Name]
		if !ok || v == nil {
			if p.Required {
				return nil, &ArgError{Param: p.Name, Message: "is required"}
			}
			delete(args, p.Name)
			continue
		}
		if err := checkType(p.Kind, v); err != "" {
			return nil, &ArgError{Param: p.Name, Message: err}
		}
		if len(p.Options) > 0 && !inOptions(v, p.Options) {
			return nil, &ArgError{Param: p.Name, Message: fmt.Sprintf("must be one of %s", strings.Join(quoteAll(p.Options), ", "))}
		}
	}
	return json.Marshal(args)
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

func checkType(kind string, v any) string {
	switch kind {
	case "text":
		if _, ok := v.(string); !ok {
			return "must be text (a JSON string), not " + jsonKind(v)
		}
	case "number":
		n, ok := v.(json.Number)
		if !ok {
			return "must be a number, not " + jsonKind(v)
		}
		if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
			return "must be a number that fits a float64"
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return "must be a whole number, not " + jsonKind(v)
		}
		if !isWhole(n) {
			return fmt.Sprintf("must be a whole number, not %s", n.String())
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return "must be true or false, not " + jsonKind(v)
		}
	case "list":
		if _, ok := v.([]any); !ok {
			return "must be a list (a JSON array), not " + jsonKind(v)
		}
	case "json":
		// any JSON value
	}
	return ""
}

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

func inOptions(v any, options []string) bool {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return false
	}
	for _, o := range options {
		if o == s {
			return true
		}
		// 2 and 2.0 are the same number.
		if a, err1 := strconv.ParseFloat(o, 64); err1 == nil {
			if b, err2 := strconv.ParseFloat(s, 64); err2 == nil && a == b {
				if _, isNum := v.(json.Number); isNum {
					return true
				}
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

// isWhole says whether a JSON number is a whole number that fits an int64
// (2 and 2.0 both are, as in JSON Schema).
func isWhole(n json.Number) bool {
	if _, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return true
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	return err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63
}
