package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

const graphJSON = `{
  "name": "summarise_item",
  "description": "Fetch an item and ask the model to summarise it.",
  "effect": "read",
  "params": [{"name": "id", "kind": "text", "required": true, "description": null}],
  "run": {
    "type": "graph",
    "nodes": [
      {"id": "item_id", "type": "arg", "param": "id"},
      {"id": "fetch", "type": "call_tool", "tool": "get_json", "args": {"path": "item_id"}},
      {"id": "ask", "type": "template", "text": "Summarise this in one line: {{fetch}}"},
      {"id": "limit", "type": "const", "value": [{"a": 1}, {"b": [1.5, 2]}]},
      {"id": "out", "type": "return", "value": "ask"}
    ],
    "layout": {"item_id": {"x": 40, "y": 80}, "fetch": {"x": 240.5, "y": 80}}
  }
}`

const graphTOML = `name = 'summarise_item'
description = 'Fetch an item and ask the model to summarise it.'
effect = 'read'

[[params]]
name = 'id'
kind = 'text'
required = true

[run]
type = 'graph'

[[run.nodes]]
id = 'item_id'
type = 'arg'
param = 'id'

[[run.nodes]]
id = 'fetch'
type = 'call_tool'
args = {path = 'item_id'}
tool = 'get_json'

[[run.nodes]]
id = 'ask'
type = 'template'
text = 'Summarise this in one line: {{fetch}}'

[[run.nodes]]
id = 'limit'
type = 'const'
value = [{a = 1}, {b = [1.5, 2]}]

[[run.nodes]]
id = 'out'
type = 'return'
value = 'ask'

[run.layout]
fetch = {x = 240.5, y = 80}
item_id = {x = 40, y = 80}
`

// TestFormatToolLaysOutAGraph: a graph tool given as JSON is written as
// people write tool files (top-level keys, [[params]], [run],
// [[run.nodes]], [run.layout]) and reads back as the same values, whole
// numbers as integers.
func TestFormatToolLaysOutAGraph(t *testing.T) {
	m, err := DecodeJSONTool([]byte(graphJSON))
	if err != nil {
		t.Fatal(err)
	}
	out, err := FormatTool(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != graphTOML {
		t.Fatalf("FormatTool wrote:\n%s\nwant:\n%s", out, graphTOML)
	}
	tool, err := ParseTool("t.toml", out)
	if err != nil {
		t.Fatalf("the written tool does not parse: %v", err)
	}
	if !reflect.DeepEqual(tool.Run, m["run"]) {
		t.Errorf("run read back:\n%#v\nwant:\n%#v", tool.Run, m["run"])
	}
	if tool.Name != "summarise_item" || len(tool.Params) != 1 || !tool.Params[0].Required {
		t.Errorf("read back: %+v", tool)
	}
	x := tool.Run["layout"].(map[string]any)["item_id"].(map[string]any)["x"]
	if _, ok := x.(int64); !ok {
		t.Errorf("layout x read back as %T, want int64", x)
	}
}

// TestFormatToolRoundTripsOddValues: code with quotes, backslashes and
// triple quotes, keys that need quoting, empty tables and lists, and every
// example tool read back as written.
func TestFormatToolRoundTripsOddValues(t *testing.T) {
	code := "def run(text):\n    s = \"\"\"a '''b''' \\n c\"\"\"\n    return {\"w\\\\\": len(text.split())}\n"
	docs := []map[string]any{{
		"name": "odd", "description": "Odd.", "effect": "change",
		"run": map[string]any{
			"type": "python", "code": code, "seconds": int64(10),
			"headers":  map[string]any{"Content-Type": "a", "x.y": "dotted", "q\"uote\n": "nl", "": "empty", "ünï": "u"},
			"empty":    map[string]any{},
			"list":     []any{},
			"deep":     map[string]any{"a": map[string]any{"b": map[string]any{"c": true}}},
			"mixed":    []any{int64(1), "two", []any{3.5}},
			"with.dot": map[string]any{"k": map[string]any{"v": int64(1)}},
		},
	}}
	files, _ := filepath.Glob("../examples/tools/*.toml")
	if len(files) == 0 {
		t.Fatal("no example tools found")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := toml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m)
	}
	for _, doc := range docs {
		out, err := FormatTool(doc)
		if err != nil {
			t.Fatalf("%s: %v", doc["name"], err)
		}
		var back map[string]any
		if err := toml.Unmarshal(out, &back); err != nil {
			t.Fatalf("%s: the written tool is not TOML: %v\n%s", doc["name"], err, out)
		}
		if !reflect.DeepEqual(back, doc) {
			t.Errorf("%s read back:\n%#v\nwant:\n%#v\nfrom:\n%s", doc["name"], back, doc, out)
		}
		again, _ := FormatTool(back)
		if string(again) != string(out) {
			t.Errorf("%s: written twice, it differs:\n%s\n---\n%s", doc["name"], out, again)
		}
		if doc["name"] == "odd" && !strings.Contains(string(out), "code = \"\"\"\ndef run(text):\n") {
			t.Errorf("the code is not written as a multi-line string:\n%s", out)
		}
	}
}

// TestDecodeJSONToolRefusesWhatTOMLCantHold: null in a list and a whole
// number past int64 are refused naming their field; JSON that is not one
// object is refused with a sentence.
func TestDecodeJSONToolRefusesWhatTOMLCantHold(t *testing.T) {
	_, err := DecodeJSONTool([]byte(`{"name":"x","run":{"type":"http","l":[1,null],"n":123456789012345678901}}`))
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("err = %v; want two Errors", err)
	}
	fields := map[string]string{}
	for _, e := range es {
		fields[e.Field] = e.Message
	}
	if !strings.Contains(fields["run.l[1]"], "null can't be written") || !strings.Contains(fields["run.n"], "too large a whole number") {
		t.Errorf("errors: %v", es)
	}
	for _, body := range []string{`[1]`, `{"name":"x"} {}`, `{"name":`, `"x"`} {
		if _, err := DecodeJSONTool([]byte(body)); err == nil || errors.As(err, &es) {
			t.Errorf("%s: err = %v; want a sentence", body, err)
		}
	}
}

func TestCheckToolName(t *testing.T) {
	for name, ok := range map[string]bool{"get_json": true, "a": true, "../x": false, "..": false, "A": false, "x.toml": false, "": false, strings.Repeat("a", 42): false} {
		if err := CheckToolName(name); (err == nil) != ok {
			t.Errorf("CheckToolName(%q) = %v", name, err)
		}
	}
}
