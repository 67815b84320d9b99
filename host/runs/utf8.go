package runs

import "unicode/utf8"

// textStream turns byte chunks into valid UTF-8 text without splitting a
// character across two events: an incomplete sequence at the end of a
// chunk waits for the next one. Bytes that are not UTF-8 become U+FFFD.
type textStream struct{ carry []byte }

func (s *textStream) text(p []byte) string {
	b := append(s.carry, p...)
	s.carry = nil
	// Keep back a trailing sequence that may still complete.
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				s.carry = append([]byte(nil), b[len(b)-i:]...)
				b = b[:len(b)-i]
			}
			break
		}
	}
	return toValid(b)
}

// flush returns what is left, made valid.
func (s *textStream) flush() string {
	b := s.carry
	s.carry = nil
	return toValid(b)
}

func toValid(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]rune, 0, len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = append(out, r)
		b = b[n:]
	}
	return string(out)
}
