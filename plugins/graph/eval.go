package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Error codes of this kind (besides the nested calls' own, which a run
// that failed in one keeps).
const (
	codeBadTool     = "bad_tool"
	codePickMissing = "pick_missing"
	codeNotJSON     = "not_json"
)

// maxText bounds the text a template or join node makes, so that a graph
// whose texts double node after node stops with an error instead of
// taking the plugin's memory (every graph run shares the process).
const maxText = 16 << 20

// runner is one run of a graph: every node's value, worked out at most
// once, from the return node down, as the run needs it.
type runner struct {
	g     *graph
	host  sdk.Host
	emit  sdk.Emit
	runID string
	tool  string
	args  map[string]any
	cells map[*node]*cell
	// nested counts the calls made through the host; at most maxNested.
	nested    atomic.Int64
	maxNested int64
	// stop cancels the run's context with the first error of any node, so
	// that branches still going stop too.
	stop context.CancelCauseFunc
}

// cell is one node's value, worked out once.
type cell struct {
	once sync.Once
	val  any
	err  error
}

// run evaluates the graph and returns the return node's value.
func (r *runner) run(ctx context.Context) (any, error) {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r.stop = stop
	r.cells = make(map[*node]*cell, len(r.g.nodes))
	for _, n := range r.g.nodes {
		r.cells[n] = &cell{}
	}
	v, err := r.value(ctx, r.g.ret)
	if err != nil {
		// The first node to fail says why; the others stopped because of it.
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		return nil, err
	}
	return v, nil
}

// value is n's value, worked out by the first caller; later callers wait
// for it.
func (r *runner) value(ctx context.Context, n *node) (any, error) {
	c := r.cells[n]
	c.once.Do(func() {
		c.val, c.err = r.eval(ctx, n)
		if c.err != nil {
			r.stop(c.err)
		}
	})
	return c.val, c.err
}

// values works out the values of nodes at once: each input that may wait
// on the host (a call_tool or ask_model under it) in a goroutine of its
// own, the others here. It returns when every one has ended, so no
// goroutine outlives the call.
func (r *runner) values(ctx context.Context, nodes []*node) (map[*node]any, error) {
	vals := make(map[*node]any, len(nodes))
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
	)
	set := func(n *node, v any, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && first == nil {
			first = err
		}
		vals[n] = v
	}
	inline := -1
	for i, n := range nodes {
		if !n.waits {
			continue
		}
		if inline < 0 {
			inline = i // the first that waits runs here, after the others started
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := r.value(ctx, n)
			set(n, v, err)
		}()
	}
	for i, n := range nodes {
		if !n.waits || i == inline {
			v, err := r.value(ctx, n)
			set(n, v, err)
		}
	}
	wg.Wait()
	return vals, first
}

// eval works out one node's value.
func (r *runner) eval(ctx context.Context, n *node) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	switch n.typ {
	case typeArg:
		return r.args[n.param], nil
	case typeConst:
		return n.constVal, nil
	case typeTemplate:
		vals, err := r.values(ctx, n.deps)
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(n.tmpl))
		for i, p := range n.tmpl {
			if p.name == "" {
				parts[i] = p.lit
			} else {
				parts[i] = textOf(vals[r.g.byID[p.name]])
			}
		}
		return joinText(n, parts, "")
	case typeJoin:
		vals, err := r.values(ctx, n.deps)
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(n.inputs))
		for i, id := range n.inputs {
			parts[i] = textOf(vals[r.g.byID[id]])
		}
		return joinText(n, parts, n.separator)
	case typePick:
		v, err := r.value(ctx, n.deps[0])
		if err != nil {
			return nil, err
		}
		got, msg := pick(v, n.path)
		if msg != "" {
			return nil, sdk.Errorf(codePickMissing, "node %q: the value of %q %s", n.id, n.from, msg)
		}
		return got, nil
	case typeChoose:
		v, err := r.value(ctx, r.g.byID[n.cond])
		if err != nil {
			return nil, err
		}
		yes := truthy(v)
		if n.hasEquals {
			yes = jsonEqual(v, n.equalsVal)
		}
		branch := n.els
		if yes {
			branch = n.then
		}
		return r.value(ctx, r.g.byID[branch])
	case typeAskModel:
		return r.askModel(ctx, n)
	case typeCallTool:
		return r.callTool(ctx, n)
	case typeReturn:
		return r.value(ctx, n.deps[0])
	}
	return nil, fmt.Errorf("node %q: a %s node can't run", n.id, n.typ) // parse keeps only known types
}

// joinText joins the parts of node n's text, refusing a text over
// maxText before making it.
func joinText(n *node, parts []string, sep string) (string, error) {
	size := len(sep) * max(len(parts)-1, 0)
	for _, p := range parts {
		size += len(p)
	}
	if size > maxText {
		return "", sdk.Errorf(errcode.TooLarge, "node %q: its text would be %d MiB, over the %d MiB a node's text may be", n.id, size>>20, maxText>>20)
	}
	return strings.Join(parts, sep), nil
}

// count takes one of the run's nested calls, or says the run has made
// them all.
func (r *runner) count(n *node, what string) error {
	if r.nested.Add(1) > r.maxNested {
		return sdk.Errorf(errcode.TooManyCalls, "node %q: this run of %s already made its %d nested calls ([graph] max_nested_calls), so %s was not made",
			n.id, r.tool, r.maxNested, what)
	}
	return nil
}

// nodeDone says that a node calling a tool or the model is done: a
// progress of unknown fraction, about the node (Progress.Node, protocol
// 2), whose message names the node too, for a host of protocol 1.
func (r *runner) nodeDone(n *node) {
	r.emit(sdk.Event{Progress: &sdk.Progress{Fraction: -1, Message: fmt.Sprintf("node %q done", n.id), Node: n.id}})
}

// callTool runs a call_tool node: the other tool, through the host, its
// output re-emitted as this run's, marked with the node.
func (r *runner) callTool(ctx context.Context, n *node) (any, error) {
	vals, err := r.values(ctx, n.deps)
	if err != nil {
		return nil, err
	}
	args := make(map[string]any, len(n.args))
	for _, a := range n.args {
		if v := vals[r.g.byID[a.from]]; v != nil {
			args[a.param] = v // a null is an argument not given
		}
	}
	raw, err := marshal(args)
	if err != nil {
		return nil, fmt.Errorf("node %q: the arguments of %s can't be written as JSON: %w", n.id, n.tool, err)
	}
	if err := r.count(n, "the call of "+n.tool); err != nil {
		return nil, err
	}
	res, err := r.host.CallTool(ctx, sdk.ToolCall{
		ParentRunID: r.runID, Tool: n.tool, Args: raw,
		OnEvent: func(e sdk.Event) {
			switch {
			case e.Stdout != nil:
				r.emit(sdk.Event{Stdout: e.Stdout, Node: n.id})
			case e.Stderr != nil:
				r.emit(sdk.Event{Stderr: e.Stderr, Node: n.id})
			}
		},
	})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return nil, nestedError(n, "calling "+n.tool, err)
	}
	v, err := decodeJSON(res.Result)
	if err != nil {
		return nil, fmt.Errorf("node %q: %s's result is not JSON: %w", n.id, n.tool, err)
	}
	r.nodeDone(n)
	return v, nil
}

// askModel runs an ask_model node: the host's model, its answer streamed
// as this run's stdout, marked with the node.
func (r *runner) askModel(ctx context.Context, n *node) (any, error) {
	v, err := r.value(ctx, n.deps[0])
	if err != nil {
		return nil, err
	}
	if err := r.count(n, "the question to the model"); err != nil {
		return nil, err
	}
	ans, err := r.host.AskModel(ctx, sdk.ModelRequest{
		ParentRunID: r.runID, System: n.system, Prompt: textOf(v), JSON: n.format == "json",
		OnText: func(s string) { r.emit(sdk.Event{Stdout: []byte(s), Node: n.id}) },
	})
	if err != nil {
		return nil, nestedError(n, "asking the model", err)
	}
	r.nodeDone(n)
	if n.format != "json" {
		return ans.Text, nil
	}
	got, err := decodeJSON([]byte(ans.Text))
	if err != nil || strings.TrimSpace(ans.Text) == "" {
		return nil, sdk.Errorf(codeNotJSON, "node %q: the model was asked for JSON and its answer is not JSON: it starts %q", n.id, clip(strings.TrimSpace(ans.Text), 80))
	}
	return got, nil
}

// deepRE matches the start this kind gives the error of a call that went
// too deep (or made too many calls), so that a graph that calls itself
// says so once, not once per level.
var deepRE = regexp.MustCompile(`^node "[A-Za-z0-9_]+": (calling \S+|asking the model) went too far: `)

// hintDeep is what a too_deep error adds.
const hintDeep = " (does the graph call itself, directly or through another tool?)"

// nestedError is the error of node n whose call through the host failed.
// A failure the host or the nested run named keeps its code (a timeout
// stays a timeout, a cancelled nested run makes this one cancelled), with
// the message quoted after the node; anything else is wrapped.
func nestedError(n *node, what string, err error) error {
	var e *sdk.Error
	if !errors.As(err, &e) || e.Code == "" {
		return fmt.Errorf("node %q: %s failed: %w", n.id, what, err)
	}
	if e.Code != errcode.TooDeep && e.Code != errcode.TooManyCalls {
		return &sdk.Error{Code: e.Code, Message: fmt.Sprintf("node %q: %s failed: %s", n.id, what, e.Message)}
	}
	// Said once for the whole chain of graphs: the innermost refusal,
	// after this node.
	msg := strings.TrimSuffix(e.Message, hintDeep)
	for {
		p := deepRE.FindString(msg)
		if p == "" {
			break
		}
		msg = msg[len(p):]
	}
	if e.Code == errcode.TooDeep {
		msg += hintDeep
	}
	return &sdk.Error{Code: e.Code, Message: fmt.Sprintf("node %q: %s went too far: %s", n.id, what, msg)}
}

// textOf is a value as text: text as it is, anything else as JSON.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// marshal writes v as JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// pick is the value at path in v, or what is missing.
func pick(v any, path []string) (any, string) {
	for i, step := range path {
		at := strings.Join(path[:i], ".")
		switch x := v.(type) {
		case map[string]any:
			got, ok := x[step]
			if !ok {
				if i == 0 {
					return nil, fmt.Sprintf("has no field %q", step)
				}
				return nil, fmt.Sprintf("has no %s: %s has no field %q", strings.Join(path, "."), at, step)
			}
			v = got
		case []any:
			k, err := strconv.Atoi(step)
			if err != nil || k < 0 || k >= len(x) {
				where := "it is"
				if i > 0 {
					where = at + " is"
				}
				if err != nil || k < 0 {
					return nil, fmt.Sprintf("has no %s: %s a list, indexed by numbers from 0, not %q", strings.Join(path, "."), where, step)
				}
				return nil, fmt.Sprintf("has no %s: %s a list of %d, so its last index is %d", strings.Join(path, "."), where, len(x), len(x)-1)
			}
			v = x[k]
		default:
			where := "it is"
			if i > 0 {
				where = at + " is"
			}
			return nil, fmt.Sprintf("has no %s: %s %s, not a table or a list", strings.Join(path, "."), where, valueWords(v))
		}
	}
	return v, ""
}

// valueWords names what a value is, for messages.
func valueWords(v any) string {
	switch v.(type) {
	case string:
		return "text"
	case json.Number:
		return "a number"
	case bool:
		return "true/false"
	case nil:
		return "null"
	}
	return "a value"
}

// truthy is a choose's test without equals: false, null, 0, "", [] and {}
// are false.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		return !isZero(x.String())
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// jsonEqual says whether two JSON values are the same; numbers are equal
// by value (1 and 1.0 are).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numbersEqual(x.String(), y.String())
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// numbersEqual compares two JSON numbers by value: whole numbers written
// without a fraction or exponent exactly, others as float64. (Not with
// big.Rat: an exponent of 1e9 would make it work out a billion digits.)
func numbersEqual(x, y string) bool {
	if x == y {
		return true
	}
	if plainInteger(x) && plainInteger(y) {
		bx, okx := new(big.Int).SetString(x, 10)
		by, oky := new(big.Int).SetString(y, 10)
		return okx && oky && bx.Cmp(by) == 0
	}
	fx, errx := strconv.ParseFloat(x, 64)
	fy, erry := strconv.ParseFloat(y, 64)
	return errx == nil && erry == nil && fx == fy
}

// plainInteger says whether a JSON number is written without a fraction
// or an exponent.
func plainInteger(s string) bool { return !strings.ContainsAny(s, ".eE") }

// isZero says whether a JSON number is zero: no digit of its mantissa is
// other than 0.
func isZero(s string) bool {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	return !strings.ContainsAny(s, "123456789")
}

// isWhole says whether a JSON number is a whole number (3, 3.0, 3e2).
func isWhole(s string) bool {
	if plainInteger(s) {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == math.Trunc(f)
}
