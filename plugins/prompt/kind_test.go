package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// fakeHost answers AskModel with answer, and keeps every request it got
// (OnText left out).
type fakeHost struct {
	answer func(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error)

	mu   sync.Mutex
	reqs []sdk.ModelRequest
}

func (h *fakeHost) CallTool(context.Context, sdk.ToolCall) (sdk.ToolResult, error) {
	return sdk.ToolResult{}, errors.New("a prompt tool calls no tools")
}

func (h *fakeHost) AskModel(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
	kept := req
	kept.OnText = nil
	h.mu.Lock()
	h.reqs = append(h.reqs, kept)
	h.mu.Unlock()
	return h.answer(ctx, req)
}

// only is the one request the host got.
func (h *fakeHost) only(t *testing.T) sdk.ModelRequest {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reqs) != 1 {
		t.Fatalf("the host was asked %d times, want once: %+v", len(h.reqs), h.reqs)
	}
	return h.reqs[0]
}

// streaming is a model that writes its answer in these pieces.
func streaming(pieces ...string) *fakeHost {
	return &fakeHost{answer: func(_ context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
		for _, p := range pieces {
			if req.OnText != nil {
				req.OnText(p)
			}
		}
		return sdk.ModelAnswer{Text: strings.Join(pieces, ""), Model: "fake-model", InputTokens: 10, OutputTokens: len(pieces)}, nil
	}}
}

// start serves the kind in-process with host behind it, configured as
// the host does.
func start(t *testing.T, host sdk.Host) *sdktest.Conn {
	t.Helper()
	c := sdktest.Start(t, &kind{}, host)
	if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatalf("configure: %v", err)
	}
	return c
}

func param(name, kind string, required bool) sdk.Param {
	return sdk.Param{Name: name, Type: kind, Required: required}
}

// summarise is the tool of the kind's documentation.
func summarise(t *testing.T, run map[string]any) sdk.Tool {
	t.Helper()
	r := map[string]any{"type": "prompt", "system": "You write one-sentence summaries in a {{tone}} tone.", "prompt": "Summarise:\n\n{{text}}"}
	for k, v := range run {
		r[k] = v
	}
	return sdktest.Tool(t, "summarise", r, param("text", "text", true), sdk.Param{Name: "tone", Type: "text", Options: []string{"plain", "cheerful"}})
}

func TestDescribe(t *testing.T) {
	info, err := (&kind{}).Describe(context.Background())
	if err != nil || info.Kind != "prompt" || info.ConfigSchema != nil {
		t.Fatalf("got %+v, %v", info, err)
	}
	// The schema says what Check does: the same keys, formats and bounds.
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Enum    []string `json:"enum"`
			Minimum *int     `json:"minimum"`
			Maximum *int     `json:"maximum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(info.RunSchema, &s); err != nil {
		t.Fatalf("the run schema is not JSON: %v", err)
	}
	if got := sortedKeys(s.Properties); !slices.Equal(got, sortedKeys(map[string]bool{"type": true, "system": true, "prompt": true, "format": true, "max_tokens": true})) ||
		!slices.Equal(got, slices.Sorted(slices.Values(runKeys()))) {
		t.Errorf("the schema's keys are %v, Check's %v", got, runKeys())
	}
	if !slices.Equal(s.Required, []string{"type", "prompt"}) {
		t.Errorf("required: %v", s.Required)
	}
	if f := s.Properties["format"].Enum; !slices.Equal(f, []string{"text", "json"}) {
		t.Errorf("format enum: %v", f)
	}
	mt := s.Properties["max_tokens"]
	if mt.Minimum == nil || *mt.Minimum != 0 || mt.Maximum == nil || *mt.Maximum != maxMaxTokens {
		t.Errorf("max_tokens bounds: %v %v", mt.Minimum, mt.Maximum)
	}
}

func TestConfigureTakesNoSettings(t *testing.T) {
	k := &kind{}
	if err := k.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatalf("{}: %v", err)
	}
	err := k.Configure(context.Background(), json.RawMessage(`{"model":"llama3"}`))
	var fe sdk.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Path != "prompt.model" || !strings.Contains(fe[0].Message, "[model]") {
		t.Fatalf("a setting: %v", err)
	}
	if err := k.Configure(context.Background(), json.RawMessage(`[]`)); !errors.As(err, &fe) || fe[0].Path != "prompt" {
		t.Fatalf("not a table: %v", err)
	}
}

func TestCheckNormalises(t *testing.T) {
	c := start(t, nil)
	for _, tc := range []struct {
		name string
		tool sdk.Tool
		want string
	}{
		{"defaults", sdktest.Tool(t, "hi", map[string]any{"type": "prompt", "prompt": "Say hello."}),
			`{"type":"prompt","system":"","prompt":"Say hello.","format":"text","max_tokens":0}`},
		{"everything", summarise(t, map[string]any{"format": "json", "max_tokens": 100000}),
			`{"type":"prompt","system":"You write one-sentence summaries in a {{tone}} tone.","prompt":"Summarise:\n\n{{text}}","format":"json","max_tokens":100000}`},
		{"spaces inside the braces", sdktest.Tool(t, "s", map[string]any{"type": "prompt", "prompt": "Summarise {{ text }} and {{text}}"}, param("text", "text", true)),
			`{"type":"prompt","system":"","prompt":"Summarise {{ text }} and {{text}}","format":"text","max_tokens":0}`},
		{"a parameter used only in system", sdktest.Tool(t, "s", map[string]any{"type": "prompt", "system": "Be {{tone}}.", "prompt": "Go."}, param("tone", "text", true)),
			`{"type":"prompt","system":"Be {{tone}}.","prompt":"Go.","format":"text","max_tokens":0}`},
		{"a lone }} and single braces are text", sdktest.Tool(t, "s", map[string]any{"type": "prompt", "prompt": "Answer {\"a\": 1} }} {x}"}),
			`{"type":"prompt","system":"","prompt":"Answer {\"a\": 1} }} {x}","format":"text","max_tokens":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Check(context.Background(), tc.tool)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestCheckErrors(t *testing.T) {
	c := start(t, nil)
	text := param("text", "text", true)
	tone := sdk.Param{Name: "tone", Type: "text", Options: []string{"plain", "cheerful"}}
	tool := func(run map[string]any, params ...sdk.Param) sdk.Tool {
		r := map[string]any{"type": "prompt"}
		for k, v := range run {
			r[k] = v
		}
		return sdktest.Tool(t, "x", r, params...)
	}
	for _, tc := range []struct {
		name string
		tool sdk.Tool
		path string
		msg  string // the whole message, or a part of it
	}{
		{"an unknown placeholder", tool(map[string]any{"system": "Be {{tone}}.", "prompt": "Summarise {{texts}} and {{text}}"}, text, tone),
			"run.prompt", "{{texts}} is not a parameter of this tool; its parameters are text, tone"},
		{"an unknown placeholder in system", tool(map[string]any{"system": "Be {{ mood }}.", "prompt": "{{text}} {{tone}}"}, text, tone),
			"run.system", "{{mood}} is not a parameter of this tool; its parameters are text, tone"},
		{"a placeholder in a tool without parameters", tool(map[string]any{"prompt": "Say {{word}}"}),
			"run.prompt", "{{word}} is not a parameter of this tool; this tool has no parameters"},
		{"a required parameter never used", tool(map[string]any{"prompt": "Be {{tone}}."}, text, tone),
			"params[0].name", "text is a required parameter of this tool, but neither run.system nor run.prompt uses it, so its value would never reach the model: write {{text}} where it belongs, or remove the parameter"},
		{"an optional parameter never used", tool(map[string]any{"prompt": "Summarise {{text}}"}, text, tone),
			"params[1].name", "tone is a optional parameter"},
		{"no prompt", tool(map[string]any{"system": "{{text}}"}, text),
			"run.prompt", "is missing"},
		{"an empty prompt", tool(map[string]any{"prompt": " \n\t", "system": "{{text}}"}, text),
			"run.prompt", "is empty"},
		{"a prompt that is not text", tool(map[string]any{"prompt": 5}),
			"run.prompt", "must be text"},
		{"a system that is not text", tool(map[string]any{"prompt": "Go.", "system": []string{"a"}}),
			"run.system", "must be text"},
		{"a placeholder never closed", tool(map[string]any{"prompt": "Summarise {{text"}, text),
			"run.prompt", `the placeholder starting "{{text" is never closed`},
		{"braces around what is not a name", tool(map[string]any{"prompt": "{{text}} {{ not a name }}"}, text),
			"run.prompt", `{{ not a name }} is not a placeholder`},
		{"triple braces", tool(map[string]any{"prompt": "{{{text}}}"}, text),
			"run.prompt", `{{{text}} is not a placeholder`},
		{"a format that is neither", tool(map[string]any{"prompt": "Go.", "format": "yaml"}),
			"run.format", `must be "text" (the answer as it is) or "json" (the answer parsed as JSON), not "yaml"`},
		{"a format that is not text", tool(map[string]any{"prompt": "Go.", "format": true}),
			"run.format", `must be "text" or "json"`},
		{"max_tokens under 0", tool(map[string]any{"prompt": "Go.", "max_tokens": -1}),
			"run.max_tokens", "must be a whole number of tokens from 0 to 100000 (0 takes the host's [model] max_tokens), not -1"},
		{"max_tokens over 100000", tool(map[string]any{"prompt": "Go.", "max_tokens": 100001}),
			"run.max_tokens", "not 100001"},
		{"max_tokens not whole", tool(map[string]any{"prompt": "Go.", "max_tokens": 1.5}),
			"run.max_tokens", "not 1.5"},
		{"max_tokens as text", tool(map[string]any{"prompt": "Go.", "max_tokens": "10"}),
			"run.max_tokens", `not "10"`},
		{"an unknown key", tool(map[string]any{"prompt": "Go.", "model": "gpt"}),
			"run.model", `"model" is not a key of a prompt run: the keys are type, system, prompt, format and max_tokens`},
		{"another kind's type", tool(map[string]any{"prompt": "Go.", "type": "http"}),
			"run.type", `must be "prompt" for this kind, not "http"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Check(context.Background(), tc.tool)
			var fe sdk.FieldErrors
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want field errors", err)
			}
			// One mistake, one error: a template that can't be read does
			// not also make its parameters unused.
			if len(fe) != 1 || fe[0].Path != tc.path || !strings.Contains(fe[0].Message, tc.msg) {
				t.Fatalf("got %q, want one error at %s: %s", fe, tc.path, tc.msg)
			}
		})
	}

	// Each mistake is reported, not only the first.
	_, err := c.Check(context.Background(), tool(map[string]any{"prompt": "{{a}} {{b}}", "format": "xml", "extra": 1}, text))
	var fe sdk.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 5 {
		t.Fatalf("got %v, want five errors (extra, {{a}}, {{b}}, text unused, format)", err)
	}
}

// TestInvokeFillsPlaceholders: text goes in as it is, other kinds as
// JSON, an optional parameter not given as empty text; the request carries
// the run, the format and max_tokens.
func TestInvokeFillsPlaceholders(t *testing.T) {
	host := streaming("ok")
	c := start(t, host)
	tool := sdktest.Tool(t, "t", map[string]any{
		"type":       "prompt",
		"system":     "Tone: [{{tone}}]",
		"prompt":     "T={{text}} N={{ n }} I={{i}} B={{b}} L={{l}} J={{j}} O={{opt}} T2={{text}}",
		"max_tokens": 321,
	}, param("text", "text", true), param("tone", "text", false), param("n", "number", true), param("i", "integer", true),
		param("b", "bool", true), param("l", "list", true), param("j", "json", true), param("opt", "json", false))
	run := c.Invoke(context.Background(), tool, map[string]any{
		"text": "a \"quoted\"\nline", "n": 1.5, "i": 7, "b": false, "l": []any{"x", 2}, "j": map[string]any{"k": "v", "z": nil}, "opt": nil,
	})
	if run.Err != nil {
		t.Fatalf("run: %v", run.Err)
	}
	req := host.only(t)
	if want := "T=a \"quoted\"\nline N=1.5 I=7 B=false L=[\"x\",2] J={\"k\":\"v\",\"z\":null} O= T2=a \"quoted\"\nline"; req.Prompt != want {
		t.Errorf("prompt:\ngot  %q\nwant %q", req.Prompt, want)
	}
	if req.System != "Tone: []" || req.JSON || req.MaxTokens != 321 || req.ParentRunID != "rtest" {
		t.Errorf("request: %+v", req)
	}
	if string(run.Result) != `"ok"` {
		t.Errorf("result %s", run.Result)
	}
}

// TestArgumentIsNotExpandedAgain: a value holding {{other}} reaches the
// model as those characters, never as other's value (an argument can't
// pull another parameter, or a system instruction, into the prompt).
func TestArgumentIsNotExpandedAgain(t *testing.T) {
	host := streaming("ok")
	c := start(t, host)
	tool := sdktest.Tool(t, "t", map[string]any{
		"type": "prompt", "system": "Secret style: {{style}}", "prompt": "Summarise: {{text}}",
	}, param("text", "text", true), param("style", "text", true))
	run := c.Invoke(context.Background(), tool, map[string]any{"text": "{{style}} {{ style }} {{text}} {{", "style": "TOP-SECRET"})
	if run.Err != nil {
		t.Fatalf("run: %v", run.Err)
	}
	if req := host.only(t); req.Prompt != "Summarise: {{style}} {{ style }} {{text}} {{" || req.System != "Secret style: TOP-SECRET" {
		t.Fatalf("got system %q, prompt %q", req.System, req.Prompt)
	}
}

// TestTokensStreamBeforeResult: each piece of the answer reaches the
// caller as a stdout event of its own before the model writes the next
// one: the fake model waits, for each piece, until the caller has it.
func TestTokensStreamBeforeResult(t *testing.T) {
	pieces := []string{"One", " sentence", " <b>&</b>", ".\n"}
	got := make(chan string, len(pieces))
	host := &fakeHost{answer: func(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
		for i, p := range pieces {
			req.OnText(p)
			select {
			case seen := <-got:
				if seen != p {
					return sdk.ModelAnswer{}, sdk.Errorf(errcode.ModelFailed, "the caller got %q for piece %d, %q", seen, i, p)
				}
			case <-ctx.Done():
				return sdk.ModelAnswer{}, sdk.Errorf(errcode.ModelFailed, "piece %d (%q) never reached the caller before the run ended", i, p)
			}
		}
		return sdk.ModelAnswer{Text: strings.Join(pieces, ""), Model: "fake-model"}, nil
	}}
	c := start(t, host)
	// A bound so that a kind that holds the pieces back fails instead of
	// hanging; nothing here measures time.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []string
	res, err := c.KindClient.Invoke(ctx, hostside.Invocation{Tool: summarise(t, nil), Args: json.RawMessage(`{"text":"x","tone":"plain"}`), RunID: "r1"},
		func(e sdk.Event) {
			if e.Stdout != nil {
				events = append(events, "stdout:"+string(e.Stdout))
				got <- string(e.Stdout)
			}
		})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	events = append(events, "result:"+string(res))
	want := []string{"stdout:One", "stdout: sentence", "stdout: <b>&</b>", "stdout:.\n", `result:"One sentence <b>&</b>.\n"`}
	if !slices.Equal(events, want) {
		t.Fatalf("events:\ngot  %q\nwant %q", events, want)
	}
}

func TestJSONFormat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer []string
		want   string
	}{
		{"plain", []string{`{"summary": `, `"short",`, ` "n": [1, 2]}`}, `{"summary":"short","n":[1,2]}`},
		{"fenced json", []string{"```json\n", `{"a": 1}`, "\n```"}, `{"a":1}`},
		{"fenced JSON with space around", []string{"  \n```JSON\n[1, 2]\n```\n"}, `[1,2]`},
		{"fenced, no language", []string{"```\n{\"a\": \"```\"}\n```"}, "{\"a\":\"```\"}"},
		{"fenced on one line", []string{"```{\"a\":true}```"}, `{"a":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := streaming(tc.answer...)
			c := start(t, host)
			run := c.Invoke(context.Background(), summarise(t, map[string]any{"format": "json"}), map[string]any{"text": "x"})
			if run.Err != nil {
				t.Fatalf("run: %v", run.Err)
			}
			if string(run.Result) != tc.want {
				t.Errorf("result %s, want %s", run.Result, tc.want)
			}
			if run.Stdout() != strings.Join(tc.answer, "") {
				t.Errorf("stdout %q: the answer streams as it was written", run.Stdout())
			}
			if req := host.only(t); !req.JSON {
				t.Errorf("the model was not asked for JSON: %+v", req)
			}
		})
	}
}

func TestNotJSONAnswer(t *testing.T) {
	long := "Sure! Here is the summary you asked for, as a friendly paragraph rather than JSON: the text is about\ttabs and \x1b[31mcolours\x1b[0m."
	for _, tc := range []struct {
		name, answer, quote string
	}{
		{"prose", long, `it starts "Sure! Here is the summary you asked for, as a friendly paragraph rather than JSO…"`},
		{"terminal escapes", "\x1b[31mred\x1b[0m", `it starts "\x1b[31mred\x1b[0m"`},
		{"two values", `{"a":1} {"b":2}`, `it starts "{\"a\":1} {\"b\":2}"`},
		{"cut short", `{"a": [1, 2`, `it starts "{\"a\": [1, 2"`},
		{"empty", " \n ", "its answer was empty"},
		{"fenced but not JSON", "```json\nnot json\n```", "it starts \"```json\\nnot json\\n```\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, streaming(tc.answer))
			run := c.Invoke(context.Background(), summarise(t, map[string]any{"format": "json"}), map[string]any{"text": "x"})
			if run.ErrorCode() != codeNotJSON {
				t.Fatalf("got %s, %v; want %s", run.Result, run.Err, codeNotJSON)
			}
			msg := run.Err.Error()
			if !strings.Contains(msg, `the model was asked for JSON (run.format = "json")`) || !strings.Contains(msg, tc.quote) {
				t.Fatalf("message %q\nwants %q", msg, tc.quote)
			}
			if strings.Contains(msg, "colours") || strings.ContainsRune(msg, '\x1b') {
				t.Fatalf("message %q quotes more than the start, or control characters as they are", msg)
			}
		})
	}
}

// TestModelErrorsPassThrough: the host's code and message reach the
// caller as the host wrote them.
func TestModelErrorsPassThrough(t *testing.T) {
	for _, code := range []string{errcode.ModelUnreachable, errcode.ModelUnauthorized, errcode.ModelNotFound, errcode.ModelRateLimited,
		errcode.ModelFailed, errcode.ModelCutOff, errcode.Timeout, errcode.Unsupported, errcode.TooManyCalls} {
		t.Run(code, func(t *testing.T) {
			msg := "the host says " + code + ": configure [model] base_url"
			host := &fakeHost{answer: func(_ context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
				req.OnText("half an ans")
				return sdk.ModelAnswer{}, &sdk.Error{Code: code, Message: msg}
			}}
			c := start(t, host)
			run := c.Invoke(context.Background(), summarise(t, nil), map[string]any{"text": "x"})
			if run.ErrorCode() != code || run.Err.Error() != msg {
				t.Fatalf("got %q %v, want %s %q", run.ErrorCode(), run.Err, code, msg)
			}
			if run.Stdout() != "half an ans" {
				t.Fatalf("stdout %q: what was written before the error still reaches the caller", run.Stdout())
			}
		})
	}
}

// TestCancelReachesTheModel: cancelling the run cancels the host's model
// call, and the run ends cancelled.
func TestCancelReachesTheModel(t *testing.T) {
	asked := make(chan struct{})
	stopped := make(chan error, 1)
	host := &fakeHost{answer: func(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
		req.OnText("thinking")
		close(asked)
		select {
		case <-ctx.Done():
			stopped <- ctx.Err()
			return sdk.ModelAnswer{}, ctx.Err()
		case <-time.After(time.Minute):
			stopped <- errors.New("the model call was never cancelled")
			return sdk.ModelAnswer{Text: "too late"}, nil
		}
	}}
	c := start(t, host)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-asked
		cancel()
	}()
	run := c.Invoke(ctx, summarise(t, nil), map[string]any{"text": "x"})
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("the host's model call ended with %v, want context.Canceled", err)
	}
	if e := errcode.FromRun(ctx, run.Err); e == nil || e.Code != errcode.Cancelled {
		t.Fatalf("the run ended %v (%s), want cancelled", run.Err, run.Result)
	}
}

// TestInvokeRefusesAnUncheckedTool: a run table that doesn't pass Check is
// bad_tool, and the model is not asked.
func TestInvokeRefusesAnUncheckedTool(t *testing.T) {
	host := streaming("ok")
	c := start(t, host)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "t", map[string]any{"type": "prompt", "prompt": "{{nope}}"}), map[string]any{})
	if run.ErrorCode() != codeBadTool || !strings.Contains(run.Err.Error(), "{{nope}} is not a parameter") {
		t.Fatalf("got %v", run.Err)
	}
	if len(host.reqs) != 0 {
		t.Fatalf("the model was asked: %+v", host.reqs)
	}
}
