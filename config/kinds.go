package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// KindTable is the settings table handed to a kind's Configure: the kind's
// table as written (a JSON object, "{}" when the file has none), with every
// string that schema (the kind's config schema, JSON Schema) marks
// "format": "path" made absolute against the config file's folder. The
// kind fills in its own defaults and checks every value.
func (c *Config) KindTable(kind string, schema json.RawMessage) (json.RawMessage, error) {
	t := c.Kinds[kind]
	if len(t) == 0 {
		return json.RawMessage("{}"), nil
	}
	var s schemaNode
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &s); err != nil {
			return nil, fmt.Errorf("the %s kind's config schema is not JSON Schema: %w", kind, err)
		}
	}
	dir := "."
	if c.File != "" {
		dir = filepath.Dir(c.File)
	}
	out, err := json.Marshal(resolvePaths(t, &s, dir))
	if err != nil {
		return nil, fmt.Errorf("the [%s] table can't be handed to its kind: %w", c.tableOf(kind), err)
	}
	return out, nil
}

// schemaNode is the part of a JSON Schema that KindTable reads: object
// properties, array items, and the path marker.
type schemaNode struct {
	Format     string                 `json:"format"`
	Properties map[string]*schemaNode `json:"properties"`
	Items      *schemaNode            `json:"items"`
}

// resolvePaths returns v with the strings s marks as paths made absolute
// against dir. An empty string is left for the kind to refuse.
func resolvePaths(v any, s *schemaNode, dir string) any {
	if s == nil {
		return v
	}
	switch v := v.(type) {
	case string:
		if s.Format == "path" && v != "" {
			return resolve(dir, v)
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = resolvePaths(e, s.Properties[k], dir)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = resolvePaths(e, s.Items, dir)
		}
		return out
	}
	return v
}

// tableOf is where the kind's table is in the file.
func (c *Config) tableOf(kind string) string {
	if at := c.kindAt[kind]; at != "" {
		return at
	}
	return kind
}

// KindError places a problem a kind found in its table at the file and
// line of the value. path is the kind's dotted path of the value, with or
// without the kind's name in front ("python.max_memory_mb" or
// "max_memory_mb"); for a [kinds.NAME] table it is read below that table.
func (c *Config) KindError(kind, path, message string) Error {
	table := c.tableOf(kind)
	field := table
	switch {
	case path == kind:
	case strings.HasPrefix(path, kind+".") || strings.HasPrefix(path, kind+"["):
		field = table + path[len(kind):]
	case path != "":
		field = table + "." + path
	}
	e := Error{File: c.File, Field: field, Message: message}
	if c.doc != nil {
		e.File, e.Line = c.doc.file, c.doc.lineAt(field)
	}
	return e
}

// StrayKindTables reports the kind tables of the file that no running kind
// takes. running are the kinds whose plugins run; failed those whose
// plugins did not start, whose tables are left without a word (the plugin's
// own problem says why). A table naming no kind at all is an error naming
// the kinds there are.
func (c *Config) StrayKindTables(running, failed []string) Errors {
	var errs Errors
	for _, k := range slices.Sorted(maps.Keys(c.Kinds)) {
		if slices.Contains(running, k) || slices.Contains(failed, k) {
			continue
		}
		table := c.tableOf(k)
		kinds := append(slices.Clone(running), failed...)
		slices.Sort(kinds)
		msg := fmt.Sprintf("[%s] names no kind of this host: ", table)
		if len(kinds) == 0 {
			msg += "no kind's plugin was found in " + c.Plugins.Dir
		} else {
			msg += "the kinds are " + strings.Join(kinds, ", ")
		}
		if s := suggest(k, append(kinds, hostKeys...)); s != "" {
			msg += fmt.Sprintf(" (did you mean [%s]?)", s)
		} else {
			msg += "; remove the table, or add the kind's plugin to " + c.Plugins.Dir
		}
		e := Error{File: c.File, Field: table, Message: msg}
		if c.doc != nil {
			e.File, e.Line = c.doc.file, c.doc.lineAt(table)
		}
		errs = append(errs, e)
	}
	return errs
}
