package tools

import (
	"encoding/json"
	"testing"

	"github.com/toolhost/toolhost/config"
)

func testTool() *Tool {
	return &Tool{Tool: config.Tool{Name: "t", Description: "d", Effect: "read", Params: []config.Param{
		{Name: "text", Kind: "text", Required: true},
		{Name: "n", Kind: "number"},
		{Name: "i", Kind: "integer", Options: []string{"1", "2"}},
		{Name: "b", Kind: "bool"},
		{Name: "l", Kind: "list"},
		{Name: "j", Kind: "json"},
		{Name: "colour", Kind: "text", Options: []string{"red", "blue"}},
	}}, Kind: "echo"}
}

func TestCheckArgs(t *testing.T) {
	cases := []struct {
		args, want, err string
	}{
		{`{"text":"hi"}`, `{"text":"hi"}`, ""},
		{`{"text":"hi","n":1.5,"i":2,"b":true,"l":[1],"j":{"a":null},"colour":"red"}`, `{"b":true,"colour":"red","i":2,"j":{"a":null},"l":[1],"n":1.5,"text":"hi"}`, ""},
		{`{"text":"hi","i":2.0}`, `{"i":2.0,"text":"hi"}`, ""},
		{`{"text":"hi","n":12345678901234567890}`, `{"n":12345678901234567890,"text":"hi"}`, ""},
		{`{"text":"hi","n":null}`, `{"text":"hi"}`, ""},
		{`{}`, "", `argument "text" is required`},
		{``, "", `argument "text" is required`},
		{`{"text":null}`, "", `argument "text" is required`},
		{`[1]`, "", `the arguments must be a JSON object of parameter names to values`},
		{`"x"`, "", `the arguments must be a JSON object of parameter names to values`},
		{`{"text":"hi","zz":1,"aa":2}`, "", `argument "aa" is not a parameter of t (it takes: text, n, i, b, l, j, colour)`},
		{`{"text":3}`, "", `argument "text" must be text (a JSON string), not a number`},
		{`{"text":"x","n":"3"}`, "", `argument "n" must be a number, not text`},
		{`{"text":"x","i":1.5}`, "", `argument "i" must be a whole number, not 1.5`},
		{`{"text":"x","i":3}`, "", `argument "i" must be one of "1", "2"`},
		{`{"text":"x","b":"yes"}`, "", `argument "b" must be true or false, not text`},
		{`{"text":"x","l":{}}`, "", `argument "l" must be a list (a JSON array), not an object`},
		{`{"text":"x","colour":"green"}`, "", `argument "colour" must be one of "red", "blue"`},
	}
	for _, c := range cases {
		got, err := CheckArgs(testTool(), json.RawMessage(c.args))
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

func TestSpecIsAFunctionSchema(t *testing.T) {
	b, err := json.Marshal(testTool().Spec())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"function","function":{"name":"t","description":"d","parameters":{"additionalProperties":false,"properties":{"b":{"type":"boolean"},"colour":{"enum":["red","blue"],"type":"string"},"i":{"enum":[1,2],"type":"integer"},"j":{},"l":{"type":"array"},"n":{"type":"number"},"text":{"type":"string"}},"required":["text"],"type":"object"}},"effect":"read","kind":"echo"}`
	if string(b) != want {
		t.Errorf("spec =\n%s\nwant\n%s", b, want)
	}
}
