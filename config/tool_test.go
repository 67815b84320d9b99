package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const goodTool = `name = "get_json"            # ^[a-z][a-z0-9_]{0,40}$
description = "Fetch a JSON document."
effect = "read"

[[params]]
name = "path"
kind = "text"
required = true
description = "Where the document is."

[[params]]
name = "format"
kind = "integer"
options = [1, "2"]

[run]
type = "http"
method = "GET"
url = "http://127.0.0.1:9999/{{path}}"
headers = { Accept = "application/json" }
`

func TestParseToolRoundTrip(t *testing.T) {
	tool, err := ParseTool("tools/get_json.toml", []byte(goodTool))
	if err != nil {
		t.Fatal(err)
	}
	want := Tool{
		Name:        "get_json",
		Description: "Fetch a JSON document.",
		Effect:      "read",
		Params: []Param{
			{Name: "path", Type: "text", Required: true, Description: "Where the document is."},
			{Name: "format", Type: "integer", Options: []string{"1", "2"}},
		},
		Run: map[string]any{
			"type": "http", "method": "GET", "url": "http://127.0.0.1:9999/{{path}}",
			"headers": map[string]any{"Accept": "application/json"},
		},
		Source:  "tools/get_json.toml:1",
		File:    "tools/get_json.toml",
		Line:    1,
		RunLine: 16,
		FieldLines: map[string]int{
			"name": 1, "description": 2, "effect": 3,
			"params": 5, "params[0]": 5, "params[0].name": 6, "params[0].kind": 7, "params[0].required": 8, "params[0].description": 9,
			"params[1]": 11, "params[1].name": 12, "params[1].kind": 13, "params[1].options": 14, "params[1].options[0]": 14, "params[1].options[1]": 14,
			"run": 16, "run.type": 17, "run.method": 18, "run.url": 19, "run.headers": 20, "run.headers.Accept": 20,
		},
	}
	if !reflect.DeepEqual(tool, want) {
		t.Errorf("got  %#v\nwant %#v", tool, want)
	}
	if tool.Kind() != "http" {
		t.Errorf("Kind() = %q", tool.Kind())
	}
}

func TestParseToolErrors(t *testing.T) {
	const run = "[run]\ntype = \"http\"\n"
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"syntax", "name = \"a\"\ndescription = \"x\" extra\n", `t.toml:2: this is not valid TOML: expected newline but got U+0065 'e'`},
		{"empty file", "", "t.toml: the tool has no name: add name = \"...\"\n" +
			"t.toml: the tool has no description: add description = \"...\" saying what it does\n" +
			"t.toml: the tool has no [run] table: add one, with type = \"http\" (or the tool's kind)"},
		{"bad name", "name = \"Get-JSON\"\ndescription = \"x\"\n" + run, `t.toml:1: name: "Get-JSON" is not a good tool name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores`},
		{"long name", "name = \"a234567890123456789012345678901234567890xy\"\ndescription = \"x\"\n" + run, `t.toml:1: name: "a234567890123456789012345678901234567890xy" is not a good tool name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores`},
		{"name type", "name = 3\ndescription = \"x\"\n" + run, `t.toml:1: name: must be a string, not a whole number`},
		{"empty description", "name = \"a\"\ndescription = \"  \"\n" + run, `t.toml:2: description: must not be empty: say what the tool does, for the model and for people`},
		{"effect", "name = \"a\"\ndescription = \"x\"\neffect = \"write\"\n" + run, `t.toml:3: effect: must be "read" or "change", not "write"`},
		{"unknown key", "name = \"a\"\ndescription = \"x\"\ntimeout = 3\n" + run, `t.toml:3: unknown key "timeout"; the keys allowed here are "name", "description", "effect", "params", "run"`},
		{"misspelt key", "name = \"a\"\ndescripton = \"x\"\n" + run, "t.toml: the tool has no description: add description = \"...\" saying what it does\n" +
			`t.toml:2: unknown key "descripton" (did you mean "description"?)`},
		{"no run", "name = \"a\"\ndescription = \"x\"\n", `t.toml: the tool has no [run] table: add one, with type = "http" (or the tool's kind)`},
		{"run not table", "name = \"a\"\ndescription = \"x\"\nrun = \"http\"\n", `t.toml:3: run: must be a table, not a string`},
		{"run no type", "name = \"a\"\ndescription = \"x\"\n[run]\nurl = \"x\"\n", `t.toml:3: run: the run table has no type: add type = "http" (or the tool's kind)`},
		{"run type type", "name = \"a\"\ndescription = \"x\"\n[run]\ntype = 1\n", `t.toml:4: run.type: must be a string, not a whole number`},
		{"run type name", "name = \"a\"\ndescription = \"x\"\n[run]\ntype = \"HTTP\"\n", `t.toml:4: run.type: "HTTP" is not a kind name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores`},
		{"params table", "name = \"a\"\ndescription = \"x\"\n[params]\nname = \"p\"\n" + run, `t.toml:3: params: must be a list of tables: write [[params]], with two brackets, once for each`},
		{"param missing", "name = \"a\"\ndescription = \"x\"\n[[params]]\nrequired = true\n" + run, "t.toml:3: params[0]: the parameter has no name: add name = \"...\"\n" +
			"t.toml:3: params[0]: the parameter has no kind: add kind = \"text\" (or number, integer, bool, json, list)"},
		{"param name", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"1st\"\nkind = \"text\"\n" + run, `t.toml:4: params[0].name: "1st" is not a good parameter name: it must start with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores`},
		{"param dup", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\n[[params]]\nname = \"p\"\nkind = \"bool\"\n" + run, `t.toml:7: params[1].name: "p" is already the name of params[0]`},
		{"param kind", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"string\"\n" + run, `t.toml:5: params[0].kind: must be one of text, number, integer, bool, json, list, not "string"`},
		{"param required", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\nrequired = \"yes\"\n" + run, `t.toml:6: params[0].required: must be true or false, not a string`},
		{"param unknown", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\ndefault = \"x\"\n" + run, `t.toml:6: params[0]: unknown key "default"; the keys allowed here are "name", "kind", "description", "required", "options", "items"`},
		{"options on bool", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"bool\"\noptions = [\"true\"]\n" + run, `t.toml:6: params[0].options: only text, number and integer parameters can have options, not bool ones`},
		{"options empty", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\noptions = []\n" + run, `t.toml:6: params[0].options: must list at least one value; leave options out to allow any value`},
		{"options type", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\noptions = [\n  \"a\",\n  true,\n]\n" + run, `t.toml:8: params[0].options[1]: must be a string, not true or false`},
		{"options number for text", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\noptions = [1]\n" + run, `t.toml:6: params[0].options[0]: must be a string, not a whole number (write "1")`},
		{"options not integer", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"integer\"\noptions = [\"1\", \"two\", 2.5]\n" + run, "t.toml:6: params[0].options[1]: \"two\" is not a whole number, and the parameter is an integer\n" +
			"t.toml:6: params[0].options[2]: must be a whole number, not a decimal number"},
		{"options not number", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"number\"\noptions = [\"1.5\", 2.5, 3, \"x\"]\n" + run, `t.toml:6: params[0].options[3]: "x" is not a number, and the parameter is a number`},
		{"options twice", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\noptions = [\"a\", \"a\"]\n" + run, `t.toml:6: params[0].options[1]: "a" is listed twice`},
		{"items on text", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\nitems = \"text\"\n" + run, `t.toml:6: params[0].items: only list parameters say what they hold, not text ones: leave items out`},
		{"items kind", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"list\"\nitems = \"list\"\n" + run, `t.toml:6: params[0].items: must be one of text, number, integer, bool, json, not "list"`},
		{"items type", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"list\"\nitems = [\"text\"]\n" + run, `t.toml:6: params[0].items: must be a string, not a list`},
		{"options out of integer range", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"integer\"\noptions = [1, 9007199254740992, \"-9007199254740992\"]\n" + run, "t.toml:6: params[0].options[1]: 9007199254740992 is out of the range an integer parameter takes, -9007199254740991 to 9007199254740991\n" +
			"t.toml:6: params[0].options[2]: -9007199254740992 is out of the range an integer parameter takes, -9007199254740991 to 9007199254740991"},
		{"options infinite number", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"number\"\noptions = [\"1e400\", \"NaN\"]\n" + run, "t.toml:6: params[0].options[0]: \"1e400\" is not a number, and the parameter is a number\n" +
			"t.toml:6: params[0].options[1]: \"NaN\" is not a number, and the parameter is a number"},
		{"options not list", "name = \"a\"\ndescription = \"x\"\n[[params]]\nname = \"p\"\nkind = \"text\"\noptions = \"a\"\n" + run, `t.toml:6: params[0].options: must be a list, not a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTool("t.toml", []byte(tt.toml))
			assertErrors(t, err, tt.want)
		})
	}
}

// TestListItems: a list param says what it holds, text when not said.
func TestListItems(t *testing.T) {
	src := "name = \"a\"\ndescription = \"x\"\n" +
		"[[params]]\nname = \"tags\"\nkind = \"list\"\n" +
		"[[params]]\nname = \"ns\"\nkind = \"list\"\nitems = \"integer\"\n" +
		"[[params]]\nname = \"any\"\nkind = \"list\"\nitems = \"json\"\n" +
		"[[params]]\nname = \"s\"\nkind = \"text\"\n" +
		"[run]\ntype = \"http\"\n"
	tool, err := ParseTool("t.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range tool.Params {
		got = append(got, p.Name+":"+p.Items)
	}
	if want := []string{"tags:text", "ns:integer", "any:json", "s:"}; !reflect.DeepEqual(got, want) {
		t.Errorf("items %v, want %v", got, want)
	}
}

func TestRunKeysAreThePluginsToCheck(t *testing.T) {
	src := "name = \"a\"\ndescription = \"x\"\n[run]\ntype = \"weather\"\nanything = [1, 2]\n[run.nested]\nok = true\n"
	tool, err := ParseTool("t.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if tool.Kind() != "weather" || tool.Run["anything"] == nil || tool.FieldLines["run.nested.ok"] != 7 {
		t.Errorf("got %+v", tool)
	}
}

func TestLoadTools(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"b_good.toml":   "name = \"b\"\ndescription = \"B.\"\nrun = { type = \"http\" }\n",
		"a_good.toml":   "name = \"a\"\ndescription = \"A.\"\nrun = { type = \"http\" }\n",
		"c_bad.toml":    "name = \"c\"\ndescription = \"C.\"\ntimeout = 1\nrun = { type = \"http\" }\n",
		"d_dup.toml":    "\nname = \"a\"\ndescription = \"A again.\"\nrun = { type = \"http\" }\n",
		"notes.txt":     "not a tool",
		"e_syntax.toml": "name = \"e\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	tools, errs := LoadTools(dir)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Errorf("tools %v, want [a b]", names)
	}
	want := dir + "/c_bad.toml:3: unknown key \"timeout\"; the keys allowed here are \"name\", \"description\", \"effect\", \"params\", \"run\"\n" +
		dir + "/d_dup.toml:2: name: a tool named \"a\" is already defined at " + dir + "/a_good.toml:1\n" +
		dir + "/e_syntax.toml:1: this is not valid TOML: basic strings cannot have new lines"
	if errs.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", errs.Error(), want)
	}

	if _, errs := LoadTools(filepath.Join(dir, "none")); errs.Error() != dir+"/none: can't read the tools folder: it does not exist" {
		t.Errorf("missing folder: %v", errs)
	}
	if tools, errs := LoadTools(t.TempDir()); tools != nil || errs != nil {
		t.Errorf("empty folder: %v %v", tools, errs)
	}
}

func TestToolFileWithToolTables(t *testing.T) {
	src := "[[tool]]\nname = \"a\"\ndescription = \"x\"\nrun = { type = \"http\" }\n"
	_, err := ParseTool("t.toml", []byte(src))
	want := "t.toml: the tool has no name: add name = \"...\"\n" +
		"t.toml: the tool has no description: add description = \"...\" saying what it does\n" +
		"t.toml: the tool has no [run] table: add one, with type = \"http\" (or the tool's kind)\n" +
		"t.toml:1: tool: a tool file holds one tool, written at its top level (name = ..., [run]); [[tool]] tables belong in toolhost.toml"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

func TestAllTools(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, src string) {
		if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(tools, "a.toml"), "name = \"a\"\ndescription = \"A from a file.\"\nrun = { type = \"http\" }\n")
	write(filepath.Join(tools, "b.toml"), "name = \"b\"\ndescription = \"B.\"\nrun = { type = \"http\" }\n")
	write(filepath.Join(tools, ".#b.toml"), "editor lock file")
	main := filepath.Join(dir, "toolhost.toml")
	write(main, "tools_dir = \"tools\"\n\n[[tool]]\nname = \"a\"\ndescription = \"A.\"\nrun = { type = \"http\" }\n")
	c, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	all, errs := c.AllTools()
	if len(all) != 2 || all[0].Source != main+":3" || all[1].Name != "b" {
		t.Errorf("tools: %+v", all)
	}
	want := tools + "/a.toml:1: name: a tool named \"a\" is already defined at " + main + ":3"
	if errs.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", errs, want)
	}
	if tools, errs := (&Config{}).AllTools(); tools != nil || errs != nil {
		t.Errorf("no tools: %v %v", tools, errs)
	}
}
