package api

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// This file paces refusals. A cap's refusal (429: too_many_runs,
// too_many_transfers, too_many_sessions, budget) costs the host little, but
// a caller that ignores Retry-After and asks again at once, from many
// connections, can make thousands a second, and answering them takes CPU
// from every other caller (an abuse test's storm made 3,000 a second, half
// a core of the host's). Each token may be refused RefusalRate times a
// second (RefusalBurst at once) at no cost; past that, each refusal waits
// its turn, at most MaxRefusalWait, before it is written. A caller that
// waits out Retry-After never meets the pace.
const (
	RefusalRate    = 50
	RefusalBurst   = 100
	MaxRefusalWait = time.Second
)

// refusalPace holds each token's pace of refusals.
type refusalPace struct {
	// rate and burst are RefusalRate and RefusalBurst when 0 (tests set
	// their own).
	rate  rate.Limit
	burst int

	mu     sync.Mutex
	tokens map[string]*rate.Limiter
	paced  atomic.Uint64 // refusals that waited
}

// wait returns when principal's next refusal may be written: at once
// while it is within its pace, else after its turn (at most
// MaxRefusalWait, or until ctx ends).
func (p *refusalPace) wait(ctx context.Context, principal string) {
	p.mu.Lock()
	if p.tokens == nil {
		p.tokens = map[string]*rate.Limiter{}
	}
	l := p.tokens[principal]
	if l == nil {
		lim, burst := p.rate, p.burst
		if lim == 0 {
			lim, burst = RefusalRate, RefusalBurst
		}
		l = rate.NewLimiter(lim, burst)
		p.tokens[principal] = l
	}
	p.mu.Unlock()
	r := l.Reserve()
	d := r.Delay()
	if d <= 0 {
		return
	}
	if d > MaxRefusalWait {
		// Past the longest wait the turns aren't kept: they would pile up.
		r.Cancel()
		d = MaxRefusalWait
	}
	p.paced.Add(1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// PacedRefusals is how many refusals waited for their turn since the
// server was made.
func (s *Server) PacedRefusals() uint64 { return s.pace.paced.Load() }

// pacedWriter is a caller's ResponseWriter that waits for the caller's
// pace before it writes a 429. It keeps what the writer under it can do:
// hijack (websockets), flush (streams) and ReadFrom (files sent whole).
type pacedWriter struct {
	http.ResponseWriter
	pace  func()
	wrote bool
}

func (w *pacedWriter) WriteHeader(status int) {
	if status == http.StatusTooManyRequests && !w.wrote {
		w.pace()
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *pacedWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer under it.
func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *pacedWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *pacedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *pacedWriter) ReadFrom(r io.Reader) (int64, error) {
	w.wrote = true
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

var (
	_ http.Hijacker = (*pacedWriter)(nil)
	_ http.Flusher  = (*pacedWriter)(nil)
	_ io.ReaderFrom = (*pacedWriter)(nil)
)
