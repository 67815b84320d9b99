package tools

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolhost/toolhost/config"
)

// The checkers below write out each provider's published rules for a
// tool's spec, and each runs on the JSON a client gets.

// openAINameRE: "The name of the function to be called. Must be a-z, A-Z,
// 0-9, or contain underscores and dashes, with a maximum length of 64."
// (OpenAI API reference, Chat Completions, tools[].function.name;
// https://platform.openai.com/docs/api-reference/chat/create).
var openAINameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkOpenAI checks a tool as OpenAI's Chat Completions API takes a
// function tool (https://platform.openai.com/docs/api-reference/chat/create,
// tools[]; https://platform.openai.com/docs/guides/function-calling):
//   - {"type":"function","function":{…}} and nothing else: the SDKs' types
//     (ChatCompletionFunctionTool) have no other field, and the typed
//     TypeScript client refuses others at compile time;
//   - function: name (see openAINameRE), description, parameters ("The
//     parameters the functions accepts, described as a JSON Schema
//     object"), strict; nothing else;
//   - parameters is an object schema (type "object"), valid JSON Schema;
//   - every array schema has items: the API refuses one without
//     ("invalid_function_parameters": array schema missing items).
func checkOpenAI(spec map[string]any) []string {
	var bad []string
	bad = append(bad, onlyKeys("", spec, "type", "function")...)
	if spec["type"] != "function" {
		bad = append(bad, fmt.Sprintf(`type is %v, not "function"`, spec["type"]))
	}
	fn, ok := spec["function"].(map[string]any)
	if !ok {
		return append(bad, "function is not an object")
	}
	bad = append(bad, onlyKeys("function", fn, "name", "description", "parameters", "strict")...)
	if name, _ := fn["name"].(string); !openAINameRE.MatchString(name) {
		bad = append(bad, fmt.Sprintf("function.name %q does not match %s", name, openAINameRE))
	}
	if _, ok := fn["description"].(string); !ok {
		bad = append(bad, "function.description is not a string")
	}
	params, ok := fn["parameters"].(map[string]any)
	if !ok {
		return append(bad, "function.parameters is not an object")
	}
	bad = append(bad, validSchema("function.parameters", params)...)
	if params["type"] != "object" {
		bad = append(bad, "function.parameters is not an object schema")
	}
	walk("parameters", params, func(path string, s map[string]any, _ int) {
		if hasType(s, "array") {
			if _, ok := s["items"]; !ok {
				bad = append(bad, path+": an array schema without items")
			}
		}
	})
	return bad
}

// strictKeywords are the keywords strict mode takes (OpenAI, Structured
// Outputs, "Supported schemas":
// https://platform.openai.com/docs/guides/structured-outputs#supported-schemas):
// the types string, number, boolean, integer, object, array, enum and
// anyOf; for strings pattern and format; for numbers multipleOf, maximum,
// exclusiveMaximum, minimum, exclusiveMinimum; for arrays minItems and
// maxItems; definitions ($defs, $ref); description and title. It lists as
// not supported, among others, for objects patternProperties,
// unevaluatedProperties, propertyNames, minProperties, maxProperties; for
// strings minLength, maxLength; for arrays unevaluatedItems, contains,
// minContains, maxContains, uniqueItems; allOf, not, if/then/else,
// dependentRequired, dependentSchemas.
var strictKeywords = []string{
	"type", "description", "title", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
	"$defs", "$ref", "pattern", "format", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
	"minItems", "maxItems",
}

// checkStrict checks a tool in OpenAI's strict mode, by the rules of
// "Supported schemas" (see strictKeywords) and the function calling
// guide's strict mode section
// (https://platform.openai.com/docs/guides/function-calling#strict-mode):
//   - it is a valid OpenAI tool (checkOpenAI), with "strict": true;
//   - "Root objects must not be anyOf and must be an object";
//   - "All fields must be required": every object lists each of its
//     properties in required, an optional one being nullable ("emulate an
//     optional parameter … use a union type with null");
//   - "additionalProperties: false must always be set in objects";
//   - every schema has a type (or is an anyOf), of the supported types;
//     only supported keywords; an enum's values fit its type;
//   - limits: "A schema may have up to 5000 object properties total, with
//     up to 10 levels of nesting"; "the total string length of all
//     property names, definition names, enum values, and const values
//     cannot exceed 120,000 characters"; "up to 1000 enum values across
//     all enum properties"; a single string enum of more than 250 values
//     at most 15,000 characters.
func checkStrict(spec map[string]any) []string {
	bad := checkOpenAI(spec)
	fn, _ := spec["function"].(map[string]any)
	if fn["strict"] != true {
		bad = append(bad, fmt.Sprintf("function.strict is %v, not true", fn["strict"]))
	}
	params, _ := fn["parameters"].(map[string]any)
	if params == nil {
		return bad
	}
	if _, ok := params["anyOf"]; ok || params["type"] != "object" {
		bad = append(bad, "parameters: the root must be an object, not anyOf")
	}
	props, chars, enums := 0, 0, 0
	walk("parameters", params, func(path string, s map[string]any, depth int) {
		for k := range s {
			if !slices.Contains(strictKeywords, k) {
				bad = append(bad, fmt.Sprintf("%s: keyword %q is not supported in strict mode", path, k))
			}
		}
		types := typesOf(s)
		if _, alts := s["anyOf"]; len(types) == 0 && !alts {
			bad = append(bad, path+": a schema without a type")
		}
		for _, ty := range types {
			if !slices.Contains([]string{"string", "number", "boolean", "integer", "object", "array", "null"}, ty) {
				bad = append(bad, fmt.Sprintf("%s: type %q is not supported", path, ty))
			}
		}
		if depth > 10 {
			bad = append(bad, path+": more than 10 levels of nesting")
		}
		if hasType(s, "object") {
			p, _ := s["properties"].(map[string]any)
			props += len(p)
			if s["additionalProperties"] != false {
				bad = append(bad, path+": an object without additionalProperties: false")
			}
			req := stringsOf(s["required"])
			for name := range p {
				chars += len(name)
				if !slices.Contains(req, name) {
					bad = append(bad, fmt.Sprintf("%s: property %q is not required", path, name))
				}
			}
		}
		if enum, ok := s["enum"].([]any); ok {
			enums += len(enum)
			enumChars := 0
			for _, v := range enum {
				if !fitsTypes(v, types) {
					bad = append(bad, fmt.Sprintf("%s: enum value %v is not of the type %v", path, v, types))
				}
				if str, ok := v.(string); ok {
					enumChars += len(str)
				}
			}
			chars += enumChars
			if len(enum) > 250 && enumChars > 15000 {
				bad = append(bad, path+": an enum of more than 250 strings over 15,000 characters")
			}
		}
	})
	if props > 5000 {
		bad = append(bad, fmt.Sprintf("%d object properties, more than 5000", props))
	}
	if chars > 120000 {
		bad = append(bad, fmt.Sprintf("%d characters of names and enum values, more than 120,000", chars))
	}
	if enums > 1000 {
		bad = append(bad, fmt.Sprintf("%d enum values, more than 1000", enums))
	}
	return bad
}

// checkAnthropic checks a tool as Anthropic's Messages API takes a client
// tool (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview,
// "Specifying client tools"; API reference, Messages, tools[]):
//   - name: "Must match the regex ^[a-zA-Z0-9_-]{1,64}$";
//   - description: "A detailed plaintext description of what the tool
//     does";
//   - input_schema: "A JSON Schema object defining the expected parameters
//     for the tool", whose type is "object";
//   - no other keys than the API's (type, cache_control and the like are
//     optional; this format has none of them).
func checkAnthropic(spec map[string]any) []string {
	bad := onlyKeys("", spec, "name", "description", "input_schema")
	if name, _ := spec["name"].(string); !regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`).MatchString(name) {
		bad = append(bad, fmt.Sprintf("name %q does not match ^[a-zA-Z0-9_-]{1,64}$", name))
	}
	if d, _ := spec["description"].(string); d == "" {
		bad = append(bad, "no description")
	}
	schema, ok := spec["input_schema"].(map[string]any)
	if !ok {
		return append(bad, "input_schema is not an object")
	}
	if schema["type"] != "object" {
		bad = append(bad, `input_schema's type is not "object"`)
	}
	return append(bad, validSchema("input_schema", schema)...)
}

// checkMCP checks a tool as MCP's tools/list gives one (the specification,
// revision 2025-11-25, Server features, Tools:
// https://modelcontextprotocol.io/specification/2025-11-25/server/tools,
// and its schema.ts, Tool):
//   - name: "between 1 and 128 characters", of "uppercase and lowercase
//     ASCII letters (A-Z, a-z), digits (0-9), underscore (_), hyphen (-),
//     and dot (.)";
//   - inputSchema: "A JSON Schema object defining the expected parameters
//     for the tool", with type "object"; "MUST be a valid JSON Schema
//     object (not null)", of 2020-12 when it has no $schema;
//   - annotations, when there, are ToolAnnotations: title, readOnlyHint,
//     destructiveHint, idempotentHint, openWorldHint;
//   - no keys Tool doesn't have (name, title, description, inputSchema,
//     outputSchema, annotations, icons, execution, _meta).
func checkMCP(spec map[string]any) []string {
	bad := onlyKeys("", spec, "name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "execution", "_meta")
	if name, _ := spec["name"].(string); !regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`).MatchString(name) {
		bad = append(bad, fmt.Sprintf("name %q is not 1 to 128 of A-Z a-z 0-9 _ - .", name))
	}
	schema, ok := spec["inputSchema"].(map[string]any)
	if !ok {
		return append(bad, "inputSchema is not an object")
	}
	if schema["type"] != "object" {
		bad = append(bad, `inputSchema's type is not "object"`)
	}
	bad = append(bad, validSchema("inputSchema", schema)...)
	if a, ok := spec["annotations"]; ok {
		m, ok := a.(map[string]any)
		if !ok {
			return append(bad, "annotations is not an object")
		}
		bad = append(bad, onlyKeys("annotations", m, "title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")...)
	}
	return bad
}

// validSchema says what is wrong with a JSON Schema: one a 2020-12
// validator can't resolve, or with a keyword no JSON Schema has.
func validSchema(where string, schema map[string]any) []string {
	data, _ := json.Marshal(schema)
	var s jsonschema.Schema
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&s); err != nil {
		return []string{fmt.Sprintf("%s is not a JSON Schema: %v", where, err)}
	}
	if _, err := s.Resolve(nil); err != nil {
		return []string{fmt.Sprintf("%s does not resolve: %v", where, err)}
	}
	var bad []string
	walk(where, schema, func(path string, s map[string]any, _ int) {
		for k := range s {
			if !slices.Contains(schemaKeywords, k) {
				bad = append(bad, fmt.Sprintf("%s: %q is not a JSON Schema keyword", path, k))
			}
		}
	})
	return bad
}

// schemaKeywords are the JSON Schema 2020-12 keywords a tool's schema may
// use (Core and Validation vocabularies, and annotations).
var schemaKeywords = []string{
	"$schema", "$id", "$defs", "$ref", "$comment", "type", "enum", "const", "description", "title", "default", "examples",
	"properties", "required", "additionalProperties", "items", "prefixItems", "anyOf", "oneOf", "allOf", "not",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
	"format", "minItems", "maxItems", "uniqueItems",
}

// walk calls f on every schema within s (s too), with its path and depth
// (the root is 1; each properties or items level adds one).
func walk(path string, s map[string]any, f func(path string, s map[string]any, depth int)) {
	var rec func(path string, s map[string]any, depth int)
	rec = func(path string, s map[string]any, depth int) {
		f(path, s, depth)
		if props, ok := s["properties"].(map[string]any); ok {
			names := make([]string, 0, len(props))
			for n := range props {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if p, ok := props[n].(map[string]any); ok {
					rec(path+".properties."+n, p, depth+1)
				}
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			rec(path+".items", items, depth+1)
		}
		if alts, ok := s["anyOf"].([]any); ok {
			for i, a := range alts {
				if m, ok := a.(map[string]any); ok {
					rec(fmt.Sprintf("%s.anyOf[%d]", path, i), m, depth)
				}
			}
		}
	}
	rec(path, s, 1)
}

func typesOf(s map[string]any) []string {
	switch ty := s["type"].(type) {
	case string:
		return []string{ty}
	case []any:
		return stringsOf(ty)
	}
	return nil
}

func hasType(s map[string]any, ty string) bool { return slices.Contains(typesOf(s), ty) }

func stringsOf(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func fitsTypes(v any, types []string) bool {
	switch x := v.(type) {
	case nil:
		return slices.Contains(types, "null")
	case string:
		return slices.Contains(types, "string")
	case bool:
		return slices.Contains(types, "boolean")
	case float64:
		return slices.Contains(types, "number") || slices.Contains(types, "integer") && x == float64(int64(x))
	}
	return false
}

func onlyKeys(where string, m map[string]any, keys ...string) []string {
	var bad []string
	for k := range m {
		if !slices.Contains(keys, k) {
			bad = append(bad, fmt.Sprintf("%s: key %q is not one the API takes (%s)", strings.TrimPrefix(where+" ", " "), k, strings.Join(keys, ", ")))
		}
	}
	sort.Strings(bad)
	return bad
}

// exampleTools are every tool of the examples: examples/tools/*.toml and
// the [[tool]] written (commented out) in examples/toolhost.toml.
func exampleTools(t *testing.T) []*Tool {
	t.Helper()
	defs, errs := config.LoadTools("../../examples/tools")
	if errs != nil {
		t.Fatal(errs)
	}
	data, err := os.ReadFile("../../examples/toolhost.toml")
	if err != nil {
		t.Fatal(err)
	}
	// The commented [[tool]] block, as a tool file.
	var block []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "# [[tool]]":
			in = true
		case in && !strings.HasPrefix(line, "# "):
			in = false
		case in:
			line = strings.TrimPrefix(line, "# ")
			line = strings.NewReplacer("[[tool.params]]", "[[params]]", "[tool.run]", "[run]").Replace(line)
			block = append(block, line)
		}
	}
	if len(block) == 0 {
		t.Fatal("examples/toolhost.toml has no # [[tool]] block any more: say here where its example tool is")
	}
	def, err := config.ParseTool("examples/toolhost.toml", []byte(strings.Join(block, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	defs = append(defs, def)
	out := make([]*Tool, len(defs))
	for i, d := range defs {
		out[i] = &Tool{Tool: d, Kind: d.Kind()}
	}
	if len(out) < 5 {
		t.Fatalf("only %d example tools", len(out))
	}
	return out
}

// generatedTools are tools with every param kind: each kind required and
// optional, with and without options, each list items kind; and one tool
// with all of them.
func generatedTools() []*Tool {
	var all []config.Param
	var out []*Tool
	add := func(p config.Param) {
		all = append(all, p)
		out = append(out, &Tool{Tool: config.Tool{Name: "t_" + p.Name, Description: "A tool of one param.", Effect: "read", Params: []config.Param{p}}, Kind: "echo"})
	}
	options := map[string][]string{"text": {"red", "blue", "ünï ✓"}, "number": {"0.5", "2", "-1e3", "12345678901234567890"}, "integer": {"1", "2", "-9007199254740991"}}
	for _, kind := range []string{"text", "number", "integer", "bool", "json", "list"} {
		for _, req := range []bool{true, false} {
			name := fmt.Sprintf("%s_%v", kind, req)
			if kind == "list" {
				for _, items := range config.ItemTypes {
					add(config.Param{Name: name + "_" + items, Type: kind, Required: req, Items: items, Description: "a list of " + items})
				}
				continue
			}
			add(config.Param{Name: name, Type: kind, Required: req, Description: "a " + kind})
			if opts, ok := options[kind]; ok {
				add(config.Param{Name: name + "_options", Type: kind, Required: req, Options: opts})
			}
		}
	}
	out = append(out, &Tool{Tool: config.Tool{Name: "every_kind", Description: "A tool of every param kind.", Effect: "change", Params: all}, Kind: "echo"})
	out = append(out, &Tool{Tool: config.Tool{Name: "no_params", Description: "A tool of no params.", Effect: "read"}, Kind: "echo"})
	return out
}

// asJSON is v as a client decodes it.
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(marshal(t, v)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSpecsPassTheProvidersRules: every example tool's spec, and every
// generated one, passes the OpenAI, Anthropic and MCP checkers, and the
// strict checker unless the tool has a json value (then it is named, and
// given with strict: false, which the OpenAI checker passes).
func TestSpecsPassTheProvidersRules(t *testing.T) {
	tools := append(exampleTools(t), generatedTools()...)
	for _, tool := range tools {
		report := func(rules string, bad []string) {
			t.Helper()
			if len(bad) > 0 {
				t.Errorf("%s (%s) breaks %s's rules:\n  %s", tool.Name, tool.Source, rules, strings.Join(bad, "\n  "))
			}
		}
		openai, _ := tool.OpenAI(false)
		report("OpenAI", checkOpenAI(asJSON(t, openai)))
		report("Anthropic", checkAnthropic(asJSON(t, tool.Anthropic())))
		report("MCP", checkMCP(asJSON(t, tool.MCP())))
		report("the default format (OpenAI's, with effect and kind)", checkOpenAI(without(asJSON(t, tool.Spec()), "effect", "kind")))
		strict, why := tool.OpenAI(true)
		if why == "" {
			report("OpenAI strict mode", checkStrict(asJSON(t, strict)))
		} else {
			report("OpenAI (a tool given with strict: false)", checkOpenAI(asJSON(t, strict)))
			if strict.Function.Strict == nil || *strict.Function.Strict {
				t.Errorf("%s: strict mode can't describe it (%s), yet strict is not false", tool.Name, why)
			}
		}
	}
	// Every example tool has a strict form.
	for _, tool := range exampleTools(t) {
		if _, why := tool.OpenAI(true); why != "" {
			t.Errorf("example %s has no strict form: %s", tool.Name, why)
		}
	}
}

// TestCheckersCatchWhatProvidersRefuse: each checker refuses the specs its
// provider refuses (a checker that passes everything proves nothing).
func TestCheckersCatchWhatProvidersRefuse(t *testing.T) {
	tool := &Tool{Tool: config.Tool{Name: "t", Description: "d", Effect: "read", Params: []config.Param{{Name: "l", Type: "list", Items: "text"}, {Name: "n", Type: "number"}}}, Kind: "echo"}
	strict, _ := tool.OpenAI(true)
	mutate := func(v any, f func(m map[string]any)) map[string]any {
		m := asJSON(t, v)
		f(m)
		return m
	}
	params := func(m map[string]any) map[string]any {
		return m["function"].(map[string]any)["parameters"].(map[string]any)
	}
	prop := func(m map[string]any, name string) map[string]any {
		return params(m)["properties"].(map[string]any)[name].(map[string]any)
	}
	for _, c := range []struct {
		name  string
		check func(map[string]any) []string
		spec  map[string]any
		want  string
	}{
		{"openai: effect and kind", checkOpenAI, asJSON(t, tool.Spec()), `key "effect" is not one the API takes`},
		{"openai: array without items", checkOpenAI, mutate(strict, func(m map[string]any) { delete(prop(m, "l"), "items") }), "an array schema without items"},
		{"openai: bad name", checkOpenAI, mutate(strict, func(m map[string]any) { m["function"].(map[string]any)["name"] = "a b" }), "does not match"},
		{"strict: optional not required", checkStrict, mutate(strict, func(m map[string]any) { params(m)["required"] = []any{"l"} }), `property "n" is not required`},
		{"strict: additionalProperties", checkStrict, mutate(strict, func(m map[string]any) { delete(params(m), "additionalProperties") }), "without additionalProperties: false"},
		{"strict: no type", checkStrict, mutate(strict, func(m map[string]any) { delete(prop(m, "n"), "type") }), "a schema without a type"},
		{"strict: unsupported keyword", checkStrict, mutate(strict, func(m map[string]any) { prop(m, "l")["uniqueItems"] = true }), `keyword "uniqueItems" is not supported`},
		{"strict: not strict", checkStrict, mutate(strict, func(m map[string]any) { delete(m["function"].(map[string]any), "strict") }), "function.strict is <nil>, not true"},
		{"strict: too deep", checkStrict, mutate(strict, func(m map[string]any) {
			s := prop(m, "l")
			for range 10 {
				s["items"] = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
				s = s["items"].(map[string]any)
			}
		}), "more than 10 levels of nesting"},
		{"anthropic: not an object", checkAnthropic, mutate(tool.Anthropic(), func(m map[string]any) { m["input_schema"].(map[string]any)["type"] = "array" }), `input_schema's type is not "object"`},
		{"anthropic: bad name", checkAnthropic, mutate(tool.Anthropic(), func(m map[string]any) { m["name"] = strings.Repeat("a", 65) }), "does not match"},
		{"mcp: extra key", checkMCP, mutate(tool.MCP(), func(m map[string]any) { m["effect"] = "read" }), `key "effect" is not one the API takes`},
		{"mcp: no schema", checkMCP, mutate(tool.MCP(), func(m map[string]any) { m["inputSchema"] = nil }), "inputSchema is not an object"},
		{"schema: unknown keyword", checkMCP, mutate(tool.MCP(), func(m map[string]any) { m["inputSchema"].(map[string]any)["requird"] = []any{} }), `"requird" is not a JSON Schema keyword`},
	} {
		bad := c.check(c.spec)
		if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: the checker said %q, want %q", c.name, bad, c.want)
		}
	}
}

func without(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

// TestExampleToolsLoad is a guard for the checkers above: the examples
// folder is where they say.
func TestExampleToolsLoad(t *testing.T) {
	files, _ := filepath.Glob("../../examples/tools/*.toml")
	if got := len(exampleTools(t)); got != len(files)+1 {
		t.Errorf("%d example tools from %d files and toolhost.toml", got, len(files))
	}
}
