package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// version is this kind's own version.
const version = "0.1.0"

// runSchema is the JSON Schema of a prompt tool's run table. Check is the
// validator; the schema says the same to people and editors.
//
//go:embed run.schema.json
var runSchema string

// Limits of a run table.
const maxMaxTokens = 100000

// Codes of this kind's own errors.
const (
	codeNotJSON = "not_json"
	codeBadTool = "bad_tool"
)

// kind is the prompt kind. It holds nothing: every run asks the host.
type kind struct{}

var _ sdk.Kind = (*kind)(nil)

// run is a prompt tool's run table, normalised.
type run struct {
	Type      string `json:"type"`
	System    string `json:"system"`
	Prompt    string `json:"prompt"`
	Format    string `json:"format"`
	MaxTokens int    `json:"max_tokens"`
}

// plan is a checked run table, its templates parsed.
type plan struct {
	run
	system, prompt template
}

func (*kind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "prompt", Version: version, RunSchema: json.RawMessage(runSchema), OpenRunTable: true}, nil
}

// Configure takes no settings: the model is the host's ([model]).
func (*kind) Configure(_ context.Context, raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return sdk.FieldErrors{{Path: "prompt", Message: "must be a table; the prompt kind takes no settings (the model it asks is set in [model])"}}
	}
	var fe sdk.FieldErrors
	for _, k := range sortedKeys(m) {
		fe = append(fe, sdk.FieldError{Path: "prompt." + k,
			Message: fmt.Sprintf("%q is not a setting: the prompt kind takes no settings; the model it asks, its key and max_tokens are set in [model]", clip(k, 40))})
	}
	if fe != nil {
		return fe
	}
	return nil
}

func (*kind) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	p, err := compile(tool)
	if err != nil {
		return nil, err
	}
	return json.Marshal(p.run)
}

// runKeys are the keys of a prompt run table.
func runKeys() []string { return []string{"type", "system", "prompt", "format", "max_tokens"} }

// compile checks a tool's run table against its params and parses its
// templates. The error is sdk.FieldErrors.
func compile(tool sdk.Tool) (*plan, error) {
	t, err := sdk.DecodeRunTable(tool.Run)
	if err != nil {
		return nil, err
	}
	p := &plan{run: run{Type: "prompt", Format: "text"}}
	if typ, ok := t.String("type", "must be text"); ok && typ != "prompt" {
		t.Errorf("type", "must be \"prompt\" for this kind, not %q", clip(typ, 40))
	}
	parsed := p.readTemplates(t)
	p.checkParams(t, tool.Params, parsed)
	p.readFormat(t)
	p.readMaxTokens(t)
	t.Done(func(k string) string {
		return fmt.Sprintf("%q is not a key of a prompt run: the keys are type, system, prompt, format and max_tokens", clip(k, 40))
	})
	if err := t.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// readTemplates reads run.system and run.prompt and parses them. It says
// whether both could be read, so that a parameter they don't use is known
// to be unused.
func (p *plan) readTemplates(t *sdk.RunTable) (parsed bool) {
	parsed = true
	if t.Has("system") && !readTemplate(t, "system", &p.System, &p.system) {
		parsed = false
	}
	if !t.Has("prompt") {
		t.Errorf("prompt", "is missing: write the question to the model, with {{name}} where a parameter's value goes")
		return false
	}
	return readTemplate(t, "prompt", &p.Prompt, &p.prompt) && parsed
}

// readTemplate reads the template at key into text and parsed; false when
// it can't.
func readTemplate(t *sdk.RunTable, key string, text *string, parsed *template) bool {
	s, ok := t.String(key, "must be text")
	if !ok {
		return false
	}
	*text = s
	if key == "prompt" && strings.TrimSpace(s) == "" {
		t.Errorf("prompt", "is empty: write the question to the model, with {{name}} where a parameter's value goes")
		return false
	}
	tt, err := parseTemplate(s)
	if err != nil {
		t.Errorf(key, "%v", err)
		return false
	}
	*parsed = tt
	return true
}

// checkParams matches the templates' placeholders with the params: each
// placeholder names one, and (when both templates were parsed) each is
// used.
func (p *plan) checkParams(t *sdk.RunTable, params []sdk.Param, parsed bool) {
	known := map[string]bool{}
	for _, prm := range params {
		known[prm.Name] = true
	}
	used := map[string]bool{}
	for _, f := range []struct {
		key string
		t   template
	}{{"system", p.system}, {"prompt", p.prompt}} {
		for _, n := range f.t.names() {
			used[n] = true
			if !known[n] {
				t.Errorf(f.key, "{{%s}} is not a parameter of this tool; %s", n, paramList(params))
			}
		}
	}
	if !parsed {
		return
	}
	for i, prm := range params {
		if used[prm.Name] {
			continue
		}
		what := "optional"
		if prm.Required {
			what = "required"
		}
		t.ErrorAt(fmt.Sprintf("params[%d].name", i),
			"%s is a %s parameter of this tool, but neither run.system nor run.prompt uses it, so its value would never reach the model: write {{%s}} where it belongs, or remove the parameter",
			prm.Name, what, prm.Name)
	}
}

// readFormat reads run.format, text or json.
func (p *plan) readFormat(t *sdk.RunTable) {
	f, ok := t.String("format", "must be \"text\" or \"json\"")
	switch {
	case !ok:
	case f != "text" && f != "json":
		t.Errorf("format", "must be \"text\" (the answer as it is) or \"json\" (the answer parsed as JSON), not %q", clip(f, 40))
	default:
		p.Format = f
	}
}

// readMaxTokens reads run.max_tokens.
func (p *plan) readMaxTokens(t *sdk.RunTable) {
	wrong := fmt.Sprintf("must be a whole number of tokens from 0 to %d (0 takes the host's [model] max_tokens), not %s",
		maxMaxTokens, clip(t.Written("max_tokens"), 40))
	if n, ok := t.Int("max_tokens", 0, maxMaxTokens, wrong); ok {
		p.MaxTokens = n
	}
}

// paramList says what the tool's parameters are, for an error message.
func paramList(params []sdk.Param) string {
	if len(params) == 0 {
		return "this tool has no parameters"
	}
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	return "its parameters are " + strings.Join(names, ", ")
}

func (*kind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	p, err := compile(call.Tool)
	if err != nil {
		return nil, sdk.Errorf(codeBadTool, "the tool %s does not pass its check: %s", call.Tool.Name, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	var args map[string]json.RawMessage
	if len(bytes.TrimSpace(call.Args)) > 0 {
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return nil, sdk.Errorf(errcode.BadArgs, "the arguments are not a JSON object: %v", err)
		}
	}
	values := make(map[string]string, len(call.Tool.Params))
	for _, prm := range call.Tool.Params {
		values[prm.Name] = valueText(prm.Type, args[prm.Name])
	}
	ans, err := call.Host.AskModel(ctx, sdk.ModelRequest{
		ParentRunID: call.RunID,
		System:      p.system.fill(values),
		Prompt:      p.prompt.fill(values),
		JSON:        p.Format == "json",
		MaxTokens:   p.MaxTokens,
		OnText: func(s string) {
			if s != "" {
				emit.Stdout([]byte(s))
			}
		},
	})
	if err != nil {
		// The host's own codes and words (model_unreachable …), as they are.
		return nil, err
	}
	emit.Log("debug", fmt.Sprintf("the model %s answered with %d tokens (%d in)", ans.Model, ans.OutputTokens, ans.InputTokens))
	if p.Format == "json" {
		return parseJSONAnswer(ans.Text)
	}
	return marshalText(ans.Text)
}

// marshalText is s as a JSON string, with <, > and & as they are.
func marshalText(s string) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encoding the answer: %w", err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// parseJSONAnswer reads an answer asked for as JSON: the answer, or the
// inside of the one ``` or ```json fence it is wrapped in.
func parseJSONAnswer(text string) (json.RawMessage, error) {
	s := strings.TrimSpace(text)
	if s == "" {
		return nil, sdk.Errorf(codeNotJSON, "the model was asked for JSON (run.format = \"json\") but its answer was empty")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(stripFence(s))); err != nil {
		return nil, sdk.Errorf(codeNotJSON,
			"the model was asked for JSON (run.format = \"json\") but its answer is not JSON (%v); it starts %q. Say in the prompt that the answer must be JSON only, and which fields it has",
			err, clip(s, 80))
	}
	return b.Bytes(), nil
}

// stripFence returns the inside of a Markdown code fence that wraps all of
// s (```json … ```, or ``` … ```), or s when there is none.
func stripFence(s string) string {
	if len(s) < 6 || !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") {
		return s
	}
	inner := s[3 : len(s)-3]
	if nl := strings.IndexByte(inner, '\n'); nl >= 0 && isInfoString(strings.TrimSpace(inner[:nl])) {
		inner = inner[nl+1:]
	}
	return strings.TrimSpace(inner)
}

// isInfoString says whether s can be a fence's language name ("json",
// "JSON", "" …) rather than the start of the answer.
func isInfoString(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
