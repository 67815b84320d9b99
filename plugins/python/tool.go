package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost/sdk"
)

const (
	minSeconds      = 1
	maxSeconds      = 60
	defaultSeconds  = 20
	minMemoryMB     = 16
	defaultMemoryMB = 512
	maxCodeBytes    = 1 << 20
)

// runTable is a python tool's run table.
type runTable struct {
	Type     string `json:"type"`
	Code     string `json:"code"`
	Seconds  int    `json:"seconds"`
	MemoryMB int    `json:"memory_mb"`
	Network  bool   `json:"network"`
}

// runSchema is the JSON Schema of the run table.
func runSchema(maxMemoryMB int) json.RawMessage {
	def := min(defaultMemoryMB, maxMemoryMB)
	return json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "type": {"const": "python"},
    "code": {"type": "string", "minLength": 1, "description": "Python defining run(**args), which returns something JSON can hold"},
    "seconds": {"type": "integer", "minimum": %d, "maximum": %d, "default": %d, "description": "CPU seconds the code may use; the wall-clock limit is one second more"},
    "memory_mb": {"type": "integer", "minimum": %d, "maximum": %d, "default": %d, "description": "memory of the sandbox in MiB"},
    "network": {"type": "boolean", "default": false, "description": "reach public addresses on ports 80 and 443"}
  },
  "required": ["type", "code"],
  "additionalProperties": false
}`, minSeconds, maxSeconds, defaultSeconds, minMemoryMB, maxMemoryMB, def))
}

// parseRun decodes and checks a run table, filling in defaults. Problems are FieldErrors at
// "run.<key>".
func parseRun(raw json.RawMessage, maxMemoryMB int) (runTable, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return runTable{}, sdk.FieldErrors{{Path: "run", Message: "the run table can't be read: " + err.Error()}}
	}
	rt := runTable{Seconds: defaultSeconds, MemoryMB: min(defaultMemoryMB, maxMemoryMB)}
	var fe sdk.FieldErrors
	codeTyped := true
	bad := func(key, format string, args ...any) {
		fe = append(fe, sdk.FieldError{Path: "run." + key, Message: fmt.Sprintf(format, args...)})
	}
	for k, v := range fields {
		switch k {
		case "type":
			if json.Unmarshal(v, &rt.Type) != nil || rt.Type != "python" {
				bad(k, "must be \"python\"")
			}
		case "code":
			if json.Unmarshal(v, &rt.Code) != nil {
				codeTyped = false
				bad(k, "must be text: Python defining run(**args)")
			}
		case "seconds":
			if !wholeNumber(v, &rt.Seconds) || rt.Seconds < minSeconds || rt.Seconds > maxSeconds {
				bad(k, "is a whole number from %d to %d", minSeconds, maxSeconds)
			}
		case "memory_mb":
			if !wholeNumber(v, &rt.MemoryMB) || rt.MemoryMB < minMemoryMB || rt.MemoryMB > maxMemoryMB {
				bad(k, "is a whole number of MiB from %d to %d ([python] max_memory_mb)", minMemoryMB, maxMemoryMB)
			}
		case "network":
			if json.Unmarshal(v, &rt.Network) != nil {
				bad(k, "is true or false")
			}
		default:
			bad(k, "is not a key of a python tool's run table (type, code, seconds, memory_mb, network)")
		}
	}
	if codeTyped && strings.TrimSpace(rt.Code) == "" {
		bad("code", "is required: Python defining run(**args)")
	} else if len(rt.Code) > maxCodeBytes {
		bad("code", "is longer than %d bytes", maxCodeBytes)
	}
	if len(fe) > 0 {
		sortFieldErrors(fe)
		return rt, fe
	}
	rt.Type = "python"
	return rt, nil
}

func wholeNumber(raw json.RawMessage, dst *int) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var n json.Number
	if dec.Decode(&n) != nil {
		return false
	}
	i, err := n.Int64()
	if err != nil || i < -1<<31 || i > 1<<31-1 {
		return false
	}
	*dst = int(i)
	return true
}

func sortFieldErrors(fe sdk.FieldErrors) {
	for i := 1; i < len(fe); i++ {
		for j := i; j > 0 && fe[j].Path < fe[j-1].Path; j-- {
			fe[j], fe[j-1] = fe[j-1], fe[j]
		}
	}
}
