package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestSchemaAndCheckAgree is the differential test of the one truth for
// arguments: over generated arguments for tools of every param kind (and
// the examples), a JSON Schema 2020-12 validator given the schema a client
// reads (the parameters of each format, through JSON) accepts exactly
// what CheckArgs accepts. Arguments a strict-mode schema accepts are
// accepted too, and where every param is given the two agree both ways.
// Every refusal names its param (or says the whole is not an object), and
// the rules written out for that (explain) find a fault exactly when the
// schema does.
//
// What is not compared: arguments that are nothing or null, which the
// protocol takes as no arguments ({}) before any check.
func TestSchemaAndCheckAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2026))
	const perTool = 600
	tools := append(generatedTools(), exampleTools(t)...)
	var cases, accepted, beyondFloat, disagree int
	for _, tool := range tools {
		published := publishedSchema(t, tool)
		var strict *jsonschema.Resolved
		if spec, why := tool.OpenAI(true); why == "" {
			strict = resolve(t, asJSON(t, spec)["function"].(map[string]any)["parameters"])
		}
		for range perTool {
			raw, allGiven := genArgs(rng, tool)
			cases++
			_, err := CheckArgs(tool, json.RawMessage(raw))
			hostOK := err == nil
			var instance any
			if json.Unmarshal([]byte(raw), &instance) != nil {
				// A number beyond a float64: no validator can hold it.
				beyondFloat++
				if hostOK {
					t.Errorf("%s: %s: accepted a number beyond a float64", tool.Name, raw)
				}
				continue
			}
			schemaOK := published.Validate(instance) == nil
			if hostOK != schemaOK {
				disagree++
				if disagree <= 20 {
					t.Errorf("%s: %s: the schema says %v, the host %v (%v)", tool.Name, raw, schemaOK, hostOK, err)
				}
			}
			// The written-out rules (which name the param) find a fault
			// exactly when the schema does.
			if args, err := decodeArgs(tool, json.RawMessage(raw)); err == nil {
				if found := explain(tool, args); (found == nil) != schemaOK {
					disagree++
					t.Errorf("%s: %s: the schema says %v, the written-out rules %v", tool.Name, raw, schemaOK, found)
				}
			}
			if hostOK {
				accepted++
			} else {
				var ae *ArgError
				_, isObject := instance.(map[string]any)
				if !errors.As(err, &ae) || isObject && ae.Param == "" && !strings.Contains(ae.Message, "an argument's name is empty") {
					t.Errorf("%s: %s: refused without naming a param: %v", tool.Name, raw, err)
				}
			}
			if strict != nil {
				strictOK := strict.Validate(instance) == nil
				if strictOK && !hostOK || allGiven && strictOK != hostOK {
					disagree++
					t.Errorf("%s: %s: the strict schema says %v, the host %v (%v)", tool.Name, raw, strictOK, hostOK, err)
				}
			}
		}
	}
	t.Logf("%d tools, %d arguments: %d accepted, %d refused (%d with a number beyond a float64); %d disagreements",
		len(tools), cases, accepted, cases-accepted, beyondFloat, disagree)
	if accepted < cases/10 || accepted > cases*9/10 {
		t.Errorf("%d of %d accepted: the generator should make both kinds in good number", accepted, cases)
	}
}

// publishedSchema is the tool's parameters as every format publishes
// them (checked to be one and the same), resolved.
func publishedSchema(t *testing.T, tool *Tool) *jsonschema.Resolved {
	t.Helper()
	openai, _ := tool.OpenAI(false)
	forms := map[string]any{
		"toolhost":  asJSON(t, tool.Spec())["function"].(map[string]any)["parameters"],
		"openai":    asJSON(t, openai)["function"].(map[string]any)["parameters"],
		"anthropic": asJSON(t, tool.Anthropic())["input_schema"],
		"mcp":       asJSON(t, tool.MCP())["inputSchema"],
	}
	want := marshal(t, forms["toolhost"])
	for format, s := range forms {
		if got := marshal(t, s); got != want {
			t.Fatalf("%s: the %s format's schema differs:\n%s\nwant\n%s", tool.Name, format, got, want)
		}
	}
	return resolve(t, forms["toolhost"])
}

func resolve(t *testing.T, schema any) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(marshal(t, schema)), &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// genArgs makes the arguments of one call: each param given or not, with
// a value of its kind or of any other, now and then a name that is no
// param, a name given twice, or something else than an object. allGiven
// says every param is given, once.
func genArgs(rng *rand.Rand, tool *Tool) (raw string, allGiven bool) {
	if rng.IntN(50) == 0 {
		return pick(rng, `[]`, `[{}]`, `"x"`, `1`, `true`, `{"a":1`, `{} {}`), false
	}
	var parts []string
	allGiven = true
	for _, p := range tool.Params {
		if rng.IntN(4) == 0 {
			allGiven = false
			continue
		}
		parts = append(parts, strconv.Quote(p.Name)+":"+genValue(rng, p.Type, p.Items, p.Options))
		if rng.IntN(40) == 0 {
			allGiven = false
			parts = append(parts, strconv.Quote(p.Name)+":"+genValue(rng, p.Type, p.Items, p.Options))
		}
	}
	if rng.IntN(10) == 0 {
		allGiven = false
		parts = append(parts, strconv.Quote(pick(rng, "zz", "Text", "ключ", "", "text "))+":"+genValue(rng, "json", "", nil))
	}
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ",") + "}", allGiven
}

// anyValues are JSON values of every sort, the edges of numbers and
// strings among them.
var anyValues = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `2.0`, `1.5`, `-7`, `1e3`, `1E3`, `20e-1`, `1e20`, `-1e20`, `1e308`,
	`1e-400`, `9007199254740991`, `9007199254740992`, `-9007199254740991`, `-9007199254740992`,
	`9007199254740991.5`, `12345678901234567890`, `0.1`, `0.99999999999999999999`, `1.0000000000000000001`,
	`""`, `"a"`, `"ünï ✓"`, `"\u0000"`, `"😀"`, `"مرحبا"`, `"\ud800"`, `"2"`, `"true"`, `"null"`, `"red"`,
	`[]`, `[1,"a"]`, `[[1,[2]],"a"]`, `[null]`, `[1e20]`, `["red","blue"]`, `[true,false]`, `[1,2.5]`,
	`{}`, `{"a":null,"b":[1]}`, `{"ключ":"v"}`,
}

// genValue makes a value for a param: of any sort, or mostly of its kind.
func genValue(rng *rand.Rand, kind, items string, options []string) string {
	if rng.IntN(1000) == 0 {
		return pick(rng, `1e400`, `-1e400`, `[1e999]`)
	}
	if len(options) > 0 && rng.IntN(3) == 0 {
		o := options[rng.IntN(len(options))]
		if kind == "text" || rng.IntN(4) == 0 {
			return strconv.Quote(o)
		}
		return pick(rng, o, o+".0", o+"e0")
	}
	if rng.IntN(3) == 0 {
		return anyValues[rng.IntN(len(anyValues))]
	}
	switch kind {
	case "text":
		return genString(rng)
	case "number":
		return genNumber(rng)
	case "integer":
		if rng.IntN(4) == 0 {
			return genNumber(rng)
		}
		return strconv.FormatInt(rng.Int64N(1<<54)-1<<53, 10)
	case "bool":
		return pick(rng, "true", "false")
	case "list":
		n := rng.IntN(4)
		l := make([]string, n)
		for i := range l {
			if rng.IntN(8) == 0 {
				l[i] = anyValues[rng.IntN(len(anyValues))]
			} else {
				l[i] = genValue(rng, items, "", nil)
			}
		}
		return "[" + strings.Join(l, ",") + "]"
	}
	// json: anything, nested
	if rng.IntN(2) == 0 {
		return fmt.Sprintf(`{"k":%s,"l":[%s,%s]}`, genValue(rng, "text", "", nil), genValue(rng, "number", "", nil), anyValues[rng.IntN(len(anyValues))])
	}
	return anyValues[rng.IntN(len(anyValues))]
}

func genString(rng *rand.Rand) string {
	ranges := [][2]rune{{0, 0x7f}, {0x80, 0x7ff}, {0x590, 0x6ff}, {0x1f600, 0x1f64f}, {0x4e00, 0x4fff}}
	var b strings.Builder
	for range rng.IntN(8) {
		r := ranges[rng.IntN(len(ranges))]
		b.WriteRune(r[0] + rng.Int32N(r[1]-r[0]+1))
	}
	data, _ := json.Marshal(b.String())
	return string(data)
}

func genNumber(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return strconv.FormatFloat(rng.NormFloat64()*1e6, 'g', -1, 64)
	case 1:
		return strconv.FormatFloat(rng.Float64(), 'e', rng.IntN(20), 64)
	case 2:
		return fmt.Sprintf("%de%d", rng.IntN(100)-50, rng.IntN(40)-20)
	}
	return strconv.Itoa(rng.IntN(2000) - 1000)
}

func pick(rng *rand.Rand, options ...string) string { return options[rng.IntN(len(options))] }
