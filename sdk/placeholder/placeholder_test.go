package placeholder

import (
	"reflect"
	"testing"
)

func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Piece
		err  *Error
	}{
		{"", nil, nil},
		{"plain } text {", []Piece{{Text: "plain } text {"}}, nil},
		{"a {{x}} b {{ y_z }}", []Piece{{Text: "a "}, {Name: "x"}, {Text: " b "}, {Name: "y_z"}}, nil},
		{"{{x}}{{x}}", []Piece{{Name: "x"}, {Name: "x"}}, nil},
		{"a {{x", nil, &Error{Unclosed: true, Rest: "{{x"}},
		{"a {{x}} {{Bad!}} c", nil, &Error{Inside: "Bad!"}},
		{"{{}}", nil, &Error{Inside: ""}},
		{"{{ {{x}} }}", nil, &Error{Inside: " {{x"}},
	} {
		got, err := Split(tc.in, isName)
		if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(err, tc.err) {
			t.Errorf("Split(%q) = %+v, %+v; want %+v, %+v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
