package mcp

import (
	"encoding/json"
	"sync"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// callKey names a tools/call in flight for notifications/cancelled: the
// caller (the token's name) and the JSON-RPC id it gave the call. A
// stateless server gets the notification on another HTTP request than the
// call's, so it can only go by these; keying by the caller keeps one
// caller from cancelling another's call by guessing its id.
type callKey struct {
	principal string
	id        string // the id as JSON: 7 and "7" are two ids
}

// keyOf is the key of the request id v (a JSON string or number, as
// decoded or as raw JSON) for principal; ok is false for an id that is
// neither.
func keyOf(principal string, v any) (callKey, bool) {
	if raw, isRaw := v.(json.RawMessage); isRaw {
		if json.Unmarshal(raw, &v) != nil {
			return callKey{}, false
		}
	}
	switch v.(type) {
	case string, float64:
	default:
		return callKey{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return callKey{}, false
	}
	return callKey{principal: principal, id: string(b)}, true
}

// inFlight is the host's table of the tools/calls running, by key. A
// client that gives one id to two calls at once (over two connections,
// say) cancels both with one notification: they are its own.
type inFlight struct {
	mu    sync.Mutex
	calls map[callKey]map[*func()]struct{}
}

// add records a call's cancel func under k; the returned func removes it.
func (t *inFlight) add(k callKey, cancel func()) (remove func()) {
	p := &cancel
	t.mu.Lock()
	if t.calls == nil {
		t.calls = map[callKey]map[*func()]struct{}{}
	}
	if t.calls[k] == nil {
		t.calls[k] = map[*func()]struct{}{}
	}
	t.calls[k][p] = struct{}{}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.calls[k], p)
		if len(t.calls[k]) == 0 {
			delete(t.calls, k)
		}
		t.mu.Unlock()
	}
}

// cancel cancels the calls under k, and says how many there were.
func (t *inFlight) cancel(k callKey) int {
	t.mu.Lock()
	var fns []func()
	for p := range t.calls[k] {
		fns = append(fns, *p)
	}
	t.mu.Unlock()
	for _, f := range fns {
		f()
	}
	return len(fns)
}

// logLevels are the levels callers last set with logging/setLevel, by
// caller: a stateless server has no session to keep one in, so a level
// holds for the caller's later calls served by this host (each replica
// keeps its own), until the caller sets another.
type logLevels struct {
	mu     sync.Mutex
	levels map[string]sdkmcp.LoggingLevel
}

func (l *logLevels) set(principal string, level sdkmcp.LoggingLevel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.levels == nil {
		l.levels = map[string]sdkmcp.LoggingLevel{}
	}
	l.levels[principal] = level
}

func (l *logLevels) get(principal string) (sdkmcp.LoggingLevel, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	level, ok := l.levels[principal]
	return level, ok
}

// levels are MCP's logging levels, least severe first (RFC 5424's).
var levels = []sdkmcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// severity is a level's place in levels, or -1 for an unknown level.
func severity(l sdkmcp.LoggingLevel) int {
	for i, x := range levels {
		if x == l {
			return i
		}
	}
	return -1
}
