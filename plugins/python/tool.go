package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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
	// Session makes the tool one of a conversation sandbox (session_run.go): "python", "bash",
	// "files" or "file". Such a table has no code: the code comes with each call.
	Session string `json:"session,omitempty"`
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
    "network": {"type": "boolean", "default": false, "description": "reach public addresses on ports 80 and 443"},
    "session": {"enum": ["python", "bash", "files", "file"], "description": "a tool of the conversation's sandbox (run_python, run_bash, sandbox_files, sandbox_file): its code comes with each call, and nothing else is set"}
  },
  "required": ["type"],
  "oneOf": [{"required": ["code"], "not": {"required": ["session"]}}, {"required": ["session"], "not": {"anyOf": [{"required": ["code"]}, {"required": ["seconds"]}, {"required": ["memory_mb"]}, {"required": ["network"]}]}}],
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
		case "session":
			err := json.Unmarshal(v, &rt.Session)
			if _, known := sessionTools[rt.Session]; err != nil || !known {
				bad(k, "must be \"python\", \"bash\", \"files\" or \"file\"")
			}
		default:
			bad(k, "is not a key of a python tool's run table (type, code, seconds, memory_mb, network)")
		}
	}
	if _, ok := fields["session"]; ok {
		// A tool of the conversation's sandbox: its code comes with each call, its limits are the
		// session's.
		for _, key := range []string{"code", "seconds", "memory_mb", "network"} {
			if _, ok := fields[key]; ok {
				fe = slices.DeleteFunc(fe, func(e sdk.FieldError) bool { return e.Path == "run."+key })
				bad(key, "is not a key of a session tool's run table (type, session): its code comes with each call and its limits are [sessions]'s")
			}
		}
		if len(fe) > 0 {
			sortFieldErrors(fe)
			return rt, fe
		}
		return runTable{Type: "python", Session: rt.Session}, nil
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
