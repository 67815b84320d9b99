package main

import (
	"fmt"

	"github.com/toolhost/toolhost/sdk/placeholder"
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
	ps, perr := placeholder.Split(s, idRE.MatchString)
	switch {
	case perr == nil:
	case perr.Unclosed:
		return nil, fmt.Errorf("the placeholder starting %q is never closed: write {{node_id}}", clip(perr.Rest, 24))
	default:
		return nil, fmt.Errorf("{{%s}} is not a placeholder: write {{node_id}} with the id of a node", clip(perr.Inside, 40))
	}
	t := make(template, len(ps))
	for i, p := range ps {
		t[i] = piece{lit: p.Text, name: p.Name}
	}
	return t, nil
}
