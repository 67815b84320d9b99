package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestURLTemplate(t *testing.T) {
	a := args{
		"q":    json.RawMessage(`"a b&c=d/e?f#g"`),
		"id":   json.RawMessage(`42`),
		"path": json.RawMessage(`"x/../y z"`),
		"sub":  json.RawMessage(`"eu-west.api"`),
		"bad":  json.RawMessage(`"evil.com/x"`),
		"ids":  json.RawMessage(`[1,"two",3]`),
		"on":   json.RawMessage(`true`),
		"url":  json.RawMessage(`"https://example.org/base"`),
		"dot":  json.RawMessage(`".."`),
		"null": json.RawMessage(`null`),
	}
	cases := []struct {
		tmpl, want, err string
	}{
		{"https://example.com/items/{{id}}", "https://example.com/items/42", ""},
		{"https://example.com/{{path}}", "https://example.com/x%2F..%2Fy%20z", ""},
		{"https://example.com/s?q={{q}}&on={{on}}", "https://example.com/s?q=a+b%26c%3Dd%2Fe%3Ff%23g&on=true", ""},
		{"https://example.com/s?ids={{ids}}", "https://example.com/s?ids=1%2Ctwo%2C3", ""},
		{"https://{{sub}}.example.com/", "https://eu-west.api.example.com/", ""},
		{"https://{{bad}}.example.com/", "", "host name"},
		{"{{url}}/items/{{id}}", "https://example.org/base/items/42", ""},
		{"https://example.com/a#{{q}}", "https://example.com/a#a%20b&c=d%2Fe%3Ff%23g", ""},
		{"https://example.com/{{dot}}/admin", "", "climb out"},
		{"https://example.com/{{missing}}x{{null}}", "https://example.com/x", ""},
		{"https://example.com/{{ id }}", "https://example.com/42", ""},
	}
	for _, c := range cases {
		tm, err := parseTemplate(c.tmpl)
		if err == nil {
			tm, err = tm.forURL()
		}
		if err != nil {
			t.Errorf("%s: %v", c.tmpl, err)
			continue
		}
		got, err := tm.render(a, "the URL")
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %q, %v; want an error about %q", c.tmpl, got, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.tmpl, err)
		case c.err == "" && got != c.want:
			t.Errorf("%s: got %q, want %q", c.tmpl, got, c.want)
		}
	}
}

func TestTemplateErrors(t *testing.T) {
	for tmpl, want := range map[string]string{
		"https://example.com/{{id":       "never closed",
		"https://example.com/{{a b}}":    "not a placeholder",
		"https://example.com/{{}}":       "not a placeholder",
		"https://example.com/{{9lives}}": "not a placeholder",
	} {
		if _, err := parseTemplate(tmpl); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error about %q", tmpl, err, want)
		}
	}
	for tmpl, want := range map[string]string{
		"example.com/x":            "must start with http:// or https://",
		"ftp://example.com/x":      "not ftp://",
		"http{{s}}://example.com/": "must start with http:// or https://",
		"":                         "must start with",
	} {
		tm, err := parseTemplate(tmpl)
		if err == nil {
			_, err = tm.forURL()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error about %q", tmpl, err, want)
		}
	}
}

func TestJSONTemplate(t *testing.T) {
	a := args{
		"name":  json.RawMessage(`"Zoë \"the\" <admin>\n"`),
		"n":     json.RawMessage(`3.50`),
		"tags":  json.RawMessage(`["a", "b"]`),
		"obj":   json.RawMessage(`{"k": [1, 2]}`),
		"flag":  json.RawMessage(`false`),
		"empty": json.RawMessage(`null`),
	}
	cases := []struct{ tmpl, want string }{
		{`{"name": "{{name}}"}`, `{"name": "Zoë \"the\" <admin>\n"}`},
		{`{"name": {{name}}}`, `{"name": "Zoë \"the\" <admin>\n"}`},
		{`{"n": {{n}}, "s": "n={{n}}"}`, `{"n": 3.50, "s": "n=3.50"}`},
		{`{"tags": {{tags}}, "joined": "{{tags}}"}`, `{"tags": ["a","b"], "joined": "a,b"}`},
		{`{{obj}}`, `{"k":[1,2]}`},
		{`{"f": {{flag}}, "m": {{missing}}, "e": "{{empty}}"}`, `{"f": false, "m": null, "e": ""}`},
		{`{"q": "say \"{{flag}}\""}`, `{"q": "say \"false\""}`},
	}
	for _, c := range cases {
		tm, err := parseTemplate(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if err := tm.jsonShaped(); err != nil {
			t.Errorf("%s: not JSON-shaped: %v", c.tmpl, err)
		}
		got, err := tm.forJSON().render(a, "the body")
		if err != nil {
			t.Errorf("%s: %v", c.tmpl, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.tmpl, got, c.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: %s is not JSON", c.tmpl, got)
		}
	}
	for _, tmpl := range []string{`name={{name}}`, `{"a": {{x}}`, `hello {{name}}`} {
		tm, _ := parseTemplate(tmpl)
		if tm.jsonShaped() == nil {
			t.Errorf("%s: taken for JSON", tmpl)
		}
	}
}

func TestHeaderTemplate(t *testing.T) {
	tm, _ := parseTemplate("Bearer {{token}}")
	tm = tm.withEscaping(escHeader)
	got, err := tm.render(args{"token": json.RawMessage(`"abc def"`)}, "the header Authorization")
	if err != nil || got != "Bearer abc def" {
		t.Errorf("got %q, %v", got, err)
	}
	_, err = tm.render(args{"token": json.RawMessage(`"abc\r\nX-Evil: 1"`)}, "the header Authorization")
	if err == nil || !strings.Contains(err.Error(), "line break") {
		t.Errorf("a line break went into a header: %v", err)
	}
}
