package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolhost/toolhost/sdk/placeholder"
)

// piece is one part of a template: literal text, or a placeholder.
type piece struct {
	lit  string
	name string // the parameter of a placeholder; "" for text
}

// template is a parsed template: text with {{param}} placeholders.
type template []piece

// parseTemplate splits s into text and placeholders. A placeholder is
// {{name}}, spaces inside the braces allowed ({{ name }}). "{{" always
// starts a placeholder: there is no way to write a literal "{{".
func parseTemplate(s string) (template, error) {
	const how = "write {{name}} with the name of one of the tool's parameters " +
		"(\"{{\" always starts a placeholder; a literal \"{{\" can only come in a parameter's value)"
	ps, perr := placeholder.Split(s, isParamName)
	switch {
	case perr == nil:
	case perr.Unclosed:
		return nil, fmt.Errorf("the placeholder starting %q is never closed: "+how, clip(perr.Rest, 24))
	default:
		return nil, fmt.Errorf("{{%s}} is not a placeholder: "+how, clip(perr.Inside, 40))
	}
	t := make(template, len(ps))
	for i, p := range ps {
		t[i] = piece{lit: p.Text, name: p.Name}
	}
	return t, nil
}

// isParamName says whether s can be a parameter's name: a letter or _,
// then letters, digits or _.
func isParamName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// names lists the placeholders' parameters, each once, in order.
func (t template) names() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range t {
		if p.name != "" && !seen[p.name] {
			seen[p.name] = true
			out = append(out, p.name)
		}
	}
	return out
}

// fill writes the template with each placeholder replaced by its value.
// Values are written once, never read as templates themselves.
func (t template) fill(values map[string]string) string {
	var b strings.Builder
	for _, p := range t {
		if p.name == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString(values[p.name])
		}
	}
	return b.String()
}

// valueText is how an argument goes into a template: a text parameter's
// value as it is, any other value as its JSON; a missing or null value is
// empty text.
func valueText(kind string, raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return ""
	}
	if kind == "text" {
		var v string
		if json.Unmarshal(raw, &v) == nil {
			return v
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return s
	}
	return b.String()
}

// clip shortens s to n runes, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
