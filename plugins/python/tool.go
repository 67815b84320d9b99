package main

import (
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

// Messages of parseRun's FieldErrors that more than one place words.
const (
	unknownKey = "is not a key of a python tool's run table (type, code, seconds, memory_mb, network)"
	sessionKey = "is not a key of a session tool's run table (type, session): its code comes with each call and its limits are [sessions]'s"
)

// parseRun decodes and checks a run table, filling in defaults. Problems are FieldErrors at
// "run.<key>", in the order of their paths.
func parseRun(raw json.RawMessage, maxMemoryMB int) (runTable, error) {
	t, err := sdk.DecodeRunTable(raw)
	if err != nil {
		return runTable{}, err
	}
	if typ, ok := t.String("type", `must be "python"`); ok && typ != "python" {
		t.Errorf("type", `must be "python"`)
	}
	rt := runTable{Type: "python"}
	if t.Has("session") {
		rt.Session = readSession(t)
	} else {
		rt.Code = readCode(t)
		rt.Seconds, rt.MemoryMB, rt.Network = readLimits(t, maxMemoryMB)
	}
	t.Done(func(string) string { return unknownKey })
	if err := t.Err(); err != nil {
		fe := err.(sdk.FieldErrors)
		slices.SortStableFunc(fe, func(a, b sdk.FieldError) int { return strings.Compare(a.Path, b.Path) })
		return runTable{}, fe
	}
	return rt, nil
}

// readSession reads run.session, the tool of the conversation's sandbox a table names. Its code
// comes with each call and its limits are the session's, so the keys of both are refused.
func readSession(t *sdk.RunTable) string {
	s, ok := t.String("session", `must be "python", "bash", "files" or "file"`)
	if _, known := sessionTools[s]; ok && !known {
		t.Errorf("session", `must be "python", "bash", "files" or "file"`)
	}
	for _, key := range []string{"code", "seconds", "memory_mb", "network"} {
		if _, ok := t.Raw(key); ok {
			t.Errorf(key, "%s", sessionKey)
		}
	}
	return s
}

// readCode reads run.code, which must hold some Python and at most maxCodeBytes of it.
func readCode(t *sdk.RunTable) string {
	code, ok := t.String("code", "must be text: Python defining run(**args)")
	switch {
	case !t.Has("code") || ok && strings.TrimSpace(code) == "":
		t.Errorf("code", "is required: Python defining run(**args)")
	case len(code) > maxCodeBytes:
		t.Errorf("code", "is longer than %d bytes", maxCodeBytes)
	}
	return code
}

// readLimits reads run.seconds, run.memory_mb and run.network, each its default when absent. A
// number may be written as text ("5"), as it always could.
func readLimits(t *sdk.RunTable, maxMemoryMB int) (seconds, memoryMB int, network bool) {
	seconds, memoryMB = defaultSeconds, min(defaultMemoryMB, maxMemoryMB)
	if n, ok := t.Int("seconds", minSeconds, maxSeconds, fmt.Sprintf("is a whole number from %d to %d", minSeconds, maxSeconds), sdk.NumberInText); ok {
		seconds = n
	}
	if n, ok := t.Int("memory_mb", minMemoryMB, maxMemoryMB, fmt.Sprintf("is a whole number of MiB from %d to %d ([python] max_memory_mb)", minMemoryMB, maxMemoryMB), sdk.NumberInText); ok {
		memoryMB = n
	}
	network, _ = t.Bool("network", "is true or false")
	return seconds, memoryMB, network
}
