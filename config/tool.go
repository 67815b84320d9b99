package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Tool is one tool as written in a tool file or a [[tool]] table of the main
// config. Only its shape is checked here; its run table is the kind plugin's
// to check.
type Tool struct {
	Name        string
	Description string
	Effect      string // "read" (the default) or "change"
	Params      []Param
	// Run is the [run] table as decoded (string, int64, float64, bool, time
	// values, []any, map[string]any), "type" included.
	Run map[string]any
	// Source is "file:line" of the tool's start: line 1 for a tool file, the
	// [[tool]] line for a table in the main config.
	Source string
	File   string
	Line   int
	// RunLine is the line of the [run] table (or of the run key), so that a
	// plugin's complaint about run.X can be given a line when X has none.
	RunLine int
	// FieldLines maps a dotted path within the tool ("run.url",
	// "params[0].kind") to its line.
	FieldLines map[string]int
}

// Kind is the name of the kind that runs the tool: its run table's type.
func (t Tool) Kind() string {
	s, _ := t.Run["type"].(string)
	return s
}

// LineOf returns the line of a field path within the tool ("run.url",
// "params[1]"), or of the nearest enclosing table that has one, or the tool's
// own line.
func (t Tool) LineOf(field string) int {
	for {
		if l, ok := t.FieldLines[field]; ok {
			return l
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			return t.Line
		}
		field = field[:i]
	}
}

// ErrorAt makes an Error about a field of the tool, at that field's line. The
// host uses it to place the errors a kind's plugin reports.
func (t Tool) ErrorAt(field, message string) Error {
	return Error{File: t.File, Line: t.LineOf(field), Field: field, Message: message}
}

// Param is one parameter of a tool.
type Param struct {
	Name        string
	Type        string // its value's type (`kind` in TOML): text, number, integer, bool, json or list
	Description string
	Required    bool
	// Options are the values allowed, written as strings; only for text,
	// number and integer params. Nil when any value goes.
	Options []string
	// Items is what a list param holds: one of ItemTypes, "text" when the
	// file does not say. "" for the other kinds.
	Items string
}

// paramTypes are the types a parameter's value may have (its `kind` in TOML).
var paramTypes = []string{"text", "number", "integer", "bool", "json", "list"}

// ItemTypes are the types a list param's items may have: the scalar
// types, or json for any JSON value.
var ItemTypes = []string{"text", "number", "integer", "bool", "json"}

// DefaultItems is what a list param holds when its items are not given.
const DefaultItems = "text"

// MaxInteger is the largest whole number an integer param takes, and
// -MaxInteger the smallest: 2^53-1, the range every JSON parser holds
// exactly (a float64's whole numbers; RFC 8259 section 6, RFC 7493
// section 2.2).
const MaxInteger = 1<<53 - 1

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

const nameRule = "must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores"

// ParseTool reads one tool file (a file in tools_dir). file is used in error
// messages. The error, if any, is Errors.
func ParseTool(file string, data []byte) (Tool, error) {
	doc, errs := parseDocument(file, data)
	if errs != nil {
		return Tool{}, errs
	}
	d := &decoder{doc: doc}
	t := d.tool("", doc.root)
	if len(d.errs) > 0 {
		return Tool{}, d.errs.sorted()
	}
	return t, nil
}

// LoadTools reads every *.toml file in dir, in name order. Files with
// problems are reported and left out; the good ones are returned. Two files
// giving the same name is a problem with the second.
func LoadTools(dir string) ([]Tool, Errors) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, Errors{{File: dir, Message: "can't read the tools folder: " + ioReason(err)}}
	}
	var tools []Tool
	var errs Errors
	byName := map[string]Tool{}
	for _, e := range entries { // os.ReadDir sorts by name
		// Names starting with a dot are editors' lock and backup files.
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".toml") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, Error{File: file, Message: "can't read the tool file: " + ioReason(err)})
			continue
		}
		t, err := ParseTool(file, data)
		if err != nil {
			var es Errors
			if errors.As(err, &es) {
				errs = append(errs, es...)
			}
			continue
		}
		tools = addUnique(tools, byName, t, &errs)
	}
	if len(errs) == 0 {
		return tools, nil
	}
	return tools, errs.sorted()
}

// addUnique appends t unless its name is taken, which it reports instead.
func addUnique(tools []Tool, byName map[string]Tool, t Tool, errs *Errors) []Tool {
	if prev, dup := byName[t.Name]; dup {
		*errs = append(*errs, t.ErrorAt("name", fmt.Sprintf("a tool named %q is already defined at %s", t.Name, prev.Source)))
		return tools
	}
	byName[t.Name] = t
	return append(tools, t)
}

// AllTools returns the tools of the config's [[tool]] tables followed by
// those of tools_dir, leaving out (and reporting) bad tool files and tools
// whose name is already taken. The tools of the main config were checked by
// Load.
func (c *Config) AllTools() ([]Tool, Errors) {
	tools := slices.Clone(c.Tools)
	byName := map[string]Tool{}
	for _, t := range tools {
		byName[t.Name] = t
	}
	fromDir, errs := LoadTools(c.ToolsDir)
	for _, t := range fromDir {
		tools = addUnique(tools, byName, t, &errs)
	}
	if len(errs) == 0 {
		return tools, nil
	}
	return tools, errs.sorted()
}

// tool decodes the tool table at path ("" for a tool file, "tool[2]" in the
// main config).
func (d *decoder) tool(path string, v any) Tool {
	if _, ok := v.(map[string]any); !ok {
		d.addf(path, "must be a table, not %s", describe(v))
		return Tool{}
	}
	tb := d.table(path, v)
	t := Tool{File: d.doc.file, Line: max(1, d.doc.lineAt(path)), Effect: "read"}
	if path == "" {
		t.Line = 1
	}
	t.Source = t.File + ":" + strconv.Itoa(t.Line)

	if tb.str("name", &t.Name) {
		if !nameRE.MatchString(t.Name) {
			d.addf(tb.at("name"), "%q is not a good tool name: it %s", t.Name, nameRule)
		}
	} else if _, ok := tb.m["name"]; !ok {
		d.addf(path, "the tool has no name: add name = \"...\"")
	}
	if tb.str("description", &t.Description) {
		if strings.TrimSpace(t.Description) == "" {
			d.addf(tb.at("description"), "must not be empty: say what the tool does, for the model and for people")
		}
	} else if _, ok := tb.m["description"]; !ok {
		d.addf(path, "the tool has no description: add description = \"...\" saying what it does")
	}
	if tb.str("effect", &t.Effect) && t.Effect != "read" && t.Effect != "change" {
		d.addf(tb.at("effect"), "must be \"read\" or \"change\", not %q", t.Effect)
	}

	if l, ok := tb.tables("params"); ok {
		t.Params = d.toolParams(tb.at("params"), l)
	}
	d.toolRun(tb, path, &t)
	if _, ok := tb.m["tool"]; ok && path == "" {
		tb.get("tool")
		d.addf("tool", "a tool file holds one tool, written at its top level (name = ..., [run]); [[tool]] tables belong in toolhost.toml")
	}
	tb.done()

	t.FieldLines = d.toolFieldLines(path)
	return t
}

// toolParams decodes a tool's [[params]] tables at path, refusing a second
// parameter of the same name.
func (d *decoder) toolParams(path string, l []any) []Param {
	var params []Param
	seen := map[string]int{}
	for i, pv := range l {
		pp := indexPath(path, i)
		p := d.param(pp, pv)
		if p.Name == "" {
			continue
		}
		if j, dup := seen[p.Name]; dup {
			d.addf(joinKey(pp, "name"), "%q is already the name of params[%d]", p.Name, j)
			continue
		}
		seen[p.Name] = i
		params = append(params, p)
	}
	return params
}

// toolRun reads the [run] table of the tool at path into t: kept as
// written for its kind, with only its type checked here.
func (d *decoder) toolRun(tb *table, path string, t *Tool) {
	if rv, ok := tb.get("run"); !ok {
		d.addf(path, "the tool has no [run] table: add one, with type = \"http\" (or the tool's kind)")
	} else if run, ok := rv.(map[string]any); !ok {
		d.addf(tb.at("run"), "must be a table, not %s", describe(rv))
	} else {
		t.Run = run
		t.RunLine = d.doc.lineAt(tb.at("run"))
		switch ty, ok := run["type"]; {
		case !ok:
			d.addf(tb.at("run"), "the run table has no type: add type = \"http\" (or the tool's kind)")
		default:
			s, isStr := ty.(string)
			switch {
			case !isStr:
				d.addf(joinKey(tb.at("run"), "type"), "must be a string, not %s", describe(ty))
			case !nameRE.MatchString(s):
				d.addf(joinKey(tb.at("run"), "type"), "%q is not a kind name: it %s", s, nameRule)
			}
		}
	}
}

// toolFieldLines maps each key of the tool at path, relative to the tool's
// table ("run.url", "params[0].name"), to its line in the file.
func (d *decoder) toolFieldLines(path string) map[string]int {
	lines := map[string]int{}
	for p, l := range d.doc.lines {
		switch {
		case path == "":
			lines[p] = l
		case strings.HasPrefix(p, path+"."):
			lines[p[len(path)+1:]] = l
		}
	}
	return lines
}

func (d *decoder) param(path string, v any) Param {
	if _, ok := v.(map[string]any); !ok {
		d.addf(path, "must be a table, not %s", describe(v))
		return Param{}
	}
	tb := d.table(path, v)
	var p Param
	if tb.str("name", &p.Name) {
		if !nameRE.MatchString(p.Name) {
			d.addf(tb.at("name"), "%q is not a good parameter name: it %s", p.Name, nameRule)
		}
	} else if _, ok := tb.m["name"]; !ok {
		d.addf(path, "the parameter has no name: add name = \"...\"")
	}
	if tb.str("kind", &p.Type) {
		if !slices.Contains(paramTypes, p.Type) {
			d.addf(tb.at("kind"), "must be one of %s, not %q", strings.Join(paramTypes, ", "), p.Type)
			p.Type = ""
		}
	} else if _, ok := tb.m["kind"]; !ok {
		d.addf(path, "the parameter has no kind: add kind = \"text\" (or %s)", strings.Join(paramTypes[1:], ", "))
	}
	tb.str("description", &p.Description)
	tb.boolean("required", &p.Required)
	if l, ok := tb.list("options"); ok {
		p.Options = d.options(tb.at("options"), p.Type, l)
	}
	if tb.str("items", &p.Items) {
		switch {
		case p.Type != "list" && p.Type != "":
			d.addf(tb.at("items"), "only list parameters say what they hold, not %s ones: leave items out", p.Type)
			p.Items = ""
		case !slices.Contains(ItemTypes, p.Items):
			d.addf(tb.at("items"), "must be one of %s, not %q", strings.Join(ItemTypes, ", "), p.Items)
			p.Items = ""
		}
	} else if p.Type == "list" {
		if _, given := tb.m["items"]; !given {
			p.Items = DefaultItems
		}
	}
	tb.done()
	return p
}

// options checks a param's options against its kind. Numbers may be written
// as TOML numbers or as strings; they are kept as strings.
func (d *decoder) options(path, kind string, l []any) []string {
	switch kind {
	case "":
		return nil // the kind is already reported
	case "text", "number", "integer":
	default:
		d.addf(path, "only text, number and integer parameters can have options, not %s ones", kind)
		return nil
	}
	if len(l) == 0 {
		d.addf(path, "must list at least one value; leave options out to allow any value")
		return nil
	}
	out := []string{}
	for i, v := range l {
		ip := indexPath(path, i)
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case int64:
			if kind == "text" {
				d.addf(ip, "must be a string, not a whole number (write %q)", strconv.FormatInt(v, 10))
				continue
			}
			s = strconv.FormatInt(v, 10)
		case float64:
			if kind != "number" {
				d.addf(ip, "must be %s, not a decimal number", map[string]string{"text": "a string", "integer": "a whole number"}[kind])
				continue
			}
			s = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			d.addf(ip, "must be a string, not %s", describe(v))
			continue
		}
		switch kind {
		case "integer":
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				d.addf(ip, "%q is not a whole number, and the parameter is an integer", s)
				continue
			}
			if n < -MaxInteger || n > MaxInteger {
				d.addf(ip, "%s is out of the range an integer parameter takes, -%d to %d", s, int64(MaxInteger), int64(MaxInteger))
				continue
			}
		case "number":
			if f, err := strconv.ParseFloat(s, 64); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				d.addf(ip, "%q is not a number, and the parameter is a number", s)
				continue
			}
		}
		if slices.Contains(out, s) {
			d.addf(ip, "%q is listed twice", s)
			continue
		}
		out = append(out, s)
	}
	return out
}

// ioReason says why a file could not be read, without repeating its path.
func ioReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "it does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	return err.Error()
}
