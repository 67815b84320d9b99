// Package placeholder splits a tool's template text into literal text and
// {{name}} placeholders: the one placeholder syntax of toolhost's kinds (an
// http tool's URL, a prompt, a graph's template node), for a third-party
// kind to share. It says where a template is wrong; each kind words the
// message for its own users and decides what a name may be.
package placeholder

import "strings"

// Piece is one part of a template: literal Text, or the Name of a
// placeholder.
type Piece struct {
	Text string
	// Name is the placeholder's name, spaces around it trimmed; "" for
	// text.
	Name string
}

// Error says what is wrong with a template: a "{{" with no "}}" after it
// (Unclosed, with Rest the text from that "{{" on), or a placeholder whose
// inside is not a name (Inside, as written between the braces). Rest and
// Inside may hold anything the template holds, secrets included: quote
// them with care.
type Error struct {
	Unclosed bool
	Rest     string
	Inside   string
}

func (e *Error) Error() string {
	if e.Unclosed {
		return "a placeholder is never closed"
	}
	return "a {{…}} is not a placeholder"
}

// Split splits s into text and placeholders. A placeholder is {{name}},
// spaces inside the braces allowed ({{ name }}); valid says whether a
// name is one. "{{" always starts a placeholder: there is no way to write
// a literal "{{" in a template (it can come in through a value).
func Split(s string, valid func(name string) bool) ([]Piece, *Error) {
	var out []Piece
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if rest != "" {
				out = append(out, Piece{Text: rest})
			}
			return out, nil
		}
		if i > 0 {
			out = append(out, Piece{Text: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, &Error{Unclosed: true, Rest: rest[i:]}
		}
		inside := rest[i+2 : i+2+j]
		name := strings.TrimSpace(inside)
		if !valid(name) {
			return nil, &Error{Inside: inside}
		}
		out = append(out, Piece{Name: name})
		rest = rest[i+2+j+2:]
	}
}
