package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/sdk"
)

// The node types, in the order the format lists them.
const (
	typeArg      = "arg"
	typeConst    = "const"
	typeTemplate = "template"
	typePick     = "pick"
	typeJoin     = "join"
	typeChoose   = "choose"
	typeAskModel = "ask_model"
	typeCallTool = "call_tool"
	typeReturn   = "return"
)

// nodeFields are the fields of each node type besides id and type, in the
// order the normalised run writes them.
var nodeFields = map[string][]string{
	typeArg:      {"param"},
	typeConst:    {"value"},
	typeTemplate: {"text"},
	typePick:     {"from", "path"},
	typeJoin:     {"inputs", "separator"},
	typeChoose:   {"if", "then", "else", "equals"},
	typeAskModel: {"prompt", "system", "format"},
	typeCallTool: {"tool", "args"},
	typeReturn:   {"value"},
}

// nodeTypes are the node types in the format's order, for messages.
var nodeTypes = []string{typeArg, typeConst, typeTemplate, typePick, typeJoin, typeChoose, typeAskModel, typeCallTool, typeReturn}

// idRE is what a node id looks like.
var idRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// toolNameRE is what a tool's name looks like (config's nameRE).
var toolNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// maxNodes bounds a graph's size, so that a run table can't make Check or
// a run do unbounded work.
const maxNodes = 1000

// graph is a checked run table.
type graph struct {
	nodes []*node
	byID  map[string]*node
	ret   *node
	// layout is run.layout as written, by node id.
	layout map[string]json.RawMessage
}

// node is one node of a graph. Only the fields of its type are set.
type node struct {
	index int
	id    string
	typ   string

	param string // arg

	value    json.RawMessage // const, as written (compact)
	constVal any             // const, decoded

	text string   // template
	tmpl template // template, parsed

	from string   // pick
	path []string // pick

	inputs    []string // join
	separator string   // join

	cond, then, els string // choose
	hasEquals       bool   // choose
	equals          json.RawMessage
	equalsVal       any

	prompt, system string // ask_model
	hasSystem      bool
	format         string

	tool string // call_tool
	args []arg  // call_tool, in the order written (sorted by param)

	ret string // return

	// deps are the nodes this one reads, once each, in the order of its
	// fields; resolved after parsing.
	deps []*node
	// waits says whether working out the value may wait on the host: a
	// call_tool or ask_model is this node or under it.
	waits bool
}

// arg is one argument of a call_tool node: the called tool's param and the
// node that gives it.
type arg struct {
	param string
	from  string
}

// ref is one reference a node makes: the field it is written in (a path
// below the node, e.g. "args.path") and the node id it names.
type ref struct {
	field string
	id    string
}

// refs lists every reference n makes, in the order of its fields.
func (n *node) refs() []ref {
	switch n.typ {
	case typeTemplate:
		var rs []ref
		for _, p := range n.tmpl {
			if p.name != "" {
				rs = append(rs, ref{"text", p.name})
			}
		}
		return rs
	case typePick:
		return []ref{{"from", n.from}}
	case typeJoin:
		rs := make([]ref, len(n.inputs))
		for i, id := range n.inputs {
			rs[i] = ref{fmt.Sprintf("inputs[%d]", i), id}
		}
		return rs
	case typeChoose:
		return []ref{{"if", n.cond}, {"then", n.then}, {"else", n.els}}
	case typeAskModel:
		return []ref{{"prompt", n.prompt}}
	case typeCallTool:
		rs := make([]ref, len(n.args))
		for i, a := range n.args {
			rs[i] = ref{"args." + a.param, a.from}
		}
		return rs
	case typeReturn:
		return []ref{{"value", n.ret}}
	}
	return nil
}

// checker collects the problems of one run table, in the list of its
// decoder.
type checker struct {
	tool    sdk.Tool
	catalog map[string]sdk.Tool // nil: call_tool targets are not checked
	run     *sdk.RunTable
	layout  *sdk.RunTable // run.layout; nil when there is none to check
}

// nodePath is the path of node i, or of one of its fields.
func nodePath(i int, field string) string {
	p := fmt.Sprintf("run.nodes[%d]", i)
	if field != "" {
		p += "." + field
	}
	return p
}

func (c *checker) addf(path, format string, a ...any) {
	c.run.ErrorAt(path, format, a...)
}

// nodef adds a problem of node n at one of its fields.
func (c *checker) nodef(n *node, field, format string, a ...any) {
	c.addf(nodePath(n.index, field), "node %q: %s", n.id, fmt.Sprintf(format, a...))
}

// compile checks a graph tool's run table. catalog holds the tools the
// host serves, by name; nil skips the checks of call_tool targets (the
// plain Check, with no catalog).
func compile(tool sdk.Tool, catalog map[string]sdk.Tool) (*graph, error) {
	run, err := sdk.DecodeRunTable(tool.Run)
	if err != nil {
		return nil, sdk.FieldErrors{{Path: "run", Message: "must be a table with type = \"graph\" and [[run.nodes]]"}}
	}
	c := &checker{tool: tool, catalog: catalog, run: run}
	g := c.parse()
	c.check(g)
	if err := run.Err(); err != nil {
		return nil, err
	}
	g.markWaits()
	return g, nil
}

// markWaits sets each node's waits. The graph has no cycle.
func (g *graph) markWaits() {
	done := make(map[*node]bool, len(g.nodes))
	var mark func(n *node) bool
	mark = func(n *node) bool {
		if !done[n] {
			done[n] = true
			n.waits = n.typ == typeCallTool || n.typ == typeAskModel
			for _, d := range n.deps {
				if mark(d) {
					n.waits = true
				}
			}
		}
		return n.waits
	}
	for _, n := range g.nodes {
		mark(n)
	}
}

// parse reads the run table; what it can't read is reported and left out.
func (c *checker) parse() *graph {
	g := &graph{byID: map[string]*node{}}
	const wrongType = "must be \"graph\" for a graph tool"
	if s, ok := c.run.String("type", wrongType); ok && s != "graph" {
		c.run.Errorf("type", wrongType)
	}
	if c.parseNodes(g) {
		c.parseLayout(g)
	} else {
		c.run.Raw("layout") // known, though not read
	}
	c.run.Done(func(k string) string {
		return fmt.Sprintf("%q is not a field of a graph's run table; its fields are type, nodes and layout", k)
	})
	return g
}

// parseNodes reads run.nodes into g; false when they can't be read at all.
func (c *checker) parseNodes(g *graph) bool {
	if !c.run.Has("nodes") {
		c.run.Errorf("", "the graph has no nodes: add [[run.nodes]] tables, at least an arg or const node and a return node")
		return false
	}
	items, ok := c.run.List("nodes", "must be a list of node tables ([[run.nodes]])")
	if !ok {
		return false
	}
	if items.Len() > maxNodes {
		c.run.Errorf("nodes", "a graph has at most %d nodes; this one has %d", maxNodes, items.Len())
		return false
	}
	firstAt := map[string]int{}
	for i := range items.Len() {
		item, ok := items.Table(i, "must be a node table, with id, type and the type's fields")
		if !ok {
			continue
		}
		n := c.parseNode(i, item)
		if n == nil {
			continue
		}
		if j, dup := firstAt[n.id]; dup {
			c.nodef(n, "id", "the id is already the id of run.nodes[%d]: give each node its own id", j)
			continue
		}
		firstAt[n.id] = i
		g.nodes = append(g.nodes, n)
		g.byID[n.id] = n
	}
	return true
}

// parseLayout reads run.layout as written into g; check checks it once
// the nodes are known.
func (c *checker) parseLayout(g *graph) {
	lt, ok := c.run.Table("layout", "must be a table of node ids to positions, e.g. fetch = { x = 240, y = 80 }")
	if !ok {
		return
	}
	raw, _ := c.run.Raw("layout")
	_ = json.Unmarshal(raw, &g.layout) // a table: Table read it
	c.layout = lt
}

// fieldReader reads the fields of one node table.
type fieldReader struct {
	c *checker
	n *node
	t *sdk.RunTable
}

// wrong words a problem of the node, for a getter of t.
func (f *fieldReader) wrong(format string, a ...any) string {
	return fmt.Sprintf("node %q: %s", f.n.id, fmt.Sprintf(format, a...))
}

// missing reports a required field that is not there.
func (f *fieldReader) missing(key, what string) {
	f.t.Errorf("", "node %q: a %s node needs %s: add %s = %s", f.n.id, f.n.typ, key, key, what)
}

// str reads a string field; ok is false when it is absent or not a string
// (which is reported when required or wrong).
func (f *fieldReader) str(key string, required bool, what string) (string, bool) {
	s, ok := f.t.String(key, f.wrong("%s must be text, not %s", key, f.t.Describe(key)))
	if !ok && required && !f.t.Has(key) {
		f.missing(key, what)
	}
	return s, ok
}

// ref reads a field that names a node.
func (f *fieldReader) ref(key string) string {
	s, ok := f.str(key, true, `"the id of a node"`)
	if !ok {
		return ""
	}
	if !idRE.MatchString(s) {
		f.c.nodef(f.n, key, "%s must be the id of a node, and %q is not an id (letters, digits and _, not starting with a digit)", key, clip(s, 40))
		return ""
	}
	return s
}

// parseNode reads node i; nil when it has no usable id or type.
func (c *checker) parseNode(i int, t *sdk.RunTable) *node {
	n := &node{index: i}
	if !readID(t, n) || !readType(t, n) {
		return nil
	}
	f := &fieldReader{c: c, n: n, t: t}
	switch n.typ {
	case typeArg:
		n.param, _ = f.str("param", true, `"the name of one of the tool's parameters"`)
	case typeConst:
		if v, ok := t.Raw("value"); !ok {
			f.missing("value", "any value")
		} else {
			n.value, n.constVal = compactJSON(v)
		}
	case typeTemplate:
		f.template()
	case typePick:
		f.pick()
	case typeJoin:
		f.join()
	case typeChoose:
		n.cond, n.then, n.els = f.ref("if"), f.ref("then"), f.ref("else")
		if v, ok := t.Raw("equals"); ok {
			n.hasEquals = true
			n.equals, n.equalsVal = compactJSON(v)
		}
	case typeAskModel:
		f.askModel()
	case typeCallTool:
		f.callTool()
	case typeReturn:
		n.ret = f.ref("value")
	}
	t.Done(func(k string) string {
		msg := fmt.Sprintf("node %q: a %s node has no field %q; its fields are id, type, %s", n.id, n.typ, clip(k, 40), strings.Join(nodeFields[n.typ], ", "))
		if s := closest(k, nodeFields[n.typ]); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return msg
	})
	return n
}

// readID reads a node's id into n; false when it has no usable one.
func readID(t *sdk.RunTable, n *node) bool {
	if !t.Has("id") {
		t.Errorf("", "the node has no id: add id = \"...\" (letters, digits and _)")
		return false
	}
	id, ok := t.String("id", fmt.Sprintf("the node's id must be text, not %s", t.Describe("id")))
	if !ok {
		return false
	}
	if !idRE.MatchString(id) {
		t.Errorf("id", "%q is not a node id: an id is 1 to 64 letters, digits and _, not starting with a digit", clip(id, 70))
		return false
	}
	n.id = id
	return true
}

// readType reads a node's type into n; false when it has no known one.
func readType(t *sdk.RunTable, n *node) bool {
	if !t.Has("type") {
		t.Errorf("", "node %q has no type: add type = one of %s", n.id, strings.Join(nodeTypes, ", "))
		return false
	}
	wrong := func(typ string) string {
		msg := fmt.Sprintf("node %q: the type must be one of %s, not %s", n.id, strings.Join(nodeTypes, ", "), clip(t.Written("type"), 40))
		if s := closest(typ, nodeTypes); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return msg
	}
	typ, ok := t.String("type", wrong(""))
	if !ok {
		return false
	}
	if nodeFields[typ] == nil {
		t.Errorf("type", "%s", wrong(typ))
		return false
	}
	n.typ = typ
	return true
}

// template reads a template node's text and parses it.
func (f *fieldReader) template() {
	s, ok := f.str("text", true, `"text with {{node_id}} placeholders"`)
	if !ok {
		return
	}
	f.n.text = s
	t, err := parseTemplate(s)
	if err != nil {
		f.c.nodef(f.n, "text", "%v", err)
		return
	}
	f.n.tmpl = t
}

// pick reads a pick node's from and path.
func (f *fieldReader) pick() {
	f.n.from = f.ref("from")
	s, ok := f.str("path", true, `"a dotted path such as items.0.name"`)
	if !ok {
		return
	}
	if p, msg := parsePath(s); msg != "" {
		f.c.nodef(f.n, "path", "%s", msg)
	} else {
		f.n.path = p
	}
}

// join reads a join node's separator and inputs.
func (f *fieldReader) join() {
	n := f.n
	n.separator = "\n"
	if s, ok := f.str("separator", false, ""); ok {
		n.separator = s
	}
	if !f.t.Has("inputs") {
		f.missing("inputs", `["the id of a node", …]`)
		return
	}
	inputs, ok := f.t.Strings("inputs", f.wrong("inputs must be a list of node ids, not %s", f.t.Describe("inputs")))
	switch {
	case !ok:
		return
	case len(inputs) == 0:
		f.c.nodef(n, "inputs", "inputs is empty: list the nodes whose values are joined")
	}
	for j, id := range inputs {
		if !idRE.MatchString(id) {
			f.c.nodef(n, fmt.Sprintf("inputs[%d]", j), "%q is not a node id (letters, digits and _, not starting with a digit)", clip(id, 40))
			inputs[j] = ""
		}
	}
	n.inputs = inputs
}

// askModel reads an ask_model node's prompt, system and format.
func (f *fieldReader) askModel() {
	n := f.n
	n.prompt = f.ref("prompt")
	if s, ok := f.str("system", false, ""); ok {
		n.system, n.hasSystem = s, true
	}
	n.format = "text"
	if s, ok := f.str("format", false, ""); ok {
		if s != "text" && s != "json" {
			f.c.nodef(n, "format", "format must be \"text\" or \"json\", not %q", clip(s, 40))
		} else {
			n.format = s
		}
	}
}

// callTool reads a call_tool node's tool and args.
func (f *fieldReader) callTool() {
	n := f.n
	if s, ok := f.str("tool", true, `"the name of a tool"`); ok {
		if !toolNameRE.MatchString(s) {
			f.c.nodef(n, "tool", "%q is not a tool name", clip(s, 70))
		} else {
			n.tool = s
		}
	}
	args, ok := f.t.Table("args", f.wrong("args must be a table of the called tool's parameters to node ids, e.g. args = { path = \"item_id\" }"))
	if !ok {
		return
	}
	for _, p := range args.Keys() {
		id, ok := args.String(p, f.wrong("args.%s must be the id of the node that gives it, not %s", p, args.Describe(p)))
		if !ok {
			continue
		}
		if !idRE.MatchString(id) {
			f.c.nodef(n, "args."+p, "args.%s must be the id of the node that gives it, and %q is not an id", p, clip(id, 40))
			continue
		}
		n.args = append(n.args, arg{param: p, from: id})
	}
}

// check checks what spans nodes: references, cycles, the return node,
// args, call_tool targets, types, nodes that never run, and the layout.
func (c *checker) check(g *graph) {
	broken := c.run.Err() != nil
	if !c.resolveRefs(g) {
		broken = true
	}
	if !c.findReturn(g) {
		broken = true
	}
	if c.cycles(g) {
		broken = true
	}
	c.checkParams(g)
	switch {
	case !broken:
		c.checkTypes(g)
	case c.catalog != nil:
		for _, n := range g.nodes {
			if n.typ == typeCallTool {
				c.checkCall(n, nil)
			}
		}
	}
	if !broken && g.ret != nil {
		c.checkLive(g)
	}
	c.checkLayout(g)
}

// resolveRefs finds the node each reference names, setting each node's
// deps; false when one names no node, or the return node.
func (c *checker) resolveRefs(g *graph) bool {
	ok := true
	for _, n := range g.nodes {
		seen := map[string]bool{}
		for _, r := range n.refs() {
			if r.id == "" {
				ok = false // reported when parsed
				continue
			}
			d, found := g.byID[r.id]
			switch {
			case !found:
				ok = false
				what := fmt.Sprintf("there is no node %q", r.id)
				if r.field == "text" {
					what = fmt.Sprintf("the placeholder {{%s}} names no node", r.id)
				}
				if s := closest(r.id, slices.Collect(mapKeys(g.byID))); s != "" {
					what += fmt.Sprintf(" (did you mean %q?)", s)
				}
				c.nodef(n, r.field, "%s", what)
			case d.typ == typeReturn:
				ok = false
				c.nodef(n, r.field, "%q is the return node: nothing reads the return node; read the node it returns instead", r.id)
			case !seen[r.id]:
				seen[r.id] = true
				n.deps = append(n.deps, d)
			}
		}
	}
	return ok
}

// findReturn sets g.ret to the one return node; false when there are
// several, or none (in a graph with nodes).
func (c *checker) findReturn(g *graph) bool {
	ok := true
	for _, n := range g.nodes {
		if n.typ != typeReturn {
			continue
		}
		if g.ret != nil {
			ok = false
			c.nodef(n, "type", "a graph has exactly one return node, and %q is one already", g.ret.id)
			continue
		}
		g.ret = n
	}
	if g.ret == nil && len(g.nodes) > 0 {
		c.addf("run.nodes", "the graph has no return node: add one, with type = \"return\" and value = the id of the node whose value the tool returns")
		return false
	}
	return ok
}

// checkParams checks that every arg node names a parameter of the tool,
// and that every required parameter is read.
func (c *checker) checkParams(g *graph) {
	read := map[string]bool{}
	for _, n := range g.nodes {
		if n.typ != typeArg || n.param == "" {
			continue
		}
		if paramOf(c.tool.Params, n.param) == nil {
			msg := fmt.Sprintf("the tool has no parameter %q", n.param)
			if len(c.tool.Params) == 0 {
				msg += ": it has no parameters; add a [[params]] table or use a const node"
			} else {
				msg += "; its parameters are " + paramNames(c.tool.Params)
				if s := closest(n.param, paramNameList(c.tool.Params)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
			}
			c.nodef(n, "param", "%s", msg)
			continue
		}
		read[n.param] = true
	}
	for i, p := range c.tool.Params {
		if p.Required && !read[p.Name] {
			c.addf(fmt.Sprintf("params[%d]", i), "no arg node reads the required parameter %q: add a node with type = \"arg\" and param = %q, and wire it in", p.Name, p.Name)
		}
	}
}

// checkTypes checks what the types of values say, in a graph with no
// broken reference: a pick reads a JSON object or list, and a call_tool's
// arguments fit (with a catalog).
func (c *checker) checkTypes(g *graph) {
	types := c.types(g)
	for _, n := range g.nodes {
		switch n.typ {
		case typePick:
			if t := types[n.deps[0]]; t.scalar() {
				c.nodef(n, "from", "a pick reads into a JSON object or list, and %q gives %s", n.from, t.words())
			}
		case typeCallTool:
			c.checkCall(n, types)
		}
	}
}

// checkLive checks that every node runs: the return depends on it.
func (c *checker) checkLive(g *graph) {
	live := map[*node]bool{}
	var mark func(*node)
	mark = func(n *node) {
		if live[n] {
			return
		}
		live[n] = true
		for _, d := range n.deps {
			mark(d)
		}
	}
	mark(g.ret)
	for _, n := range g.nodes {
		if !live[n] {
			c.nodef(n, "", "the return node doesn't depend on this node, so it would never run: wire it in or delete it")
		}
	}
}

// checkLayout checks that the layout names nodes and places them at
// numbers.
func (c *checker) checkLayout(g *graph) {
	if c.layout == nil {
		return
	}
	for _, id := range c.layout.Keys() {
		if _, ok := g.byID[id]; !ok {
			msg := fmt.Sprintf("there is no node %q to place", clip(id, 40))
			if s := closest(id, slices.Collect(mapKeys(g.byID))); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			c.layout.Errorf(id, "%s: the layout's keys are node ids", msg)
			continue
		}
		pos, ok := c.layout.Table(id, fmt.Sprintf("node %q: its place must be a table like { x = 240, y = 80 }, not %s", id, c.layout.Describe(id)))
		if !ok {
			continue
		}
		for _, k := range []string{"x", "y"} {
			if !pos.Has(k) {
				pos.Errorf("", "node %q: its place has no %s: write { x = 240, y = 80 }", id, k)
				continue
			}
			pos.Float(k, fmt.Sprintf("node %q: %s must be a number, not %s", id, k, pos.Describe(k)))
		}
	}
}

// checkCall checks a call_tool node against the catalog: the tool exists,
// its required parameters are wired, no argument names a parameter it
// doesn't have, and each argument's type fits (when types is not nil).
func (c *checker) checkCall(n *node, types map[*node]vtype) {
	if c.catalog == nil || n.tool == "" {
		return
	}
	target, ok := c.catalog[n.tool]
	if n.tool == c.tool.Name {
		target, ok = c.tool, true // a graph may call itself (as it is now); the host bounds the depth
	}
	if !ok {
		msg := fmt.Sprintf("there is no tool named %q", n.tool)
		if s := closest(n.tool, slices.Collect(mapKeys(c.catalog))); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		c.nodef(n, "tool", "%s", msg)
		return
	}
	if target.Effect == "change" && c.tool.Effect != "change" {
		// Else a caller that lets "read" tools run unasked would run one
		// that changes things through it.
		c.nodef(n, "tool", "%s changes things (effect = \"change\"), so a tool that calls it changes things too: give this tool effect = \"change\" too", target.Name)
	}
	wired := map[string]bool{}
	for _, a := range n.args {
		wired[a.param] = true
		p := paramOf(target.Params, a.param)
		if p == nil {
			msg := fmt.Sprintf("%s has no parameter %q", target.Name, a.param)
			if len(target.Params) == 0 {
				msg += "; it takes no arguments"
			} else {
				msg += "; its parameters are " + paramNames(target.Params)
				if s := closest(a.param, paramNameList(target.Params)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
			}
			c.nodef(n, "args."+a.param, "%s", msg)
			continue
		}
		if types == nil {
			continue
		}
		var from *node
		for _, d := range n.deps {
			if d.id == a.from {
				from = d
			}
		}
		if from == nil {
			continue
		}
		if t := types[from]; !t.fits(p.Type) {
			c.nodef(n, "args."+a.param, "%s's parameter %q takes %s, and %q gives %s%s", target.Name, a.param, kindWords(p.Type), a.from, t.words(), t.hint(p.Type, a.from))
		}
	}
	for _, p := range target.Params {
		if p.Required && !wired[p.Name] {
			c.nodef(n, "args", "%s needs its parameter %q: add args.%s = the id of the node that gives it", target.Name, p.Name, p.Name)
		}
	}
}

// cycles reports every cycle of references, naming the nodes on it, and
// says whether there was one.
func (c *checker) cycles(g *graph) bool {
	const (
		unseen = iota
		onPath
		finished
	)
	state := make(map[*node]int, len(g.nodes))
	reported := map[*node]bool{}
	var stack []*node
	found := false
	var visit func(n *node)
	visit = func(n *node) {
		state[n] = onPath
		stack = append(stack, n)
		for _, d := range n.deps {
			switch state[d] {
			case unseen:
				visit(d)
			case onPath:
				i := slices.Index(stack, d)
				cyc := slices.Clone(stack[i:])
				if slices.ContainsFunc(cyc, func(m *node) bool { return reported[m] }) {
					continue
				}
				found = true
				for _, m := range cyc {
					reported[m] = true
				}
				// Start at the node written first, so the message is the same
				// whichever node the search began with.
				first := 0
				for j, m := range cyc {
					if m.index < cyc[first].index {
						first = j
					}
				}
				cyc = append(cyc[first:], cyc[:first]...)
				names := make([]string, 0, len(cyc)+1)
				for _, m := range cyc {
					names = append(names, strconv.Quote(m.id))
				}
				names = append(names, strconv.Quote(cyc[0].id))
				field := ""
				for _, r := range cyc[0].refs() {
					if r.id == cyc[1%len(cyc)].id {
						field = r.field
						break
					}
				}
				c.nodef(cyc[0], field, "the nodes depend on each other in a circle, %s, so none of them can run: take one of these inputs from another node", strings.Join(names, " → "))
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = finished
	}
	for _, n := range g.nodes {
		if state[n] == unseen {
			visit(n)
		}
	}
	return found
}

// normalise writes the run table back with defaults filled in and the
// layout as written.
func (g *graph) normalise() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"graph","nodes":[`)
	for i, n := range g.nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		o := object{&b, false}
		b.WriteByte('{')
		o.field("id", n.id)
		o.field("type", n.typ)
		switch n.typ {
		case typeArg:
			o.field("param", n.param)
		case typeConst:
			o.raw("value", n.value)
		case typeTemplate:
			o.field("text", n.text)
		case typePick:
			o.field("from", n.from)
			o.field("path", strings.Join(n.path, "."))
		case typeJoin:
			o.field("inputs", n.inputs)
			o.field("separator", n.separator)
		case typeChoose:
			o.field("if", n.cond)
			o.field("then", n.then)
			o.field("else", n.els)
			if n.hasEquals {
				o.raw("equals", n.equals)
			}
		case typeAskModel:
			o.field("prompt", n.prompt)
			if n.hasSystem {
				o.field("system", n.system)
			}
			o.field("format", n.format)
		case typeCallTool:
			o.field("tool", n.tool)
			args := make(map[string]string, len(n.args))
			for _, a := range n.args {
				args[a.param] = a.from
			}
			o.field("args", args)
		case typeReturn:
			o.field("value", n.ret)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	if g.layout != nil {
		b.WriteString(`,"layout":`)
		b.Write(mustJSON(g.layout))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// object writes the fields of a JSON object in order.
type object struct {
	b    *bytes.Buffer
	more bool
}

func (o *object) raw(key string, v json.RawMessage) {
	if o.more {
		o.b.WriteByte(',')
	}
	o.more = true
	o.b.Write(mustJSON(key))
	o.b.WriteByte(':')
	o.b.Write(v)
}

func (o *object) field(key string, v any) { o.raw(key, mustJSON(v)) }

// mustJSON marshals what always marshals (strings, lists and maps of them,
// raw JSON), without HTML escaping.
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only values that always marshal are given
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// parsePath splits a pick's dotted path, or says what is wrong with it.
func parsePath(s string) ([]string, string) {
	if s == "" {
		return nil, "path is empty: write a dotted path such as items.0.name"
	}
	parts := strings.Split(s, ".")
	if slices.Contains(parts, "") {
		return nil, fmt.Sprintf("the path %q has an empty step: write steps between single dots, such as items.0.name", clip(s, 60))
	}
	return parts, ""
}

// compactJSON compacts raw JSON and decodes it with numbers kept as
// written.
func compactJSON(v json.RawMessage) (json.RawMessage, any) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return v, nil
	}
	val, _ := decodeJSON(b.Bytes())
	return b.Bytes(), val
}

func paramOf(ps []sdk.Param, name string) *sdk.Param {
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i]
		}
	}
	return nil
}

func paramNameList(ps []sdk.Param) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

func paramNames(ps []sdk.Param) string { return strings.Join(paramNameList(ps), ", ") }

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// closest is the candidate nearest to s when it is near enough to be a
// slip of the keyboard, else "".
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	if len(s) <= 3 {
		bestD = 2
	}
	for _, c := range slices.Sorted(slices.Values(candidates)) { // a copy: candidates may be shared
		if d := distance(strings.ToLower(s), strings.ToLower(c)); d < bestD && c != s {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b (bytes), bounded to
// short strings.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
