package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a config or tool file, at a place.
type Error struct {
	File   string // the file as it was named to Load, ParseTool or LoadTools
	Line   int    // 1-based; 0 when the problem is with the whole file
	Column int    // 1-based; 0 when unknown; not printed
	// Field is the dotted path of the value, e.g. "http.timeout_seconds" or
	// "params[1].kind"; empty when the problem is not with one value.
	Field   string
	Message string
}

// Error reads "file:line: field: message", leaving out what is unknown.
func (e Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in one or more files, in file and line order.
type Errors []Error

// Error puts one problem on each line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sorted orders the problems by file, then line, keeping the order in which
// problems on the same line were found.
func (es Errors) sorted() Errors {
	slices.SortStableFunc(es, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return es
}

// errorsOrNil returns es as an error, or a nil error (not a nil Errors) when
// there are none.
func errorsOrNil(es Errors) error {
	if len(es) == 0 {
		return nil
	}
	return es.sorted()
}

func (es *Errors) addf(file string, line int, field, format string, args ...any) {
	*es = append(*es, Error{File: file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// ErrorAt places a problem with a value of the host's own tables
// ("model.api_key_env") at its file and line; a value not written is
// placed at its table, or at the file.
func (c *Config) ErrorAt(field, message string) Error {
	e := Error{File: c.File, Field: field, Message: message}
	if c.doc != nil {
		e.File, e.Line = c.doc.file, c.doc.lineAt(field)
	}
	return e
}
