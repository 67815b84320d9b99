package mcp

import (
	"encoding/json"
	"sync"
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
