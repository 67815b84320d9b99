package tools

import (
	"encoding/json"
	"testing"

	"github.com/toolhost/toolhost/config"
)

func testTool() *Tool {
	return &Tool{Tool: config.Tool{Name: "t", Description: "d", Effect: "read", Params: []config.Param{
		{Name: "text", Type: "text", Required: true},
		{Name: "n", Type: "number"},
		{Name: "i", Type: "integer", Options: []string{"1", "2"}},
		{Name: "b", Type: "bool"},
		{Name: "l", Type: "list", Items: "text"},
		{Name: "j", Type: "json"},
		{Name: "colour", Type: "text", Options: []string{"red", "blue"}},
		{Name: "big", Type: "integer"},
		{Name: "li", Type: "list", Items: "integer"},
	}}, Kind: "echo"}
}

func requiredJSONTool() *Tool {
	return &Tool{Tool: config.Tool{Name: "rj", Description: "d", Effect: "change", Params: []config.Param{
		{Name: "v", Type: "json", Required: true},
		{Name: "anything", Type: "list", Items: "json"},
	}}, Kind: "echo"}
}

func TestCheckArgs(t *testing.T) {
	cases := []struct {
		args, want, err string
	}{
		{`{"text":"hi"}`, `{"text":"hi"}`, ""},
		{`{"text":"hi","n":1.5,"i":2,"b":true,"l":["a"],"j":{"a":null},"colour":"red"}`, `{"b":true,"colour":"red","i":2,"j":{"a":null},"l":["a"],"n":1.5,"text":"hi"}`, ""},
		// Integers are whole numbers however written; other numbers stay as sent.
		{`{"text":"hi","i":2.0,"big":1e3,"li":[20e-1,-0,9007199254740991]}`, `{"big":1000,"i":2,"li":[2,0,9007199254740991],"text":"hi"}`, ""},
		{`{"text":"hi","n":1e3}`, `{"n":1e3,"text":"hi"}`, ""},
		// null is "not given" for every optional param, options and bool too.
		{`{"text":"hi","b":null,"colour":null,"i":null,"j":null,"l":null}`, `{"text":"hi"}`, ""},
		{`{"text":"hi","n":12345678901234567890}`, `{"n":12345678901234567890,"text":"hi"}`, ""},
		{`{"text":"hi","n":null}`, `{"text":"hi"}`, ""},
		{`{}`, "", `argument "text" is required`},
		{``, "", `argument "text" is required`},
		{`{"text":null}`, "", `argument "text" is required`},
		{`[1]`, "", `the arguments must be a JSON object of parameter names to values`},
		{`"x"`, "", `the arguments must be a JSON object of parameter names to values`},
		{`{"text":"hi","zz":1,"aa":2}`, "", `argument "aa" is not a parameter of t (it takes: text, n, i, b, l, j, colour, big, li)`},
		{`{"text":3}`, "", `argument "text" must be text (a JSON string), not a number`},
		{`{"text":"x","n":"3"}`, "", `argument "n" must be a number, not text`},
		{`{"text":"x","i":1.5}`, "", `argument "i" must be a whole number, not 1.5`},
		{`{"text":"x","i":3}`, "", `argument "i" must be one of "1", "2"`},
		{`{"text":"x","b":"yes"}`, "", `argument "b" must be true or false, not text`},
		{`{"text":"x","l":{}}`, "", `argument "l" must be a list (a JSON array), not an object`},
		{`{"text":"x","colour":"green"}`, "", `argument "colour" must be one of "red", "blue"`},
		{`{"text":"x","big":1e20}`, "", `argument "big" must be a whole number from -9007199254740991 to 9007199254740991, not 1e20`},
		{`{"text":"x","big":-9007199254740992}`, "", `argument "big" must be a whole number from -9007199254740991 to 9007199254740991, not -9007199254740992`},
		{`{"text":"x","n":1e400}`, "", `argument "n" holds 1e400, a number beyond what JSON numbers hold here (a float64, ±1.8e308)`},
		{`{"text":"x","l":["a",1]}`, "", `argument "l" item 1 must be text (a JSON string), not a number`},
		{`{"text":"x","l":["a",null]}`, "", `argument "l" item 1 must be text, not null`},
		{`{"text":"x","li":[1,1.5]}`, "", `argument "li" item 1 must be a whole number, not 1.5`},
		{`{"text":"x","":1}`, "", `an argument's name is empty (""): it is not a parameter of t (it takes: text, n, i, b, l, j, colour, big, li)`},
		{`{"text":"x"} {}`, "", `the arguments must be a JSON object of parameter names to values`},
	}
	check(t, testTool(), cases)
	check(t, requiredJSONTool(), []struct{ args, want, err string }{
		{`{"v":null}`, `{"v":null}`, ""},
		{`{}`, "", `argument "v" is required`},
		{`{"v":0,"anything":[null,{"a":[1]},"x"]}`, `{"anything":[null,{"a":[1]},"x"],"v":0}`, ""},
		{`{"v":"text"}`, `{"v":"text"}`, ""},
	})
}

func check(t *testing.T, tool *Tool, cases []struct{ args, want, err string }) {
	t.Helper()
	for _, c := range cases {
		got, err := CheckArgs(tool, json.RawMessage(c.args))
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s, %v; want %s", c.args, got, err, c.want)
		}
	}
}

// BenchmarkCheckArgs: the check of a call's arguments, as a served tool
// (its schema resolved once, by Check) has it.
func BenchmarkCheckArgs(b *testing.B) {
	tool := testTool()
	resolved, err := tool.resolvedSchema()
	if err != nil {
		b.Fatal(err)
	}
	tool.resolved = resolved
	args := json.RawMessage(`{"text":"hello there","n":1.5,"i":2,"b":true,"l":["a","b"],"j":{"a":[1,2]},"colour":"red","big":1e3}`)
	for b.Loop() {
		if _, err := CheckArgs(tool, args); err != nil {
			b.Fatal(err)
		}
	}
}
