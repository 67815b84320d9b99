package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// RunTable reads the keys of a tool's run table, or of a table inside it,
// as typed values. It collects every problem as a FieldError at the key's
// path (run.url, run.headers.Accept, run.nodes[2].id) instead of stopping
// at the first, and Done reports the keys nobody read. A table and the
// tables read from it share one list of problems, which Err returns.
//
// Each getter takes the message for a value of the wrong kind, so that a
// kind keeps its own words; Describe and Written help to word it.
type RunTable struct {
	path string
	m    map[string]json.RawMessage
	read map[string]bool
	errs *FieldErrors
}

// DecodeRunTable reads run, a tool's run table as JSON. A run that is not
// a JSON object is refused with a FieldError at "run": "must be a table".
func DecodeRunTable(run json.RawMessage) (*RunTable, error) {
	m, ok := object(run)
	if !ok {
		return nil, FieldErrors{{Path: "run", Message: "must be a table"}}
	}
	return &RunTable{path: "run", m: m, read: map[string]bool{}, errs: new(FieldErrors)}, nil
}

// object decodes v as a JSON object; null and anything else is not one.
func object(v json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// at is the path of key in t, e.g. "run.url"; the empty key is t's own
// path.
func (t *RunTable) at(key string) string {
	if key == "" {
		return t.path
	}
	return t.path + "." + key
}

// Keys are the keys of t, sorted.
func (t *RunTable) Keys() []string {
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Has says whether t has key, without reading it.
func (t *RunTable) Has(key string) bool {
	_, ok := t.m[key]
	return ok
}

// Raw reads the value of key as JSON; ok is false when key is absent.
func (t *RunTable) Raw(key string) (json.RawMessage, bool) {
	t.read[key] = true
	v, ok := t.m[key]
	return v, ok
}

// Errorf records a problem at key (the empty key: at t itself).
func (t *RunTable) Errorf(key, format string, args ...any) {
	t.ErrorAt(t.at(key), format, args...)
}

// ErrorAt records a problem at a path of the tool outside t, such as
// params[1].name, in order with t's own.
func (t *RunTable) ErrorAt(path, format string, args ...any) {
	*t.errs = append(*t.errs, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// String reads a string. A value that is not one (null neither) is
// recorded with the message wrong; ok is false then and when key is absent.
func (t *RunTable) String(key, wrong string) (string, bool) {
	v, ok := t.Raw(key)
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil || isNull(v) {
		t.Errorf(key, "%s", wrong)
		return "", false
	}
	return s, true
}

// Strings reads a list of strings. A value that is not one is recorded
// with the message wrong; ok is false then and when key is absent.
func (t *RunTable) Strings(key, wrong string) ([]string, bool) {
	v, ok := t.Raw(key)
	if !ok {
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil || items == nil {
		t.Errorf(key, "%s", wrong)
		return nil, false
	}
	out := make([]string, len(items))
	for i, item := range items {
		if err := json.Unmarshal(item, &out[i]); err != nil || isNull(item) {
			t.Errorf(key, "%s", wrong)
			return nil, false
		}
	}
	return out, true
}

// A ReadOption widens what a getter accepts, for a kind whose run tables
// were read that way before it used RunTable.
type ReadOption int

const (
	// NumberInText lets Int also read text that is exactly a number, as
	// seconds = "5" in a tool file: the quotes are ignored, and the text
	// is then read as the number would be ("5.0" too, but not " 5" or
	// "five").
	NumberInText ReadOption = iota + 1
)

// Int reads a whole number from lo to hi (5.0 counts as 5); opts may
// widen that (NumberInText). Anything else is recorded with the message
// wrong; ok is false then and when key is absent.
func (t *RunTable) Int(key string, lo, hi int, wrong string, opts ...ReadOption) (int, bool) {
	v, ok := t.Raw(key)
	if !ok {
		return 0, false
	}
	if slices.Contains(opts, NumberInText) {
		v = numberInText(v)
	}
	n, ok := wholeNumber(v)
	if !ok || n < int64(lo) || n > int64(hi) {
		t.Errorf(key, "%s", wrong)
		return 0, false
	}
	return int(n), true
}

// numberInText is the number that v, text, holds exactly; v itself when
// it is anything else.
func numberInText(v json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(v, &s) != nil || isNull(v) || s == "" || strings.TrimSpace(s) != s || !json.Valid([]byte(s)) {
		return v
	}
	if c := s[0]; c != '-' && (c < '0' || c > '9') {
		return v
	}
	return json.RawMessage(s)
}

// Bool reads true or false. A value that is not one (null neither) is
// recorded with the message wrong; ok is false then and when key is
// absent.
func (t *RunTable) Bool(key, wrong string) (bool, bool) {
	v, ok := t.Raw(key)
	if !ok {
		return false, false
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil || isNull(v) {
		t.Errorf(key, "%s", wrong)
		return false, false
	}
	return b, true
}

// Float reads a number. A value that is not one is recorded with the
// message wrong; ok is false then and when key is absent.
func (t *RunTable) Float(key, wrong string) (float64, bool) {
	v, ok := t.Raw(key)
	if !ok {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || isNull(v) {
		t.Errorf(key, "%s", wrong)
		return 0, false
	}
	return f, true
}

// wholeNumber reads a JSON number with no fraction.
func wholeNumber(v json.RawMessage) (int64, bool) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var num any
	if err := d.Decode(&num); err != nil {
		return 0, false
	}
	s, ok := num.(json.Number)
	if !ok {
		return 0, false
	}
	if n, err := strconv.ParseInt(s.String(), 10, 64); err == nil {
		return n, true
	}
	f, err := s.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// Table reads a nested table, whose problems go to t's list. A value that
// is not a table is recorded with the message wrong; ok is false then and
// when key is absent.
func (t *RunTable) Table(key, wrong string) (*RunTable, bool) {
	v, ok := t.Raw(key)
	if !ok {
		return nil, false
	}
	m, ok := object(v)
	if !ok {
		t.Errorf(key, "%s", wrong)
		return nil, false
	}
	return t.child(t.at(key), m), true
}

// List reads a list, whose items are read with RunList's getters. A
// value that is not a list is recorded with the message wrong; ok is false
// then and when key is absent.
func (t *RunTable) List(key, wrong string) (*RunList, bool) {
	v, ok := t.Raw(key)
	if !ok {
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil || items == nil {
		t.Errorf(key, "%s", wrong)
		return nil, false
	}
	return &RunList{t: t, path: t.at(key), items: items}, true
}

// RunList reads the items of a list in a run table, at paths like
// run.nodes[2]; their problems go to the table's list.
type RunList struct {
	t     *RunTable
	path  string
	items []json.RawMessage
}

// Len is the number of items.
func (l *RunList) Len() int { return len(l.items) }

func (l *RunList) at(i int) string { return fmt.Sprintf("%s[%d]", l.path, i) }

// String reads item i as a string. Anything else is recorded with the
// message wrong, and ok is false.
func (l *RunList) String(i int, wrong string) (string, bool) {
	var s string
	if err := json.Unmarshal(l.items[i], &s); err != nil || isNull(l.items[i]) {
		l.t.ErrorAt(l.at(i), "%s", wrong)
		return "", false
	}
	return s, true
}

// Table reads item i as a table. Anything else is recorded with the
// message wrong, and ok is false.
func (l *RunList) Table(i int, wrong string) (*RunTable, bool) {
	m, ok := object(l.items[i])
	if !ok {
		l.t.ErrorAt(l.at(i), "%s", wrong)
		return nil, false
	}
	return l.t.child(l.at(i), m), true
}

func (t *RunTable) child(path string, m map[string]json.RawMessage) *RunTable {
	return &RunTable{path: path, m: m, read: map[string]bool{}, errs: t.errs}
}

// Describe names what the value at key is, for messages: text, a number,
// true/false, a table, a list, null, or nothing when key is absent.
func (t *RunTable) Describe(key string) string {
	s := bytes.TrimSpace(t.m[key])
	if len(s) == 0 {
		return "nothing"
	}
	switch s[0] {
	case '"':
		return "text"
	case '{':
		return "a table"
	case '[':
		return "a list"
	case 't', 'f':
		return "true/false"
	case 'n':
		return "null"
	}
	return "a number"
}

// Written is the value at key as JSON, for messages; "" when key is absent.
func (t *RunTable) Written(key string) string {
	return string(bytes.TrimSpace(t.m[key]))
}

// Done records each key of t that was not read, in sorted order, with the
// message unknown gives for it.
func (t *RunTable) Done(unknown func(key string) string) {
	for _, k := range t.Keys() {
		if !t.read[k] {
			t.Errorf(k, "%s", unknown(k))
		}
	}
}

// Err returns the problems recorded by t and the tables read from it, as
// FieldErrors in the order they were found, or nil when there are none.
func (t *RunTable) Err() error {
	if len(*t.errs) == 0 {
		return nil
	}
	return slices.Clone(*t.errs)
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }
