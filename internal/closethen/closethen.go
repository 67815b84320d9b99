// Package closethen owns one small thing: a reader whose Close also runs a
// function once, such as releasing the session a file being read belongs to.
package closethen

import (
	"io"
	"os"
	"sync"
)

// Reader returns r whose first Close closes r and then runs then; a later
// Close does nothing and returns os.ErrClosed.
func Reader(r io.ReadCloser, then func()) io.ReadCloser {
	return &reader{ReadCloser: r, then: then}
}

type reader struct {
	io.ReadCloser
	once sync.Once
	then func()
}

func (r *reader) Close() error {
	err := os.ErrClosed
	r.once.Do(func() {
		err = r.ReadCloser.Close()
		r.then()
	})
	return err
}
