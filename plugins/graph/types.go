package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
)

// vtype is what Check knows of the value a node gives. tAny is "not known
// before the run": a pick, a call_tool, an ask_model in json format, a
// json parameter, a choose whose branches differ.
type vtype string

const (
	tAny     vtype = ""
	tText    vtype = "text"
	tNumber  vtype = "number"
	tInteger vtype = "integer"
	tBool    vtype = "bool"
	tList    vtype = "list"
	tObject  vtype = "object"
)

// typeOfKind is the type of an arg of a parameter of kind k.
func typeOfKind(k string) vtype {
	switch k {
	case "text":
		return tText
	case "number":
		return tNumber
	case "integer":
		return tInteger
	case "bool":
		return tBool
	case "list":
		return tList
	}
	return tAny // json, or a kind this kind doesn't know
}

// typeOfValue is the type of a const's value.
func typeOfValue(v any) vtype {
	switch x := v.(type) {
	case string:
		return tText
	case json.Number:
		if isWhole(x.String()) {
			return tInteger
		}
		return tNumber
	case bool:
		return tBool
	case []any:
		return tList
	case map[string]any:
		return tObject
	}
	return tAny
}

// fits says whether a value of type t may go to a parameter of kind k,
// as the host checks a call's arguments (no value is converted on the
// way). A type not known before the run fits anything; the host checks
// the value when the call is made.
//
//	from \ to   text  number  integer  bool  list  json
//	text         ✓                                   ✓
//	number             ✓                             ✓
//	integer            ✓        ✓                    ✓
//	bool                                ✓            ✓
//	list                                      ✓      ✓
//	object                                           ✓
//	unknown      ✓     ✓        ✓       ✓     ✓      ✓
func (t vtype) fits(k string) bool {
	if t == tAny {
		return true
	}
	switch k {
	case "text":
		return t == tText
	case "number":
		return t == tNumber || t == tInteger
	case "integer":
		return t == tInteger
	case "bool":
		return t == tBool
	case "list":
		return t == tList
	}
	return true
}

// scalar says whether a value of type t has no fields to pick.
func (t vtype) scalar() bool {
	return t == tText || t == tNumber || t == tInteger || t == tBool
}

// words names the type for messages.
func (t vtype) words() string {
	switch t {
	case tText:
		return "text"
	case tNumber:
		return "a number"
	case tInteger:
		return "a whole number"
	case tBool:
		return "true/false"
	case tList:
		return "a list"
	case tObject:
		return "a table (a JSON object)"
	}
	return "a value not known before the run"
}

// hint says how to make the value of node id, of type t, fit a parameter
// of kind k.
func (t vtype) hint(k, id string) string {
	switch {
	case k == "text":
		return fmt.Sprintf(": a template node with text = \"{{%s}}\" turns it into text", id)
	case k == "integer" && t == tNumber:
		return ", which need not be whole"
	}
	return ""
}

// kindWords names what a parameter of kind k takes.
func kindWords(k string) string {
	switch k {
	case "json":
		return "any JSON value"
	case "":
		return "a value"
	}
	return typeOfKind(k).words()
}

// types works out the type of every node. The graph has no cycle and
// every reference resolves.
func (c *checker) types(g *graph) map[*node]vtype {
	types := make(map[*node]vtype, len(g.nodes))
	done := make(map[*node]bool, len(g.nodes))
	var typeOf func(n *node) vtype
	typeOf = func(n *node) vtype {
		if done[n] {
			return types[n]
		}
		var t vtype
		switch n.typ {
		case typeArg:
			if p := paramOf(c.tool.Params, n.param); p != nil {
				t = typeOfKind(p.Type)
			}
		case typeConst:
			t = typeOfValue(n.constVal)
		case typeTemplate, typeJoin:
			t = tText
		case typeChoose:
			var then, els vtype
			for _, d := range n.deps {
				if d.id == n.then {
					then = typeOf(d)
				}
				if d.id == n.els {
					els = typeOf(d)
				}
			}
			if then == els {
				t = then
			}
		case typeAskModel:
			if n.format == "text" {
				t = tText
			}
		case typeReturn:
			t = typeOf(n.deps[0])
		}
		types[n], done[n] = t, true
		return t
	}
	for _, n := range g.nodes {
		typeOf(n)
	}
	return types
}

// decodeJSON decodes JSON with numbers kept as written (json.Number).
func decodeJSON(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("there is more than one JSON value")
	}
	return v, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}

func mapKeys[V any](m map[string]V) iter.Seq[string] { return maps.Keys(m) }
