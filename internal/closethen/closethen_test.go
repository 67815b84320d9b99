package closethen

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

type counted struct {
	io.Reader
	closes int
}

func (c *counted) Close() error { c.closes++; return nil }

// TestReader: reading passes through; the first Close closes the reader and
// runs the function, once; a second Close is os.ErrClosed and runs nothing.
func TestReader(t *testing.T) {
	inner := &counted{Reader: strings.NewReader("abc")}
	ran := 0
	r := Reader(inner, func() { ran++ })
	if b, err := io.ReadAll(r); err != nil || string(b) != "abc" {
		t.Fatalf("read %q, %v", b, err)
	}
	if err := r.Close(); err != nil || inner.closes != 1 || ran != 1 {
		t.Fatalf("first Close: %v, %d closes, ran %d", err, inner.closes, ran)
	}
	if err := r.Close(); !errors.Is(err, os.ErrClosed) || inner.closes != 1 || ran != 1 {
		t.Errorf("second Close: %v, %d closes, ran %d; want os.ErrClosed and nothing run", err, inner.closes, ran)
	}
}
