package sdktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
)

// CheckConfigSchema checks that a kind's config schema (sdk.Info.ConfigSchema) and the code that
// checks its table agree, so that a setting is added in one place and its schema can't drift:
// every setting's default, minimum, maximum and enum values are taken and one past each bound is
// refused with a FieldError at "<table>.<setting>" (a value refused only at another setting, by a
// rule between the two, counts as taken); an unknown setting is refused at its path.
// Nested "object" settings (a [python.pool]) are checked the same way. table is the kind's
// table name ("python"); parse checks a table given as JSON, as Configure would, without
// needing the machine (no sandbox started).
func CheckConfigSchema(t testing.TB, table string, schema json.RawMessage, parse func(json.RawMessage) error) {
	t.Helper()
	var s schemaNode
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("the config schema is not JSON: %v", err)
	}
	if len(s.Properties) == 0 {
		t.Fatalf("the config schema lists no settings")
	}
	checkNode(t, table, nil, &s, parse)
}

type schemaNode struct {
	Type       string                 `json:"type"`
	Default    json.RawMessage        `json:"default"`
	Minimum    *int64                 `json:"minimum"`
	Maximum    *int64                 `json:"maximum"`
	Enum       []json.RawMessage      `json:"enum"`
	Properties map[string]*schemaNode `json:"properties"`
}

// checkNode checks the settings of s, a table at path below the kind's table.
func checkNode(t testing.TB, table string, path []string, s *schemaNode, parse func(json.RawMessage) error) {
	t.Helper()
	at := func(key string) string { return strings.Join(append(append([]string{table}, path...), key), ".") }
	// wrap puts one value at path.key in a table of its own.
	wrap := func(key string, v json.RawMessage) json.RawMessage {
		out := fmt.Sprintf("{%q: %s}", key, v)
		for i := len(path) - 1; i >= 0; i-- {
			out = fmt.Sprintf("{%q: %s}", path[i], out)
		}
		return json.RawMessage(out)
	}
	take := func(key string, v json.RawMessage, why string) {
		t.Helper()
		// A refusal at another setting (a pool size over a lower max) is a rule between
		// settings, not this setting's bound.
		err := parse(wrap(key, v))
		var fe sdk.FieldErrors
		if err != nil && (!errors.As(err, &fe) || slices.ContainsFunc(fe, func(e sdk.FieldError) bool { return e.Path == at(key) })) {
			t.Errorf("%s = %s (%s) is refused: %v", at(key), v, why, err)
		}
	}
	refuse := func(key string, v json.RawMessage, why string) {
		t.Helper()
		err := parse(wrap(key, v))
		var fe sdk.FieldErrors
		if !errors.As(err, &fe) || !slices.ContainsFunc(fe, func(e sdk.FieldError) bool { return e.Path == at(key) }) {
			t.Errorf("%s = %s (%s) is not refused at %s: %v", at(key), v, why, at(key), err)
		}
	}
	for _, key := range sortedKeys(s.Properties) {
		p := s.Properties[key]
		if p.Type == "object" && len(p.Properties) > 0 {
			checkNode(t, table, append(slices.Clone(path), key), p, parse)
			continue
		}
		if len(p.Default) > 0 {
			take(key, p.Default, "its default")
		}
		for _, v := range p.Enum {
			take(key, v, "one of its enum")
		}
		if len(p.Enum) > 0 {
			refuse(key, json.RawMessage(`"not-one-of-the-enum"`), "not one of its enum")
		}
		if p.Minimum != nil {
			take(key, json.RawMessage(fmt.Sprint(*p.Minimum)), "its minimum")
			refuse(key, json.RawMessage(fmt.Sprint(*p.Minimum-1)), "under its minimum")
		}
		if p.Maximum != nil {
			take(key, json.RawMessage(fmt.Sprint(*p.Maximum)), "its maximum")
			refuse(key, json.RawMessage(fmt.Sprint(*p.Maximum+1)), "over its maximum")
		}
	}
	refuse("no_such_setting", json.RawMessage("1"), "not in the schema")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
