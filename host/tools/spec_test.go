package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
)

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSpecIsAFunctionSchema: the default format is today's function spec
// with effect and kind; optional params take null, lists say what they
// hold, integers their range.
func TestSpecIsAFunctionSchema(t *testing.T) {
	want := `{"type":"function","function":{"name":"t","description":"d","parameters":{"additionalProperties":false,"properties":{` +
		`"b":{"type":["boolean","null"]},` +
		`"big":{"maximum":9007199254740991,"minimum":-9007199254740991,"type":["integer","null"]},` +
		`"colour":{"enum":["red","blue",null],"type":["string","null"]},` +
		`"i":{"enum":[1,2,null],"type":["integer","null"]},` +
		`"j":{},` +
		`"l":{"items":{"type":"string"},"type":["array","null"]},` +
		`"li":{"items":{"maximum":9007199254740991,"minimum":-9007199254740991,"type":"integer"},"type":["array","null"]},` +
		`"n":{"type":["number","null"]},` +
		`"text":{"type":"string"}},"required":["text"],"type":"object"}},"effect":"read","kind":"echo"}`
	if got := marshal(t, testTool().Spec()); got != want {
		t.Errorf("spec =\n%s\nwant\n%s", got, want)
	}
	// A required json param takes any value, null too.
	if got, want := marshal(t, requiredJSONTool().Schema()["properties"]), `{"anything":{"items":{},"type":["array","null"]},"v":{}}`; got != want {
		t.Errorf("json params:\n%s\nwant\n%s", got, want)
	}
}

func TestFormats(t *testing.T) {
	tool := &Tool{Tool: config.Tool{Name: "get", Description: "Get one.", Effect: "read", Params: []config.Param{
		{Name: "id", Type: "text", Required: true},
		{Name: "n", Type: "number"},
	}}, Kind: "http"}
	params := `{"additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":["number","null"]}},"required":["id"],"type":"object"}`
	strictParams := strings.Replace(params, `"required":["id"]`, `"required":["id","n"]`, 1)
	change := &Tool{Tool: config.Tool{Name: "put", Description: "Put one.", Effect: "change", Params: []config.Param{{Name: "v", Type: "json"}}}, Kind: "python"}
	for _, c := range []struct {
		format string
		strict bool
		want   string
	}{
		{"", false, `[{"type":"function","function":{"name":"get","description":"Get one.","parameters":` + params + `},"effect":"read","kind":"http"}]`},
		{"toolhost", false, `[{"type":"function","function":{"name":"get","description":"Get one.","parameters":` + params + `},"effect":"read","kind":"http"}]`},
		{"openai", false, `[{"type":"function","function":{"name":"get","description":"Get one.","parameters":` + params + `}}]`},
		{"openai", true, `[{"type":"function","function":{"name":"get","description":"Get one.","parameters":` + strictParams + `,"strict":true}}]`},
		{"anthropic", false, `[{"name":"get","description":"Get one.","input_schema":` + params + `}]`},
		{"mcp", false, `[{"name":"get","description":"Get one.","inputSchema":` + params + `,"annotations":{"readOnlyHint":true}}]`},
	} {
		specs, notStrict, err := Specs([]*Tool{tool}, c.format, c.strict)
		if err != nil || notStrict != nil {
			t.Errorf("%s strict=%v: %v %v", c.format, c.strict, notStrict, err)
			continue
		}
		if got := marshal(t, specs); got != c.want {
			t.Errorf("%s strict=%v:\n%s\nwant\n%s", c.format, c.strict, got, c.want)
		}
	}

	// A tool strict mode can't describe is given as it is, strict: false,
	// and named with why.
	specs, notStrict, err := Specs([]*Tool{change}, "openai", true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := marshal(t, specs), `[{"type":"function","function":{"name":"put","description":"Put one.","parameters":{"additionalProperties":false,"properties":{"v":{}},"required":[],"type":"object"},"strict":false}}]`; got != want {
		t.Errorf("not strict:\n%s\nwant\n%s", got, want)
	}
	if want := []wire.NotStrict{{Name: "put", Why: "v is a json param (any JSON value), and strict mode takes no object without its keys listed"}}; marshal(t, notStrict) != marshal(t, want) {
		t.Errorf("not strict: %+v, want %+v", notStrict, want)
	}
	if got := marshal(t, change.MCP().Annotations); got != `{"destructiveHint":true}` {
		t.Errorf("change tool's MCP hints: %s", got)
	}

	for _, c := range []struct {
		format string
		strict bool
		want   string
	}{
		{"gemini", false, `format must be one of toolhost, openai, anthropic, mcp, not "gemini"`},
		{"OpenAI", false, `format must be one of toolhost, openai, anthropic, mcp, not "OpenAI"`},
		{"anthropic", true, `strict is OpenAI's strict mode: it goes with format=openai, not anthropic`},
		{"", true, `strict is OpenAI's strict mode: it goes with format=openai, not toolhost`},
	} {
		if _, _, err := Specs([]*Tool{tool}, c.format, c.strict); err == nil || err.Error() != c.want {
			t.Errorf("%q strict=%v: %v, want %q", c.format, c.strict, err, c.want)
		}
	}
}
