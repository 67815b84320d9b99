package sandbox

import (
	"context"
	"fmt"
	"sync"
)

// Places bounds how many sandboxes run at once across everything that shares it: a Pool's
// runs and a session manager's long-lived sandboxes draw from the same Max, so neither can
// start sandboxes past it behind the other's back. A user that keeps sandboxes between uses
// (sessions) registers a reclaimer with OnFull: when every place is taken, Take asks it to stop
// one that is idle and give its place back before it waits. Its methods are safe for
// concurrent use.
type Places struct {
	mu        sync.Mutex
	max, used int
	changed   chan struct{} // closed and replaced when a place comes free or max rises
	reclaim   map[int]func(context.Context) bool
	next      int
}

// NewPlaces makes n places (at least 1).
func NewPlaces(n int) *Places {
	return &Places{max: max(n, 1), changed: make(chan struct{}), reclaim: map[int]func(context.Context) bool{}}
}

// SetMax changes the number of places (at least 1). Lowered below what is in use, nothing is
// stopped: places taken are given back as their sandboxes end, and new ones wait until fewer
// than max are in use.
func (p *Places) SetMax(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.max = max(n, 1)
	p.wakeLocked()
}

// Max is the number of places.
func (p *Places) Max() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

// InUse is the number of places taken.
func (p *Places) InUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Free is the number of places not taken (0 when more are taken than there are).
func (p *Places) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.max-p.used, 0)
}

// TryTake takes a place if one is free.
func (p *Places) TryTake() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used < p.max {
		p.used++
		return true
	}
	return false
}

// Take takes a place: a free one, else one a reclaimer frees (an idle sandbox it stops), else
// the first given back, waiting until ctx ends (ErrFull).
func (p *Places) Take(ctx context.Context) error {
	for {
		p.mu.Lock()
		if p.used < p.max {
			p.used++
			p.mu.Unlock()
			return nil
		}
		ch, n := p.changed, p.max
		rs := make([]func(context.Context) bool, 0, len(p.reclaim))
		for i := range p.next {
			if r := p.reclaim[i]; r != nil {
				rs = append(rs, r)
			}
		}
		p.mu.Unlock()
		freed := false
		for _, r := range rs {
			if ctx.Err() == nil && r(ctx) {
				freed = true
				break
			}
		}
		if freed {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w (%d): %w", ErrFull, n, ctx.Err())
		}
	}
}

// Give gives back a place that Take or TryTake took.
func (p *Places) Give() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used > 0 {
		p.used--
	}
	p.wakeLocked()
}

// OnFull registers reclaim, which Take calls when every place is taken: it stops one idle
// sandbox of its own, gives its place back, and returns true, or returns false when it has none
// to stop. It must not wait for locks that a caller of Take may hold. The returned func
// unregisters it.
func (p *Places) OnFull(reclaim func(context.Context) bool) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.next
	p.next++
	p.reclaim[id] = reclaim
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.reclaim, id)
	}
}

func (p *Places) wakeLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}
