package main

import (
	"fmt"
	"strings"
)

// piece is one part of a template: literal text, or a placeholder.
type piece struct {
	lit  string
	name string // the node id of a placeholder; "" for text
}

// template is a template node's text split into text and placeholders.
type template []piece

// parseTemplate splits s into text and {{id}} placeholders (spaces inside
// the braces are allowed). There is no way to write a literal "{{".
func parseTemplate(s string) (template, error) {
	var t template
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if rest != "" {
				t = append(t, piece{lit: rest})
			}
			return t, nil
		}
		if i > 0 {
			t = append(t, piece{lit: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("the placeholder starting %q is never closed: write {{node_id}}", clip(rest[i:], 24))
		}
		inside := rest[i+2 : i+2+j]
		name := strings.TrimSpace(inside)
		if !idRE.MatchString(name) {
			return nil, fmt.Errorf("{{%s}} is not a placeholder: write {{node_id}} with the id of a node", clip(inside, 40))
		}
		t = append(t, piece{name: name})
		rest = rest[i+2+j+2:]
	}
}
