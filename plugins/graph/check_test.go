package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// n is a node table.
type n = map[string]any

// graphTool is a graph tool named "g" with these nodes and params.
func graphTool(t testing.TB, params []sdk.Param, nodes ...n) sdk.Tool {
	t.Helper()
	list := make([]any, len(nodes))
	for i, x := range nodes {
		list[i] = x
	}
	return sdktest.Tool(t, "g", map[string]any{"type": "graph", "nodes": list}, params...)
}

func text(name string, required bool) sdk.Param {
	return sdk.Param{Name: name, Type: "text", Required: required}
}

// catalog is the tools a host serves in these tests.
func catalog() []sdk.Tool {
	return []sdk.Tool{
		{Name: "get_json", Params: []sdk.Param{{Name: "resource", Type: "text", Required: true}, {Name: "id", Type: "integer", Required: true}}},
		{Name: "delete_item", Effect: "change"},
		{Name: "word_count", Params: []sdk.Param{text("text", true)}},
		{Name: "scale", Params: []sdk.Param{{Name: "x", Type: "number", Required: true}, {Name: "flag", Type: "bool"}, {Name: "items", Type: "list"}, {Name: "any", Type: "json"}}},
	}
}

// fieldErrors checks tool with the catalog (nil: the plain Check) and
// returns its field errors.
func fieldErrors(t *testing.T, tool sdk.Tool, cat []sdk.Tool) sdk.FieldErrors {
	t.Helper()
	k := &kind{}
	var err error
	if cat == nil {
		_, err = k.Check(context.Background(), tool)
	} else {
		_, err = k.CheckWithCatalog(context.Background(), tool, cat)
	}
	if err == nil {
		return nil
	}
	var fe sdk.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("Check returned %v (%T), not field errors", err, err)
	}
	return fe
}

// TestCheckRules: each rule of Check refuses its graph with an error at
// the field of the node it names, and says what to do.
func TestCheckRules(t *testing.T) {
	id := []sdk.Param{text("id", true)}
	ret := func(v string) n { return n{"id": "out", "type": "return", "value": v} }
	arg := n{"id": "a", "type": "arg", "param": "id"}
	cases := []struct {
		name   string
		params []sdk.Param
		nodes  []n
		cat    bool
		path   string
		want   []string // in the message
	}{
		{"ids are unique", id, []n{arg, {"id": "a", "type": "const", "value": 1}, ret("a")},
			false, "run.nodes[1].id", []string{`node "a"`, "already the id of run.nodes[0]"}},
		{"an id is well-formed", id, []n{arg, {"id": "9x", "type": "const", "value": 1}, ret("a")},
			false, "run.nodes[1].id", []string{`"9x" is not a node id`}},
		{"a node has an id", id, []n{arg, {"type": "const", "value": 1}, ret("a")},
			false, "run.nodes[1]", []string{"has no id"}},
		{"an unknown node type", id, []n{arg, {"id": "t", "type": "templat", "text": "x"}, ret("a")},
			false, "run.nodes[1].type", []string{`node "t"`, `did you mean "template"`}},
		{"an unknown field", id, []n{arg, {"id": "t", "type": "template", "text": "{{a}}", "txt": "x"}, ret("t")},
			false, "run.nodes[1].txt", []string{`node "t"`, `has no field "txt"`, "its fields are id, type, text"}},
		{"a missing field", id, []n{arg, {"id": "t", "type": "template"}, ret("a")},
			false, "run.nodes[1]", []string{`node "t"`, "needs text"}},
		{"a field of the wrong type", id, []n{arg, {"id": "t", "type": "template", "text": 3}, ret("t")},
			false, "run.nodes[1].text", []string{`node "t"`, "text must be text, not a number"}},
		{"a reference resolves", id, []n{arg, {"id": "p", "type": "pick", "from": "b", "path": "x"}, ret("p")},
			false, "run.nodes[1].from", []string{`node "p": there is no node "b"`, `did you mean "a"`}},
		{"a placeholder resolves", id, []n{arg, {"id": "t", "type": "template", "text": "hi {{ aa }}"}, ret("t")},
			false, "run.nodes[1].text", []string{`node "t"`, "the placeholder {{aa}} names no node"}},
		{"a placeholder is closed", id, []n{arg, {"id": "t", "type": "template", "text": "hi {{a"}, ret("t")},
			false, "run.nodes[1].text", []string{`node "t"`, "never closed"}},
		{"a join input resolves", id, []n{arg, {"id": "j", "type": "join", "inputs": []string{"a", "zz"}}, ret("j")},
			false, "run.nodes[1].inputs[1]", []string{`node "j": there is no node "zz"`}},
		{"a call_tool argument resolves", id, []n{arg, {"id": "c", "type": "call_tool", "tool": "word_count", "args": n{"text": "nope"}}, ret("c")},
			false, "run.nodes[1].args.text", []string{`node "c": there is no node "nope"`}},
		{"nothing reads the return node", id, []n{arg, {"id": "t", "type": "template", "text": "{{out}}"}, ret("a")},
			false, "run.nodes[1].text", []string{`node "t"`, `"out" is the return node`}},
		{"no cycle", id, []n{
			arg,
			{"id": "x", "type": "template", "text": "{{a}} {{y}}"},
			{"id": "y", "type": "join", "inputs": []string{"z"}},
			{"id": "z", "type": "pick", "from": "x", "path": "k"},
			ret("x")},
			false, "run.nodes[1].text", []string{`node "x"`, `"x" → "y" → "z" → "x"`}},
		{"a node that reads itself", id, []n{arg, {"id": "x", "type": "choose", "if": "a", "then": "x", "else": "a"}, ret("x")},
			false, "run.nodes[1].then", []string{`node "x"`, `"x" → "x"`}},
		{"a return node", id, []n{arg, {"id": "t", "type": "template", "text": "{{a}}"}},
			false, "run.nodes", []string{"no return node", `type = "return"`}},
		{"only one return node", id, []n{arg, ret("a"), {"id": "out2", "type": "return", "value": "a"}},
			false, "run.nodes[2].type", []string{`node "out2"`, `exactly one return node, and "out" is one already`}},
		{"every node runs", id, []n{arg, {"id": "lost", "type": "const", "value": 1}, ret("a")},
			false, "run.nodes[1]", []string{`node "lost"`, "would never run"}},
		{"an arg names a parameter", id, []n{arg, {"id": "b", "type": "arg", "param": "idd"}, {"id": "j", "type": "join", "inputs": []string{"a", "b"}}, ret("j")},
			false, "run.nodes[1].param", []string{`node "b"`, `no parameter "idd"`, "its parameters are id", `did you mean "id"`}},
		{"a required parameter is read", []sdk.Param{text("id", true), text("topic", true)}, []n{arg, ret("a")},
			false, "params[1]", []string{`required parameter "topic"`, `param = "topic"`}},
		{"a call_tool's tool is served", id, []n{arg, {"id": "fetch", "type": "call_tool", "tool": "get_jsn", "args": n{"resource": "a", "id": "a"}}, ret("fetch")},
			true, "run.nodes[1].tool", []string{`node "fetch": there is no tool named "get_jsn"`, `did you mean "get_json"`}},
		{"a call_tool's required parameters are wired", nil, []n{{"id": "fetch", "type": "call_tool", "tool": "word_count"}, ret("fetch")},
			true, "run.nodes[0].args", []string{`node "fetch"`, `word_count needs its parameter "text"`}},
		{"a call_tool's arguments are its tool's", id, []n{arg, {"id": "fetch", "type": "call_tool", "tool": "word_count", "args": n{"text": "a", "txet": "a"}}, ret("fetch")},
			true, "run.nodes[1].args.txet", []string{`node "fetch"`, `word_count has no parameter "txet"`, "its parameters are text"}},
		{"text does not go where a whole number goes", id, []n{
			arg,
			{"id": "res", "type": "const", "value": "posts"},
			{"id": "num", "type": "template", "text": "{{a}}"},
			{"id": "fetch", "type": "call_tool", "tool": "get_json", "args": n{"resource": "res", "id": "num"}}, ret("fetch")},
			true, "run.nodes[3].args.id", []string{`node "fetch"`, `get_json's parameter "id" takes a whole number, and "num" gives text`}},
		{"a number does not go where text goes", []sdk.Param{{Name: "n", Type: "integer", Required: true}}, []n{
			{"id": "a", "type": "arg", "param": "n"},
			{"id": "wc", "type": "call_tool", "tool": "word_count", "args": n{"text": "a"}}, ret("wc")},
			true, "run.nodes[1].args.text", []string{`node "wc"`, `takes text, and "a" gives a whole number`, `a template node with text = "{{a}}" turns it into text`}},
		{"a fraction does not go where a whole number goes", nil, []n{
			{"id": "res", "type": "const", "value": "posts"},
			{"id": "half", "type": "const", "value": 0.5},
			{"id": "fetch", "type": "call_tool", "tool": "get_json", "args": n{"resource": "res", "id": "half"}}, ret("fetch")},
			true, "run.nodes[2].args.id", []string{`node "fetch"`, "takes a whole number", `"half" gives a number, which need not be whole`}},
		{"a table does not go where a list goes", nil, []n{
			{"id": "x", "type": "const", "value": 1},
			{"id": "obj", "type": "const", "value": n{"k": 1}},
			{"id": "s", "type": "call_tool", "tool": "scale", "args": n{"x": "x", "items": "obj"}}, ret("s")},
			true, "run.nodes[2].args.items", []string{`node "s"`, `takes a list, and "obj" gives a table`}},
		{"a tool that reads calls no tool that changes", nil, []n{{"id": "del", "type": "call_tool", "tool": "delete_item"}, ret("del")},
			true, "run.nodes[0].tool", []string{`node "del"`, `delete_item changes things (effect = "change")`, `effect = "change" too`}},
		{"a pick reads into JSON", id, []n{arg, {"id": "p", "type": "pick", "from": "a", "path": "x"}, ret("p")},
			false, "run.nodes[1].from", []string{`node "p"`, `"a" gives text`}},
		{"a pick's path has no empty step", id, []n{arg, {"id": "p", "type": "pick", "from": "a", "path": "x..y"}, ret("p")},
			false, "run.nodes[1].path", []string{`node "p"`, "empty step"}},
		{"ask_model's format", id, []n{arg, {"id": "m", "type": "ask_model", "prompt": "a", "format": "yaml"}, ret("m")},
			false, "run.nodes[1].format", []string{`node "m"`, `"text" or "json", not "yaml"`}},
		{"a join has inputs", id, []n{arg, {"id": "j", "type": "join", "inputs": []string{}}, ret("a")},
			false, "run.nodes[1].inputs", []string{`node "j"`, "inputs is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cat []sdk.Tool
			if tc.cat {
				cat = catalog()
			}
			fe := fieldErrors(t, graphTool(t, tc.params, tc.nodes...), cat)
			var got *sdk.FieldError
			for i := range fe {
				if fe[i].Path == tc.path {
					got = &fe[i]
				}
			}
			if got == nil {
				t.Fatalf("no error at %s; got:\n%v", tc.path, fe)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("the error at %s says %q; want it to say %q", tc.path, got.Message, w)
				}
			}
			if len(fe) != 1 {
				t.Errorf("want one error (no cascade), got:\n%v", fe)
			}
		})
	}
}

// TestCheckRunFields: the run table's own fields and its layout.
func TestCheckRunFields(t *testing.T) {
	tool := graphTool(t, nil, n{"id": "c", "type": "const", "value": 1}, n{"id": "out", "type": "return", "value": "c"})
	var run map[string]any
	_ = json.Unmarshal(tool.Run, &run)
	run["extra"] = true
	run["layout"] = map[string]any{"c": n{"x": 1, "y": "high"}, "cc": n{"x": 1, "y": 2}, "out": n{"x": 1}}
	tool.Run, _ = json.Marshal(run)
	fe := fieldErrors(t, tool, nil)
	want := map[string]string{
		"run.extra":      `"extra" is not a field of a graph's run table`,
		"run.layout.c.y": `node "c": y must be a number, not text`,
		"run.layout.cc":  `there is no node "cc" to place (did you mean "c"?)`,
		"run.layout.out": `node "out": its place has no y`,
	}
	for _, e := range fe {
		if w, ok := want[e.Path]; !ok || !strings.Contains(e.Message, w) {
			t.Errorf("unexpected error %s: %s", e.Path, e.Message)
		}
		delete(want, e.Path)
	}
	for p, w := range want {
		t.Errorf("no error at %s (%s)", p, w)
	}
}

// TestCheckWithoutCatalogLeavesCallTargets: the plain Check, which a host
// without catalogs calls, passes a call of a tool it can't know; with the
// catalog the same graph is refused.
func TestCheckWithoutCatalogLeavesCallTargets(t *testing.T) {
	tool := graphTool(t, nil,
		n{"id": "c", "type": "call_tool", "tool": "not_served"},
		n{"id": "out", "type": "return", "value": "c"})
	if fe := fieldErrors(t, tool, nil); fe != nil {
		t.Fatalf("the plain Check refused it: %v", fe)
	}
	if fe := fieldErrors(t, tool, catalog()); len(fe) != 1 || fe[0].Path != "run.nodes[0].tool" {
		t.Fatalf("with the catalog: %v", fe)
	}
}

// TestCheckAllowsTypesThatFit: what the compatibility table lets through
// passes, and a graph may call itself (as it is being saved, whatever the
// catalog holds of its older self).
func TestCheckAllowsTypesThatFit(t *testing.T) {
	tool := graphTool(t, []sdk.Param{{Name: "n", Type: "integer", Required: true}, {Name: "j", Type: "json"}},
		n{"id": "n", "type": "arg", "param": "n"},
		n{"id": "j", "type": "arg", "param": "j"},
		n{"id": "fetch", "type": "call_tool", "tool": "get_json", "args": n{"resource": "j", "id": "n"}}, // json goes anywhere
		n{"id": "p", "type": "pick", "from": "fetch", "path": "body.items.0"},
		n{"id": "s", "type": "call_tool", "tool": "scale", "args": n{"x": "n", "items": "p", "any": "fetch", "flag": "yes"}}, // integer into number; unknown anywhere
		n{"id": "yes", "type": "const", "value": true},
		n{"id": "again", "type": "call_tool", "tool": "g", "args": n{"n": "n"}}, // itself
		n{"id": "j2", "type": "join", "inputs": []string{"s", "again", "n"}},
		n{"id": "out", "type": "return", "value": "j2"})
	old := sdk.Tool{Name: "g", Params: []sdk.Param{text("other", true)}}
	if fe := fieldErrors(t, tool, append(catalog(), old)); fe != nil {
		t.Fatalf("refused: %v", fe)
	}
}

// TestCheckNormalises: Check returns the run table with the defaults
// filled in and the layout kept as written, and checking that again gives
// it back unchanged.
func TestCheckNormalises(t *testing.T) {
	tool := sdktest.Tool(t, "g", map[string]any{
		"type": "graph",
		"nodes": []any{
			n{"id": "q", "type": "arg", "param": "q"},
			n{"id": "j", "type": "join", "inputs": []string{"q", "q"}},
			n{"id": "m", "type": "ask_model", "prompt": "j"},
			n{"id": "c", "type": "call_tool", "tool": "noargs"},
			n{"id": "t", "type": "template", "text": "<{{m}}> {{c}} {{k}}"},
			n{"id": "k", "type": "const", "value": n{"a": []any{1, 2.5, "x"}}},
			n{"id": "out", "type": "return", "value": "t"},
		},
		"layout": n{"q": n{"x": 40, "y": 80.5, "collapsed": true}},
	}, text("q", true))
	k := &kind{}
	got, err := k.CheckWithCatalog(context.Background(), tool, []sdk.Tool{{Name: "noargs"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"graph","nodes":[` +
		`{"id":"q","type":"arg","param":"q"},` +
		`{"id":"j","type":"join","inputs":["q","q"],"separator":"\n"},` +
		`{"id":"m","type":"ask_model","prompt":"j","format":"text"},` +
		`{"id":"c","type":"call_tool","tool":"noargs","args":{}},` +
		`{"id":"t","type":"template","text":"<{{m}}> {{c}} {{k}}"},` +
		`{"id":"k","type":"const","value":{"a":[1,2.5,"x"]}},` +
		`{"id":"out","type":"return","value":"t"}],` +
		`"layout":{"q":{"collapsed":true,"x":40,"y":80.5}}}`
	if string(got) != want {
		t.Fatalf("normalised:\n%s\nwant:\n%s", got, want)
	}
	tool.Run = got
	again, err := k.Check(context.Background(), tool)
	if err != nil || string(again) != want {
		t.Fatalf("checked again: %s, %v", again, err)
	}
}

// TestCheckOverTheWire: through the plugin protocol, the kind says it
// wants the catalog, and the host's Check with one reaches
// CheckWithCatalog, its field errors kept.
func TestCheckOverTheWire(t *testing.T) {
	c := sdktest.Start(t, &kind{}, nil)
	info, _, err := c.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "graph" || !info.WantsCatalog || !json.Valid(info.RunSchema) || !json.Valid(info.ConfigSchema) {
		t.Fatalf("describe: %+v", info)
	}
	tool := graphTool(t, nil,
		n{"id": "c", "type": "call_tool", "tool": "get_jsn"},
		n{"id": "out", "type": "return", "value": "c"})
	_, err = c.CheckWithCatalog(context.Background(), tool, append(catalog(), tool))
	var fe sdk.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Path != "run.nodes[0].tool" || !strings.Contains(fe[0].Message, `node "c": there is no tool named "get_jsn"`) {
		t.Fatalf("got %v", err)
	}
}

// TestCheckAttacks: run tables made to make Check work hard or crash are
// refused or checked quickly: a number with a huge exponent, a chain of
// the most nodes allowed, one over it, ids and placeholders of odd
// shapes.
func TestCheckAttacks(t *testing.T) {
	huge := json.RawMessage(`{"type":"graph","nodes":[{"id":"c","type":"const","value":1e999999999},` +
		`{"id":"d","type":"const","value":1e999999999},` +
		`{"id":"ch","type":"choose","if":"c","equals":2e999999999,"then":"c","else":"d"},` +
		`{"id":"out","type":"return","value":"ch"}]}`)
	k := &kind{}
	if _, err := k.Check(context.Background(), sdk.Tool{Name: "g", Run: huge}); err != nil {
		t.Fatalf("a huge exponent: %v", err)
	}
	res, err := k.Invoke(context.Background(), sdk.Call{Tool: sdk.Tool{Name: "g", Run: huge}, Args: json.RawMessage(`{}`)}, func(sdk.Event) {})
	if err != nil || string(res) != "1e999999999" {
		t.Fatalf("a huge exponent: %s, %v", res, err)
	}

	chain := func(count int) sdk.Tool {
		nodes := []n{{"id": "n0", "type": "const", "value": "x"}}
		for i := 1; i < count-1; i++ {
			nodes = append(nodes, n{"id": fmt.Sprintf("n%d", i), "type": "template", "text": fmt.Sprintf("{{n%d}}", i-1)})
		}
		nodes = append(nodes, n{"id": "out", "type": "return", "value": fmt.Sprintf("n%d", count-2)})
		return graphTool(t, nil, nodes...)
	}
	if fe := fieldErrors(t, chain(maxNodes), nil); fe != nil {
		t.Fatalf("a chain of %d nodes: %v", maxNodes, fe)
	}
	if fe := fieldErrors(t, chain(maxNodes+1), nil); len(fe) != 1 || fe[0].Path != "run.nodes" {
		t.Fatalf("a chain of %d nodes: %v", maxNodes+1, fe)
	}

	odd := graphTool(t, nil,
		n{"id": strings.Repeat("a", 65), "type": "const", "value": 1},
		n{"id": "t", "type": "template", "text": "{{" + strings.Repeat("}", 100) + "{{ a b }}"},
		n{"id": "u", "type": "template", "text": "{{\u00e9t\u00e9}}"},
		n{"id": 7, "type": "const", "value": 1},
		n{"id": "out", "type": "return", "value": "t"})
	fe := fieldErrors(t, odd, nil)
	for _, p := range []string{"run.nodes[0].id", "run.nodes[1].text", "run.nodes[2].text", "run.nodes[3].id"} {
		found := false
		for _, e := range fe {
			found = found || e.Path == p
		}
		if !found {
			t.Errorf("no error at %s: %v", p, fe)
		}
	}
}

// TestCheckMessagesKeepTheFormatsOrder: a suggestion ("did you mean") does
// not reorder the lists later messages show (the node types, a type's
// fields), however many checks come before.
func TestCheckMessagesKeepTheFormatsOrder(t *testing.T) {
	tool := graphTool(t, nil,
		n{"id": "x", "type": "templat", "text": "x"},
		n{"id": "c", "type": "choose", "if": "x", "then": "x", "else": "x", "equal": 1})
	for i := range 3 {
		msgs := map[string]string{}
		for _, e := range fieldErrors(t, tool, nil) {
			msgs[e.Path] = e.Message
		}
		if want := "one of arg, const, template, pick, join, choose, ask_model, call_tool, return, not"; !strings.Contains(msgs["run.nodes[0].type"], want) {
			t.Errorf("check %d: %q does not list the types as the format does (…%s…)", i, msgs["run.nodes[0].type"], want)
		}
		if want := "its fields are id, type, if, then, else, equals (did you mean equals?)"; !strings.Contains(msgs["run.nodes[1].equal"], want) {
			t.Errorf("check %d: %q does not list the fields as the format does (…%s…)", i, msgs["run.nodes[1].equal"], want)
		}
	}
}
