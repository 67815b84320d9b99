package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// CheckToolName says why name is not a good tool name, or nil.
func CheckToolName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%q is not a good tool name: it %s", name, nameRule)
	}
	return nil
}

// DecodeJSONTool reads a tool given as one JSON object of its fields
// ({"name", "description", "effect", "params": [...], "run": {...}}, the
// shape POST /api/v1/tools/check returns) into the values a tool file
// holds, ready for FormatTool: whole numbers become int64, others float64,
// and a key whose value is null is left out. A value TOML can't hold (null
// in a list, a whole number past int64) is an Error naming its field; JSON
// that is not one object is a plain error.
func DecodeJSONTool(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the tool is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("the tool must be one JSON object, and there is more after it")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the tool must be a JSON object of its fields: name, description, effect, params and run")
	}
	var errs Errors
	out := fromJSON("", m, &errs).(map[string]any)
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// fromJSON turns a value decoded with UseNumber into what go-toml decodes
// a tool file into.
func fromJSON(path string, v any, errs *Errors) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if x == nil {
				continue
			}
			out[k] = fromJSON(joinKey(path, k), x, errs)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			if x == nil {
				*errs = append(*errs, Error{Field: indexPath(path, i), Message: "null can't be written in TOML: leave the value out of the list"})
				continue
			}
			out[i] = fromJSON(indexPath(path, i), x, errs)
		}
		return out
	case json.Number:
		s := v.String()
		if !strings.ContainsAny(s, ".eE") {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				*errs = append(*errs, Error{Field: path, Message: fmt.Sprintf("%s is too large a whole number for TOML (it holds from %d to %d)", s, int64(math.MinInt64), int64(math.MaxInt64))})
			}
			return n
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			*errs = append(*errs, Error{Field: path, Message: fmt.Sprintf("%s is too large a number for TOML", s)})
		}
		return f
	}
	return v
}

// FormatTool writes a tool, given as the values of its file (as ParseTool's
// document or DecodeJSONTool gives them), as a tool file laid out the way
// people write one: the top-level keys (name, description, effect first),
// then each [[params]] table, then [run] with its keys (type first) and its
// nested tables ([[run.nodes]], [run.layout]). Tables of plain values are
// written inline (args = { path = "item_id" }), and so is everything within
// an array of tables. Strings holding a newline (a python tool's code) are
// written as multi-line strings.
func FormatTool(tool map[string]any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeTable(&b, nil, tool, false); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// keyOrder puts the keys people look for first, in every table.
var keyOrder = []string{"name", "id", "type", "kind", "description", "effect", "required", "options"}

// sectionOrder orders the sub-tables of a table; layout (the canvas's
// positions, which change nothing that runs) goes last.
var sectionOrder = []string{"params", "run", "nodes"}

// writeTable writes the keys of the table at path (its header already
// written), then its sub-tables. Within an array of tables (inArray) every
// value is written inline.
func writeTable(b *bytes.Buffer, path []string, m map[string]any, inArray bool) error {
	var sections []string
	for _, k := range ordered(m, keyOrder, nil) {
		v := m[k]
		if !inArray && (isSection(v, len(path) == 0) || isArrayOfTables(v)) {
			sections = append(sections, k)
			continue
		}
		val, err := encodeValue(v)
		if err != nil {
			return fmt.Errorf("%s can't be written in TOML: %w", strings.Join(append(slices.Clone(path), k), "."), err)
		}
		b.WriteString(encodeKey(k) + " = " + val + "\n")
	}
	sections = ordered(setOf(sections), sectionOrder, []string{"layout"})
	for _, k := range sections {
		sub := append(slices.Clone(path), k)
		if tables, ok := m[k].([]any); ok {
			for _, el := range tables {
				writeHeader(b, "[["+headerKey(sub)+"]]")
				if err := writeTable(b, sub, el.(map[string]any), true); err != nil {
					return err
				}
			}
			continue
		}
		writeHeader(b, "["+headerKey(sub)+"]")
		if err := writeTable(b, sub, m[k].(map[string]any), false); err != nil {
			return err
		}
	}
	return nil
}

func writeHeader(b *bytes.Buffer, header string) {
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	b.WriteString(header + "\n")
}

// isSection says whether v is written as a table of its own: every table
// at the top level, and below it the tables that hold tables or lists of
// tables (the others are written inline).
func isSection(v any, top bool) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if top {
		return true
	}
	for _, x := range m {
		switch x := x.(type) {
		case map[string]any:
			return true
		case []any:
			if hasTable(x) {
				return true
			}
		}
	}
	return false
}

func hasTable(l []any) bool {
	for _, x := range l {
		switch x := x.(type) {
		case map[string]any:
			return true
		case []any:
			if hasTable(x) {
				return true
			}
		}
	}
	return false
}

// isArrayOfTables says whether v is a non-empty list of tables only.
func isArrayOfTables(v any) bool {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return false
	}
	for _, x := range l {
		if _, ok := x.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// ordered lists the keys of m: those of first in that order, then the
// others sorted, then those of last.
func ordered[V any](m map[string]V, first, last []string) []string {
	var head, mid, tail []string
	for _, k := range first {
		if _, ok := m[k]; ok {
			head = append(head, k)
		}
	}
	for _, k := range last {
		if _, ok := m[k]; ok && !slices.Contains(first, k) {
			tail = append(tail, k)
		}
	}
	for k := range m {
		if !slices.Contains(first, k) && !slices.Contains(last, k) {
			mid = append(mid, k)
		}
	}
	sort.Strings(mid)
	return slices.Concat(head, mid, tail)
}

func setOf(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// headerKey is a table header's dotted key.
func headerKey(path []string) string {
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = encodeKey(k)
	}
	return strings.Join(parts, ".")
}

// encodeKey writes a key bare when it can be, else as a TOML basic string.
func encodeKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range k {
		switch {
		case r == '"' || r == '\\':
			b.WriteString("\\" + string(r))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// encodeValue writes one value inline with go-toml: a string holding a
// newline as a multi-line string, a table as an inline table.
func encodeValue(v any) (string, error) {
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	var err error
	if s, ok := v.(string); ok && strings.Contains(s, "\n") {
		err = enc.Encode(struct {
			V string `toml:"v,multiline"`
		}{s})
	} else {
		err = enc.Encode(struct {
			V any `toml:"v,inline"`
		}{v})
	}
	if err != nil {
		return "", err
	}
	out, ok := strings.CutPrefix(b.String(), "v = ")
	if !ok {
		return "", fmt.Errorf("go-toml wrote %q", b.String())
	}
	return strings.TrimSuffix(out, "\n"), nil
}
