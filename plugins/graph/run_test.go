package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// fakeHost answers a kind's nested calls with the test's functions.
type fakeHost struct {
	call func(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error)
	ask  func(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error)
}

func (h *fakeHost) CallTool(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
	if h.call == nil {
		return sdk.ToolResult{Error: &sdk.Error{Code: errcode.UnknownTool, Message: "this test serves no tools"}}, nil
	}
	return h.call(ctx, req)
}

func (h *fakeHost) AskModel(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
	if h.ask == nil {
		return sdk.ModelAnswer{}, &sdk.Error{Code: errcode.Unsupported, Message: "this test serves no model"}
	}
	return h.ask(ctx, req)
}

// serve serves the kind in-process over gRPC with host, configured with
// cfg (a JSON object).
func serve(t *testing.T, host sdk.Host, cfg string) *sdktest.Conn {
	t.Helper()
	c := sdktest.Start(t, &kind{}, host)
	if err := c.Configure(context.Background(), json.RawMessage(cfg)); err != nil {
		t.Fatalf("configure: %v", err)
	}
	return c
}

// testCtx is a context that ends with the test, or after a minute, so
// that a graph that deadlocks fails the test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRunWorksOutTheReturn: arg, const, template, pick, join, choose (on
// truth and on equals) and return give the values the format says.
func TestRunWorksOutTheReturn(t *testing.T) {
	c := serve(t, nil, `{}`)
	tool := graphTool(t, []sdk.Param{text("name", true), {Name: "data", Type: "json", Required: true}, text("nick", false)},
		n{"id": "name", "type": "arg", "param": "name"},
		n{"id": "data", "type": "arg", "param": "data"},
		n{"id": "nick", "type": "arg", "param": "nick"},
		n{"id": "greet", "type": "template", "text": "Hello, {{name}}! {{ data }} {{nick}}"},
		n{"id": "first", "type": "pick", "from": "data", "path": "items.1.title"},
		n{"id": "count", "type": "const", "value": 2},
		n{"id": "j", "type": "join", "inputs": []string{"greet", "first", "count"}, "separator": " | "},
		n{"id": "flag", "type": "pick", "from": "data", "path": "on"},
		n{"id": "ch", "type": "choose", "if": "flag", "then": "j", "else": "name"},
		n{"id": "eq", "type": "choose", "if": "count", "equals": 2.0, "then": "first", "else": "name"},
		n{"id": "both", "type": "join", "inputs": []string{"ch", "eq"}},
		n{"id": "out", "type": "return", "value": "both"})
	run := c.Invoke(testCtx(t), tool, map[string]any{"name": "world", "data": map[string]any{"items": []any{n{"title": "a"}, n{"title": "b<c>"}}, "on": true}})
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	want := `Hello, world! {"items":[{"title":"a"},{"title":"b<c>"}],"on":true} null | b<c> | 2` + "\n" + "b<c>"
	var got string
	if err := json.Unmarshal(run.Result, &got); err != nil || got != want {
		t.Fatalf("got %s; want %q", run.Result, want)
	}

	// The other branches.
	run = c.Invoke(testCtx(t), graphTool(t, []sdk.Param{{Name: "data", Type: "json", Required: true}},
		n{"id": "data", "type": "arg", "param": "data"},
		n{"id": "flag", "type": "pick", "from": "data", "path": "on"},
		n{"id": "yes", "type": "const", "value": "yes"},
		n{"id": "no", "type": "const", "value": n{"answer": "no"}},
		n{"id": "ch", "type": "choose", "if": "flag", "then": "yes", "else": "no"},
		n{"id": "out", "type": "return", "value": "ch"}), map[string]any{"data": n{"on": []any{}}})
	if run.Err != nil || string(run.Result) != `{"answer":"no"}` {
		t.Fatalf("got %s, %v", run.Result, run.Err)
	}
}

// TestTruthAndEquality: what a choose takes as false, and equals.
func TestTruthAndEquality(t *testing.T) {
	for _, s := range []string{`false`, `null`, `0`, `0.0`, `-0e5`, `""`, `[]`, `{}`} {
		v, _ := decodeJSON([]byte(s))
		if truthy(v) {
			t.Errorf("%s is true", s)
		}
	}
	for _, s := range []string{`true`, `1`, `0.001`, `1e-400`, `"0"`, `" "`, `[0]`, `{"a":null}`} {
		v, _ := decodeJSON([]byte(s))
		if !truthy(v) {
			t.Errorf("%s is false", s)
		}
	}
	for _, p := range [][2]string{{`1`, `1.0`}, {`100`, `1e2`}, {`"a"`, `"a"`}, {`[1,{"b":2}]`, `[1.0,{"b":2e0}]`}, {`null`, `null`},
		{`123456789012345678901234567890`, `123456789012345678901234567890`}} {
		a, _ := decodeJSON([]byte(p[0]))
		b, _ := decodeJSON([]byte(p[1]))
		if !jsonEqual(a, b) {
			t.Errorf("%s != %s", p[0], p[1])
		}
	}
	for _, p := range [][2]string{{`1`, `"1"`}, {`1`, `true`}, {`[1]`, `[1,2]`}, {`{"a":1}`, `{"b":1}`}, {`null`, `0`},
		{`123456789012345678901234567890`, `123456789012345678901234567891`}} {
		a, _ := decodeJSON([]byte(p[0]))
		b, _ := decodeJSON([]byte(p[1]))
		if jsonEqual(a, b) {
			t.Errorf("%s == %s", p[0], p[1])
		}
	}
}

// TestPickPaths: a pick follows fields and list indexes, and a path that
// isn't there stops the run with pick_missing, naming the node and the
// step that is missing.
func TestPickPaths(t *testing.T) {
	c := serve(t, nil, `{}`)
	data := map[string]any{"data": n{"items": []any{n{"title": "a", "tags": []any{"x", "y"}}, "plain"}, "n": 3}}
	pickTool := func(path string) sdk.Tool {
		return graphTool(t, []sdk.Param{{Name: "data", Type: "json", Required: true}},
			n{"id": "data", "type": "arg", "param": "data"},
			n{"id": "p", "type": "pick", "from": "data", "path": path},
			n{"id": "out", "type": "return", "value": "p"})
	}
	for path, want := range map[string]string{"items.0.tags.1": `"y"`, "items.1": `"plain"`, "n": `3`, "items.0": `{"tags":["x","y"],"title":"a"}`} {
		if run := c.Invoke(testCtx(t), pickTool(path), data); run.Err != nil || string(run.Result) != want {
			t.Errorf("%s: got %s, %v; want %s", path, run.Result, run.Err, want)
		}
	}
	for path, want := range map[string]string{
		"nope":             `node "p": the value of "data" has no field "nope"`,
		"items.2.title":    `node "p": the value of "data" has no items.2.title: items is a list of 2, so its last index is 1`,
		"items.first":      `node "p": the value of "data" has no items.first: items is a list, indexed by numbers from 0, not "first"`,
		"items.1.title":    `node "p": the value of "data" has no items.1.title: items.1 is text, not a table or a list`,
		"items.0.tags.-1":  `node "p": the value of "data" has no items.0.tags.-1: items.0.tags is a list, indexed by numbers from 0, not "-1"`,
		"items.0.title.x":  `node "p": the value of "data" has no items.0.title.x: items.0.title is text`,
		"items.0.missing":  `node "p": the value of "data" has no items.0.missing: items.0 has no field "missing"`,
		"n.digits":         `node "p": the value of "data" has no n.digits: n is a number`,
		"items.0.tags.2.a": `items.0.tags is a list of 2, so its last index is 1`,
	} {
		run := c.Invoke(testCtx(t), pickTool(path), data)
		if run.ErrorCode() != codePickMissing || !strings.Contains(run.Err.Error(), want) {
			t.Errorf("%s: got %v (%s); want pick_missing saying %q", path, run.Err, run.ErrorCode(), want)
		}
	}
}

// calls is what a fake host's tools were called with.
type calls struct {
	mu   sync.Mutex
	list []sdk.ToolCall
}

func (c *calls) add(req sdk.ToolCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, req)
}

func (c *calls) tools() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, r := range c.list {
		names = append(names, r.Tool+" "+string(r.Args))
	}
	return names
}

// twoCalls is a graph that calls word_count and get_json with its
// argument and joins their results.
func twoCalls(t *testing.T) sdk.Tool {
	return graphTool(t, []sdk.Param{text("q", true)},
		n{"id": "q", "type": "arg", "param": "q"},
		n{"id": "left", "type": "call_tool", "tool": "word_count", "args": n{"text": "q"}},
		n{"id": "right", "type": "call_tool", "tool": "get_json", "args": n{"path": "q"}},
		n{"id": "j", "type": "join", "inputs": []string{"left", "right"}, "separator": "+"},
		n{"id": "out", "type": "return", "value": "j"})
}

// TestIndependentCallsRunAtOnce: two call_tool nodes that don't depend on
// each other are both running before either ends: each call waits at a
// barrier for the other, so calls made one after the other never get
// past it (the test's context ends the wait, and the run fails).
func TestIndependentCallsRunAtOnce(t *testing.T) {
	var seen calls
	arrived, both := atomic.Int32{}, make(chan struct{})
	host := &fakeHost{call: func(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		seen.add(req)
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-ctx.Done():
			return sdk.ToolResult{}, ctx.Err()
		}
		if req.ParentRunID != "rtest" {
			return sdk.ToolResult{Error: &sdk.Error{Code: "bad_parent", Message: "called for run " + req.ParentRunID}}, nil
		}
		return sdk.ToolResult{Result: json.RawMessage(fmt.Sprintf(`%q`, req.Tool))}, nil
	}}
	c := serve(t, host, `{}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run := c.Invoke(ctx, twoCalls(t), map[string]any{"q": "a b"})
	if run.Err != nil || string(run.Result) != `"word_count+get_json"` {
		t.Fatalf("got %s, %v (the calls: %v)", run.Result, run.Err, seen.tools())
	}
	got := strings.Join(seen.tools(), ", ")
	if !strings.Contains(got, `word_count {"text":"a b"}`) || !strings.Contains(got, `get_json {"path":"a b"}`) {
		t.Fatalf("the calls: %s", got)
	}
}

// TestChooseRunsOnlyItsBranch: the branch a choose did not take is never
// worked out, so its call_tool is never made.
func TestChooseRunsOnlyItsBranch(t *testing.T) {
	var seen calls
	host := &fakeHost{call: func(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		seen.add(req)
		return sdk.ToolResult{Result: json.RawMessage(`"called"`)}, nil
	}}
	c := serve(t, host, `{}`)
	tool := graphTool(t, []sdk.Param{{Name: "cheap", Type: "bool", Required: true}},
		n{"id": "cheap", "type": "arg", "param": "cheap"},
		n{"id": "free", "type": "const", "value": "free"},
		n{"id": "costly", "type": "call_tool", "tool": "expensive"},
		n{"id": "ch", "type": "choose", "if": "cheap", "then": "free", "else": "costly"},
		n{"id": "out", "type": "return", "value": "ch"})
	if run := c.Invoke(testCtx(t), tool, map[string]any{"cheap": true}); run.Err != nil || string(run.Result) != `"free"` {
		t.Fatalf("got %s, %v", run.Result, run.Err)
	}
	if got := seen.tools(); len(got) != 0 {
		t.Fatalf("the branch not taken was run: %v", got)
	}
	if run := c.Invoke(testCtx(t), tool, map[string]any{"cheap": false}); run.Err != nil || string(run.Result) != `"called"` {
		t.Fatalf("got %s, %v", run.Result, run.Err)
	}
	if got := seen.tools(); len(got) != 1 || got[0] != "expensive {}" {
		t.Fatalf("the calls: %v", got)
	}
}

// TestNestedErrorNamesTheNode: a nested call that failed stops the run
// with its own code and its message quoted after the node's; a call the
// host couldn't make at all is wrapped the same way.
func TestNestedErrorNamesTheNode(t *testing.T) {
	host := &fakeHost{call: func(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		if req.Tool == "get_json" {
			return sdk.ToolResult{Error: &sdk.Error{Code: "http_status", Message: "the server answered 404 Not Found"}}, nil
		}
		return sdk.ToolResult{}, errors.New("the connection to the host broke")
	}}
	c := serve(t, host, `{}`)
	one := graphTool(t, nil,
		n{"id": "fetch", "type": "call_tool", "tool": "get_json"},
		n{"id": "out", "type": "return", "value": "fetch"})
	run := c.Invoke(testCtx(t), one, map[string]any{})
	if run.ErrorCode() != "http_status" || run.Err.Error() != `node "fetch": calling get_json failed: the server answered 404 Not Found` {
		t.Fatalf("got %v (%s)", run.Err, run.ErrorCode())
	}
	two := graphTool(t, nil,
		n{"id": "count", "type": "call_tool", "tool": "word_count"},
		n{"id": "out", "type": "return", "value": "count"})
	run = c.Invoke(testCtx(t), two, map[string]any{})
	if run.ErrorCode() != errcode.Failed || !strings.HasPrefix(run.Err.Error(), `node "count": calling word_count failed: `) ||
		!strings.Contains(run.Err.Error(), "the connection to the host broke") {
		t.Fatalf("got %v (%s)", run.Err, run.ErrorCode())
	}
}

// TestFirstFailureStopsTheRest: when one branch fails, the other's nested
// call is cancelled, and the run ends with the failure, not with the
// cancellation it caused.
func TestFirstFailureStopsTheRest(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan struct{})
	host := &fakeHost{call: func(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		if req.Tool == "word_count" {
			close(started)
			<-ctx.Done()
			close(cancelled)
			return sdk.ToolResult{}, ctx.Err()
		}
		select {
		case <-started:
		case <-ctx.Done():
		}
		return sdk.ToolResult{Error: &sdk.Error{Code: errcode.Timeout, Message: "get_json took longer than 10 s"}}, nil
	}}
	c := serve(t, host, `{}`)
	run := c.Invoke(testCtx(t), twoCalls(t), map[string]any{"q": "x"})
	if run.ErrorCode() != errcode.Timeout || run.Err.Error() != `node "right": calling get_json failed: get_json took longer than 10 s` {
		t.Fatalf("got %v (%s)", run.Err, run.ErrorCode())
	}
	select {
	case <-cancelled:
	case <-testCtx(t).Done():
		t.Fatal("the other branch's call was never cancelled")
	}
}

// TestNestedCallCap: a run makes at most [graph] max_nested_calls nested
// calls; the one past it is not made, and the run says which node and
// which setting.
func TestNestedCallCap(t *testing.T) {
	var seen calls
	host := &fakeHost{call: func(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		seen.add(req)
		return sdk.ToolResult{Result: json.RawMessage(`"r"`)}, nil
	}}
	c := serve(t, host, `{"max_nested_calls": 2}`)
	tool := graphTool(t, nil,
		n{"id": "c1", "type": "call_tool", "tool": "t"},
		n{"id": "c2", "type": "call_tool", "tool": "t", "args": n{"x": "c1"}},
		n{"id": "c3", "type": "call_tool", "tool": "t", "args": n{"x": "c2"}},
		n{"id": "out", "type": "return", "value": "c3"})
	run := c.Invoke(testCtx(t), tool, map[string]any{})
	if run.ErrorCode() != errcode.TooManyCalls || run.Err.Error() != `node "c3": this run of g already made its 2 nested calls ([graph] max_nested_calls), so the call of t was not made` {
		t.Fatalf("got %v (%s)", run.Err, run.ErrorCode())
	}
	if got := seen.tools(); len(got) != 2 {
		t.Fatalf("the calls made: %v", got)
	}
	// The default lets the three through.
	seen = calls{}
	c = serve(t, host, `{}`)
	if run := c.Invoke(testCtx(t), tool, map[string]any{}); run.Err != nil {
		t.Fatal(run.Err)
	}
}

// maxDepth is the host's bound on tools calling tools.
const maxDepth = 8

// TestSelfCallStops: a graph that calls itself goes as deep as the host
// lets it and ends with too_deep, said once, naming its node, instead of
// once per level (or hanging).
func TestSelfCallStops(t *testing.T) {
	k := &kind{}
	tool := graphTool(t, []sdk.Param{text("q", true)},
		n{"id": "q", "type": "arg", "param": "q"},
		n{"id": "again", "type": "call_tool", "tool": "g", "args": n{"q": "q"}},
		n{"id": "out", "type": "return", "value": "again"})
	var (
		mu    sync.Mutex
		depth = map[string]int{"r0": 0}
		made  int
	)
	host := &fakeHost{}
	host.call = func(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		// As the host does: the depth of the run that calls, refused past
		// the bound; else a run of the tool, one level down.
		mu.Lock()
		d := depth[req.ParentRunID] + 1
		made++
		id := fmt.Sprintf("r%d", d)
		depth[id] = d
		mu.Unlock()
		if d > maxDepth {
			return sdk.ToolResult{Error: &sdk.Error{Code: errcode.TooDeep, Message: fmt.Sprintf("tools called tools more than %d deep; the call to %s was refused", maxDepth, req.Tool)}}, nil
		}
		res, err := k.Invoke(ctx, sdk.Call{Tool: tool, Args: req.Args, RunID: id, Host: host}, func(sdk.Event) {})
		if err != nil {
			return sdk.ToolResult{Error: errcode.FromRun(ctx, err)}, nil
		}
		return sdk.ToolResult{Result: res}, nil
	}
	_, err := k.Invoke(testCtx(t), sdk.Call{Tool: tool, Args: json.RawMessage(`{"q":"x"}`), RunID: "r0", Host: host}, func(sdk.Event) {})
	want := `node "again": calling g went too far: tools called tools more than 8 deep; the call to g was refused (does the graph call itself, directly or through another tool?)`
	if errcode.Code(err) != errcode.TooDeep || err.Error() != want {
		t.Fatalf("got %v (%s);\nwant %s", err, errcode.Code(err), want)
	}
	if made != maxDepth+1 {
		t.Fatalf("%d calls were made; want %d and the one refused", made, maxDepth)
	}
}

// blockingHost is a host whose tool calls wait until their context ends,
// and counts the calls still going.
type blockingHost struct {
	fakeHost
	going   atomic.Int32
	started chan string
	ended   chan string
}

func newBlockingHost() *blockingHost {
	h := &blockingHost{started: make(chan string, 16), ended: make(chan string, 16)}
	h.call = func(ctx context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		h.going.Add(1)
		defer h.going.Add(-1)
		h.started <- req.Tool
		<-ctx.Done()
		h.ended <- req.Tool
		return sdk.ToolResult{}, ctx.Err()
	}
	return h
}

// TestCancelReachesNestedCalls: cancelling a graph's run cancels each of
// its nested calls going at the time, and the run ends cancelled. In
// process, Invoke returns only once every call it made has returned: no
// goroutine of the run is left behind.
func TestCancelReachesNestedCalls(t *testing.T) {
	t.Run("in process", func(t *testing.T) {
		h := newBlockingHost()
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() {
			_, err := (&kind{}).Invoke(ctx, sdk.Call{Tool: twoCalls(t), Args: json.RawMessage(`{"q":"x"}`), RunID: "r", Host: h}, func(sdk.Event) {})
			done <- err
		}()
		<-h.started
		<-h.started
		cancel()
		err := <-done
		if left := h.going.Load(); left != 0 {
			t.Fatalf("Invoke returned with %d nested calls still going", left)
		}
		if e := errcode.FromRun(ctx, err); e.Code != errcode.Cancelled {
			t.Fatalf("the run ended %v", e)
		}
	})
	t.Run("over the plugin protocol", func(t *testing.T) {
		h := newBlockingHost()
		c := serve(t, h, `{}`)
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan *sdktest.Run, 1)
		go func() { done <- c.Invoke(ctx, twoCalls(t), map[string]any{"q": "x"}) }()
		<-h.started
		<-h.started
		cancel()
		run := <-done
		for range 2 {
			select {
			case <-h.ended:
			case <-testCtx(t).Done():
				t.Fatal("a nested call was never cancelled")
			}
		}
		if run.Err == nil {
			t.Fatalf("the run ended with %s", run.Result)
		}
	})
}

// TestNestedOutputMarkedWithNode: what a nested run prints, and the
// model's answer as it is written, come out as the graph run's stdout and
// stderr marked with the node's id, before the result.
func TestNestedOutputMarkedWithNode(t *testing.T) {
	var asked sdk.ModelRequest
	host := &fakeHost{
		call: func(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
			req.OnEvent(sdk.Event{Stdout: []byte("fetching\n")})
			req.OnEvent(sdk.Event{Stderr: []byte("slow server\n")})
			req.OnEvent(sdk.Event{Stdout: []byte("inner\n"), Node: "deeper"}) // a graph's node, one level down
			return sdk.ToolResult{Result: json.RawMessage(`{"title":"A day"}`), Printed: "fetching\ninner\n"}, nil
		},
		ask: func(_ context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
			asked = req
			req.OnText("One ")
			req.OnText("day.")
			return sdk.ModelAnswer{Text: "One day.", Model: "m"}, nil
		},
	}
	c := serve(t, host, `{}`)
	tool := graphTool(t, []sdk.Param{text("id", true)},
		n{"id": "item_id", "type": "arg", "param": "id"},
		n{"id": "fetch", "type": "call_tool", "tool": "get_json", "args": n{"path": "item_id"}},
		n{"id": "ask", "type": "template", "text": "Summarise: {{fetch}}"},
		n{"id": "answer", "type": "ask_model", "prompt": "ask", "system": "You are terse."},
		n{"id": "out", "type": "return", "value": "answer"})
	run := c.Invoke(testCtx(t), tool, map[string]any{"id": "7"})
	if run.Err != nil || string(run.Result) != `"One day."` {
		t.Fatalf("got %s, %v", run.Result, run.Err)
	}
	var out []string
	for _, e := range run.Events {
		switch {
		case e.Stdout != nil:
			out = append(out, fmt.Sprintf("%s:stdout:%q", e.Node, e.Stdout))
		case e.Stderr != nil:
			out = append(out, fmt.Sprintf("%s:stderr:%q", e.Node, e.Stderr))
		}
	}
	want := []string{`fetch:stdout:"fetching\n"`, `fetch:stderr:"slow server\n"`, `fetch:stdout:"inner\n"`, `answer:stdout:"One "`, `answer:stdout:"day."`}
	if strings.Join(out, " ") != strings.Join(want, " ") {
		t.Fatalf("events:\n%v\nwant\n%v", out, want)
	}
	if asked.Prompt != `Summarise: {"title":"A day"}` || asked.System != "You are terse." || asked.JSON || asked.ParentRunID != "rtest" {
		t.Fatalf("the model was asked %+v", asked)
	}
}

// TestAskModelFormats: format json parses the answer, an answer that isn't
// JSON is not_json quoting its start, and a model that can't answer keeps
// its code, after the node.
func TestAskModelFormats(t *testing.T) {
	answer := ""
	var modelErr error
	host := &fakeHost{ask: func(_ context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
		if !req.JSON {
			return sdk.ModelAnswer{}, errors.New("the graph did not ask for JSON")
		}
		return sdk.ModelAnswer{Text: answer}, modelErr
	}}
	c := serve(t, host, `{}`)
	tool := graphTool(t, nil,
		n{"id": "q", "type": "const", "value": n{"question": "which?"}},
		n{"id": "m", "type": "ask_model", "prompt": "q", "format": "json"},
		n{"id": "pick", "type": "pick", "from": "m", "path": "choice"},
		n{"id": "out", "type": "return", "value": "pick"})
	answer = `{"choice": [1, 2]}`
	if run := c.Invoke(testCtx(t), tool, map[string]any{}); run.Err != nil || string(run.Result) != `[1,2]` {
		t.Fatalf("got %s, %v", run.Result, run.Err)
	}
	answer = "Sure! Here is the JSON: {\"choice\": 1}"
	run := c.Invoke(testCtx(t), tool, map[string]any{})
	if run.ErrorCode() != codeNotJSON || run.Err.Error() != `node "m": the model was asked for JSON and its answer is not JSON: it starts "Sure! Here is the JSON: {\"choice\": 1}"` {
		t.Fatalf("got %v (%s)", run.Err, run.ErrorCode())
	}
	modelErr = &sdk.Error{Code: errcode.ModelUnreachable, Message: "nothing answers at http://127.0.0.1:11434/v1"}
	run = c.Invoke(testCtx(t), tool, map[string]any{})
	if run.ErrorCode() != errcode.ModelUnreachable || run.Err.Error() != `node "m": asking the model failed: nothing answers at http://127.0.0.1:11434/v1` {
		t.Fatalf("got %v (%s)", run.Err, run.ErrorCode())
	}
}

// TestNullArgumentsAreLeftOut: an optional parameter not given is null,
// and a call_tool argument that is null is not given to the tool called.
func TestNullArgumentsAreLeftOut(t *testing.T) {
	var seen calls
	host := &fakeHost{call: func(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
		seen.add(req)
		return sdk.ToolResult{}, nil
	}}
	c := serve(t, host, `{}`)
	tool := graphTool(t, []sdk.Param{text("a", true), text("b", false)},
		n{"id": "a", "type": "arg", "param": "a"},
		n{"id": "b", "type": "arg", "param": "b"},
		n{"id": "c", "type": "call_tool", "tool": "t", "args": n{"x": "a", "y": "b"}},
		n{"id": "out", "type": "return", "value": "c"})
	run := c.Invoke(testCtx(t), tool, map[string]any{"a": "<&>"})
	if run.Err != nil || string(run.Result) != "null" {
		t.Fatalf("got %s, %v", run.Result, run.Err)
	}
	if got := seen.tools(); len(got) != 1 || got[0] != `t {"x":"<&>"}` {
		t.Fatalf("the calls: %v", got)
	}
}

// TestBadToolAtRun: a run table that doesn't pass Check is refused when
// run, with what is wrong.
func TestBadToolAtRun(t *testing.T) {
	c := serve(t, nil, `{}`)
	run := c.Invoke(testCtx(t), graphTool(t, nil, n{"id": "c", "type": "const", "value": 1}), map[string]any{})
	if run.ErrorCode() != codeBadTool || !strings.Contains(run.Err.Error(), "the graph has no return node") {
		t.Fatalf("got %v (%s)", run.Err, run.ErrorCode())
	}
}

// TestConfigSchemaMatchesParseConfig: the schema the host reads and the
// checks of Configure agree.
func TestConfigSchemaMatchesParseConfig(t *testing.T) {
	sdktest.CheckConfigSchema(t, "graph", json.RawMessage(configSchema), func(raw json.RawMessage) error {
		_, err := parseConfig(raw)
		return err
	})
}

// TestTextsThatDoubleStop: a graph whose texts double node after node
// (2^40 bytes at its end) stops with too_large at the first node over the
// bound, instead of taking the plugin's memory.
func TestTextsThatDoubleStop(t *testing.T) {
	nodes := []n{{"id": "t0", "type": "const", "value": "xxxxxxxxxxxxxxxx"}}
	for i := 1; i <= 40; i++ {
		prev := fmt.Sprintf("t%d", i-1)
		if i%2 == 0 {
			nodes = append(nodes, n{"id": fmt.Sprintf("t%d", i), "type": "template", "text": "{{" + prev + "}}{{" + prev + "}}"})
		} else {
			nodes = append(nodes, n{"id": fmt.Sprintf("t%d", i), "type": "join", "inputs": []string{prev, prev}, "separator": ""})
		}
	}
	nodes = append(nodes, n{"id": "out", "type": "return", "value": "t40"})
	_, err := (&kind{}).Invoke(testCtx(t), sdk.Call{Tool: graphTool(t, nil, nodes...), Args: json.RawMessage(`{}`)}, func(sdk.Event) {})
	// 16 bytes doubled 20 times is 16 MiB; the 21st doubling is over.
	if errcode.Code(err) != errcode.TooLarge || err.Error() != `node "t21": its text would be 32 MiB, over the 16 MiB a node's text may be` {
		t.Fatalf("got %v (%s)", err, errcode.Code(err))
	}
}
