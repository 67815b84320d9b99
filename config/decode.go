package config

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// decoder turns a document into typed values, collecting every problem it
// meets instead of stopping at the first.
type decoder struct {
	doc  *document
	errs Errors
}

func (d *decoder) addf(path, format string, args ...any) {
	d.errs.addf(d.doc.file, d.doc.lineAt(path), path, format, args...)
}

// table reads the keys of one TOML table. Every key read is marked; done
// reports the keys nobody asked for.
type table struct {
	d       *decoder
	path    string
	m       map[string]any
	read    []string
	skipped []string
}

// table returns a reader of the table at path. A value that is not a table is
// reported, and an empty table returned, so decoding carries on.
func (d *decoder) table(path string, v any) *table {
	t := &table{d: d, path: path}
	switch v := v.(type) {
	case nil:
		t.m = map[string]any{}
	case map[string]any:
		t.m = v
	default:
		d.addf(path, "must be a table, not %s", describe(v))
		t.m = map[string]any{}
	}
	return t
}

func (t *table) at(key string) string { return joinKey(t.path, key) }

// get returns the value of key and marks the key as known.
func (t *table) get(key string) (any, bool) {
	t.read = append(t.read, key)
	v, ok := t.m[key]
	return v, ok
}

// skip marks key as known without offering it as a suggestion: a kind's
// table, which is not the host's to list.
func (t *table) skip(key string) { t.skipped = append(t.skipped, key) }

// done reports every key that was not read, with the nearest known key as a
// suggestion.
func (t *table) done() {
	var unknown []string
	for k := range t.m {
		if !slices.Contains(t.read, k) && !slices.Contains(t.skipped, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		msg := fmt.Sprintf("unknown key %q", k)
		if s := suggest(k, t.read); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		} else if len(t.read) > 0 {
			msg += "; the keys allowed here are " + strings.Join(quoteAll(t.read), ", ")
		}
		t.d.errs.addf(t.d.doc.file, t.d.doc.lineAt(t.at(k)), t.path, "%s", msg)
	}
}

func (t *table) str(key string, dst *string) bool {
	v, ok := t.get(key)
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.d.addf(t.at(key), "must be a string, not %s", describe(v))
		return false
	}
	*dst = s
	return true
}

func (t *table) boolean(key string, dst *bool) bool {
	v, ok := t.get(key)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		t.d.addf(t.at(key), "must be true or false, not %s", describe(v))
		return false
	}
	*dst = b
	return true
}

// integer reads a whole number in [lo, hi].
func (t *table) integer(key string, dst *int64, lo, hi int64) bool {
	v, ok := t.get(key)
	if !ok {
		return false
	}
	n, ok := v.(int64)
	if !ok {
		if f, isFloat := v.(float64); isFloat && f == math.Trunc(f) && !math.IsInf(f, 0) {
			t.d.addf(t.at(key), "must be a whole number, not a decimal number (write %d, without the \".0\")", int64(f))
			return false
		}
		t.d.addf(t.at(key), "must be a whole number, not %s", describe(v))
		return false
	}
	if n < lo || n > hi {
		t.d.addf(t.at(key), "must be from %d to %d, not %d", lo, hi, n)
		return false
	}
	*dst = n
	return true
}

func (t *table) int(key string, dst *int, lo, hi int) bool {
	var n int64
	if !t.integer(key, &n, int64(lo), int64(hi)) {
		return false
	}
	*dst = int(n)
	return true
}

// list reads a list, reporting anything else.
func (t *table) list(key string) ([]any, bool) {
	v, ok := t.get(key)
	if !ok {
		return nil, false
	}
	l, ok := v.([]any)
	if !ok {
		t.d.addf(t.at(key), "must be a list, not %s", describe(v))
		return nil, false
	}
	return l, true
}

// tables reads an array of tables ([[key]]), explaining the double brackets
// to someone who wrote [key].
func (t *table) tables(key string) ([]any, bool) {
	v, ok := t.get(key)
	if !ok {
		return nil, false
	}
	switch v := v.(type) {
	case []any:
		return v, true
	case map[string]any:
		t.d.addf(t.at(key), "must be a list of tables: write [[%s]], with two brackets, once for each", headerName(t.at(key)))
	default:
		t.d.addf(t.at(key), "must be a list of tables ([[%s]]), not %s", headerName(t.at(key)), describe(v))
	}
	return nil, false
}

// strings reads a list of strings; every element that is not a string is
// reported.
func (t *table) strings(key string, dst *[]string) bool {
	l, ok := t.list(key)
	if !ok {
		return false
	}
	out := make([]string, 0, len(l))
	good := true
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			t.d.addf(indexPath(t.at(key), i), "must be a string, not %s", describe(v))
			good = false
			continue
		}
		out = append(out, s)
	}
	if good {
		*dst = out
	}
	return good
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// headerName turns a path into the name of a table header: tool[1].params
// becomes tool.params.
func headerName(path string) string { return indexRE.ReplaceAllString(path, "") }

// describe names the type of a decoded TOML value in the words of a config
// file's author.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return "a string"
	case int64:
		return "a whole number"
	case float64:
		return "a decimal number"
	case bool:
		return "true or false"
	case []any:
		return "a list"
	case map[string]any:
		return "a table"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "a date or time"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// suggest returns the known key closest to an unknown one, or "" when none is
// close: one is a prefix of the other, or they are a few edits apart.
func suggest(key string, known []string) string {
	best, bestDist := "", 0
	for _, k := range known {
		d := editDistance(key, k)
		if len(key) >= 3 && (strings.HasPrefix(k, key) || strings.HasPrefix(key, k)) {
			d = min(d, 2)
		}
		if d > max(2, len(key)/3) {
			continue
		}
		if best == "" || d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
