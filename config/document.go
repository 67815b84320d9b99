package config

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Why go-toml/v2 and not BurntSushi/toml: go-toml's Unmarshal checks the whole
// document (syntax, keys defined twice, tables reopened) and reports the line
// of the first problem, and its unstable parser gives the byte range of every
// key, from which document.lines is built. That gives a line for every value,
// so every later problem (unknown key, wrong type, bad value) can be reported
// at once, each at its line. BurntSushi's MetaData has key positions too
// (v1.4+), but go-toml is already in go.mod and its parser is the one the
// library decodes with, so the positions can't disagree with the values.

// document is one parsed TOML file: its values as go-toml decodes them into
// map[string]any (string, int64, float64, bool, time values, []any,
// map[string]any) and the line of every value, by path.
type document struct {
	file string
	root map[string]any
	// lines maps a path ("http.timeout_seconds", "tool[2].params[0].kind") to
	// the line where that value, table or array element starts.
	lines map[string]int
}

// parseDocument parses data. A TOML syntax error is returned as one Error at
// its line.
func parseDocument(file string, data []byte) (*document, Errors) {
	var root map[string]any
	if err := toml.Unmarshal(data, &root); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return nil, Errors{{File: file, Line: line, Column: col,
				Message: "this is not valid TOML: " + strings.TrimPrefix(de.Error(), "toml: ")}}
		}
		return nil, Errors{{File: file, Message: "this is not valid TOML: " + strings.TrimPrefix(err.Error(), "toml: ")}}
	}
	if root == nil {
		root = map[string]any{}
	}
	return &document{file: file, root: root, lines: indexLines(data)}, nil
}

// lineAt finds the line of a path, or of the nearest table holding it when the
// path itself has no line (a missing key is reported at its table).
func (d *document) lineAt(path string) int {
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
}

// indexLines walks the document with go-toml's parser and records the line of
// every key, table header and array element. The document has already been
// checked by toml.Unmarshal, so a parse error here can't happen; if it did,
// the lines found so far are kept.
func indexLines(data []byte) map[string]int {
	var p unstable.Parser
	p.Reset(data)
	newlines := []int{}
	for i, c := range data {
		if c == '\n' {
			newlines = append(newlines, i)
		}
	}
	lineOf := func(r unstable.Range) int {
		return sort.SearchInts(newlines, int(r.Offset)) + 1
	}
	ix := &indexer{lines: map[string]int{}, lineOf: lineOf}
	counts := map[string]int{} // array-of-tables path -> elements so far
	prefix := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			path := ""
			it := e.Key()
			for it.Next() {
				k := it.Node()
				line := lineOf(k.Raw)
				path = joinKey(path, string(k.Data))
				ix.set(path, line)
				if it.IsLast() && e.Kind == unstable.ArrayTable {
					n := counts[path]
					counts[path] = n + 1
					path = indexPath(path, n)
					ix.set(path, line)
				} else if n, ok := counts[path]; ok {
					path = indexPath(path, n-1)
				}
			}
			prefix = path
		case unstable.KeyValue:
			ix.keyValue(prefix, e)
		}
	}
	return ix.lines
}

type indexer struct {
	lines  map[string]int
	lineOf func(unstable.Range) int
}

func (ix *indexer) set(path string, line int) {
	if _, ok := ix.lines[path]; !ok {
		ix.lines[path] = line
	}
}

func (ix *indexer) keyValue(prefix string, kv *unstable.Node) {
	path, line := prefix, 0
	it := kv.Key()
	for it.Next() {
		k := it.Node()
		line = ix.lineOf(k.Raw)
		path = joinKey(path, string(k.Data))
		ix.set(path, line)
	}
	ix.value(path, kv.Value(), line)
}

func (ix *indexer) value(path string, v *unstable.Node, line int) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				ix.keyValue(path, c)
			}
		}
	case unstable.Array:
		i := 0
		it := v.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			l := line
			if c.Raw.Length > 0 {
				l = ix.lineOf(c.Raw)
			}
			p := indexPath(path, i)
			ix.set(p, l)
			ix.value(p, c, l)
			i++
		}
	}
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinKey adds one key to a dotted path, quoting it when it is not a bare
// TOML key, so that paths read as the user would write them.
func joinKey(path, key string) string {
	if !bareKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}
