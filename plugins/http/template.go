package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/toolhost/toolhost/sdk/placeholder"
)

// escaping is how a parameter's value is written at one spot of a
// template.
type escaping int

const (
	escRaw        escaping = iota // as it is: a plain body; a URL's leading placeholder
	escHeader                     // as it is, but no line breaks
	escHost                       // a URL's host: letters, digits, dots and hyphens only
	escPath                       // a URL's path (or fragment): url.PathEscape
	escQuery                      // a URL's query, or a form body: url.QueryEscape
	escJSONString                 // inside a JSON string: escaped, without quotes
	escJSONValue                  // where a JSON value goes: the argument's JSON, null when missing
)

// piece is one part of a template: literal text, or a placeholder.
type piece struct {
	lit  string
	name string // the parameter of a placeholder; "" for text
	esc  escaping
}

// template is a parsed template: text with {{param}} placeholders.
type template []piece

// parseTemplate splits s into text and placeholders. A placeholder is
// {{name}} (spaces inside the braces are allowed); there is no way to
// write a literal "{{".
func parseTemplate(s string) (template, error) {
	ps, perr := placeholder.Split(s, isParamName)
	switch {
	case perr == nil:
	case perr.Unclosed:
		// Only the name is quoted: what follows may be a key.
		rest := perr.Rest
		n := 2
		for n < len(rest) && n < 12 && rest[n] == ' ' {
			n++
		}
		end := min(len(rest), n+32)
		for n < end && (rest[n] == '_' || isASCIIAlnum(rune(rest[n]))) {
			n++
		}
		return nil, fmt.Errorf("the placeholder starting %q is never closed: write {{name}}", rest[:n]+"…")
	default:
		// What is between the braces is quoted only when it looks like
		// a name gone wrong: anything else may be a key.
		inside := perr.Inside
		if len(inside) > 32 || strings.TrimFunc(inside, func(r rune) bool { return r == ' ' || r == '_' || r == '-' || isASCIIAlnum(r) }) != "" {
			return nil, fmt.Errorf("a {{…}} is not a placeholder: write {{name}} with the name of one of the tool's parameters")
		}
		return nil, fmt.Errorf("{{%s}} is not a placeholder: write {{name}} with the name of one of the tool's parameters", inside)
	}
	t := make(template, len(ps))
	for i, p := range ps {
		t[i] = piece{lit: p.Text, name: p.Name}
	}
	return t, nil
}

func isASCIIAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

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

// withEscaping sets every placeholder to esc.
func (t template) withEscaping(esc escaping) template {
	for i := range t {
		t[i].esc = esc
	}
	return t
}

// forURL sets each placeholder's escaping from where it stands in the URL.
// The scheme must be written out; a placeholder that starts the URL takes
// the URL (or its start) as given, and what follows it counts as path.
func (t template) forURL() (template, error) {
	const (
		scheme = iota
		authority
		path
		query
		fragment
	)
	state := scheme
	for i := range t {
		p := &t[i]
		if p.name != "" {
			switch state {
			case scheme: // only at the start: text before it must hold "://"
				p.esc = escRaw
				state = path
			case authority:
				p.esc = escHost
			case path, fragment:
				p.esc = escPath
			case query:
				p.esc = escQuery
			}
			continue
		}
		s := p.lit
		if state == scheme {
			k := strings.Index(s, "://")
			if k < 0 {
				return nil, fmt.Errorf("it must start with http:// or https://")
			}
			if sch := strings.ToLower(s[:k]); sch != "http" && sch != "https" {
				if len(sch) > 10 || strings.TrimFunc(sch, isASCIIAlnum) != "" {
					return nil, fmt.Errorf("it must start with http:// or https://")
				}
				return nil, fmt.Errorf("it must start with http:// or https://, not %s://", s[:k])
			}
			s = s[k+3:]
			state = authority
		}
		for _, c := range s {
			switch {
			case c == '/' && state == authority:
				state = path
			case c == '?' && (state == authority || state == path):
				state = query
			case c == '#' && state != fragment:
				state = fragment
			}
		}
	}
	if state == scheme {
		return nil, fmt.Errorf("it must start with http:// or https://")
	}
	return t, nil
}

// forJSON sets each placeholder's escaping by whether it stands inside a
// JSON string or where a value goes.
func (t template) forJSON() template {
	inString, escaped := false, false
	for i := range t {
		p := &t[i]
		if p.name != "" {
			if inString {
				p.esc = escJSONString
			} else {
				p.esc = escJSONValue
			}
			continue
		}
		for j := 0; j < len(p.lit); j++ {
			c := p.lit[j]
			switch {
			case escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			}
		}
	}
	return t
}

// jsonShaped says whether t, read as a JSON template, is valid JSON with
// its placeholders filled in (strings left empty, values null).
func (t template) jsonShaped() error {
	var b strings.Builder
	for _, p := range t.forJSON() {
		switch {
		case p.name == "":
			b.WriteString(p.lit)
		case p.esc == escJSONValue:
			b.WriteString("null")
		}
	}
	var v any
	if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
		return err
	}
	return nil
}

// args are a call's arguments, by parameter name.
type args map[string]json.RawMessage

// render fills t in with a. A missing argument (or null) is empty text, or
// null where a JSON value goes. what names the spot for messages ("the
// URL", "the header X-Key").
func (t template) render(a args, what string) (string, error) {
	var b strings.Builder
	for _, p := range t {
		if p.name == "" {
			b.WriteString(p.lit)
			continue
		}
		raw, ok := a[p.name]
		if ok && string(raw) == "null" {
			ok = false
		}
		if p.esc == escJSONValue {
			if !ok {
				b.WriteString("null")
				continue
			}
			var c bytes.Buffer
			if err := json.Compact(&c, raw); err != nil {
				return "", fmt.Errorf("the value of %s is not JSON, so it can't go in %s", p.name, what)
			}
			b.Write(c.Bytes())
			continue
		}
		s := ""
		if ok {
			var err error
			if s, err = textOf(raw); err != nil {
				return "", fmt.Errorf("the value of %s can't go in %s: %v", p.name, what, err)
			}
		}
		switch p.esc {
		case escRaw:
			b.WriteString(s)
		case escHeader:
			if strings.ContainsAny(s, "\r\n\x00") {
				return "", fmt.Errorf("the value of %s can't go in %s: it holds a line break or a NUL character", p.name, what)
			}
			b.WriteString(s)
		case escHost:
			for _, c := range s {
				if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
					return "", fmt.Errorf("the value of %s can't go in the host name of %s: only letters, digits, dots and hyphens can, not %q", p.name, what, c)
				}
			}
			b.WriteString(s)
		case escPath:
			if s == "." || s == ".." {
				return "", fmt.Errorf("the value of %s can't be %q: in the path of %s it would climb out of it", p.name, s, what)
			}
			b.WriteString(url.PathEscape(s))
		case escQuery:
			b.WriteString(url.QueryEscape(s))
		case escJSONString:
			var q bytes.Buffer
			enc := json.NewEncoder(&q)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s); err != nil {
				return "", fmt.Errorf("the value of %s can't go in %s: %v", p.name, what, err)
			}
			e := bytes.TrimSpace(q.Bytes())
			b.Write(e[1 : len(e)-1])
		}
	}
	return b.String(), nil
}

// textOf is an argument as text: a string as it is, a number or a bool as
// written, a list as its items' text joined by commas, an object as JSON.
func textOf(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("it is not a valid JSON string")
		}
		return s, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return "", fmt.Errorf("it is not a valid JSON list")
		}
		parts := make([]string, len(items))
		for i, it := range items {
			if s := bytes.TrimSpace(it); len(s) > 0 && (s[0] == '[' || s[0] == '{') {
				var c bytes.Buffer
				if err := json.Compact(&c, s); err != nil {
					return "", err
				}
				parts[i] = c.String()
				continue
			}
			if string(bytes.TrimSpace(it)) == "null" {
				continue
			}
			s, err := textOf(it)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case '{':
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return "", fmt.Errorf("it is not a valid JSON object")
		}
		return c.String(), nil
	}
	if !json.Valid(raw) {
		return "", fmt.Errorf("it is not valid JSON")
	}
	return string(raw), nil
}

// clip shortens s to n bytes or so, for messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
