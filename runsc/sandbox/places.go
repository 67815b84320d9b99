package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Places bounds how many sandboxes run at once across everything that shares it: a Pool's
// runs and a session manager's long-lived sandboxes draw from the same Max, so neither can
// start sandboxes past it behind the other's back. A user that keeps sandboxes between uses
// (sessions) registers a reclaimer with OnFull: when every place is taken, Take asks it to stop
// one that is idle and give its place back before it waits.
//
// Each place is taken for an owner (the principal a run is for): when places are scarce, the
// next one free goes to the waiting owner that holds the fewest, first come first served among
// equals, so that one caller's many sandboxes can't keep another waiting behind all of them.
// An owner holding half the places or more doesn't take the last free one while another owner
// holds or waits for places: that one is kept for the others' next run (a pool keeps a ready
// sandbox there). Alone, an owner may take them all.
// And the CPU weight of one running sandbox (cpu.shares 1024) is divided among each owner's
// running sandboxes (Weigh): under contention a caller with five weighs as much as a caller
// with one. Its methods are safe for concurrent use.
type Places struct {
	mu        sync.Mutex
	max, used int
	held      map[string]int // places taken, by owner
	waiting   []*placeWaiter // Takes waiting for a place, in the order they came
	changed   chan struct{}  // closed and replaced when a place comes free, max rises or a waiter leaves
	reclaim   map[int]func(context.Context) bool
	next      int

	wmu     sync.Mutex            // held while weights are written, so they are written in order
	running map[string][]*Sandbox // Weigh's sandboxes, by owner
}

// placeWaiter is one Take waiting for a place.
type placeWaiter struct{ owner string }

// NewPlaces makes n places (at least 1).
func NewPlaces(n int) *Places {
	return &Places{max: max(n, 1), held: map[string]int{}, changed: make(chan struct{}), reclaim: map[int]func(context.Context) bool{},
		running: map[string][]*Sandbox{}}
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

// Held is the number of places owner holds.
func (p *Places) Held(owner string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[owner]
}

// Free is the number of places not taken (0 when more are taken than there are).
func (p *Places) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.max-p.used, 0)
}

// TryTake takes a place for owner if one is free for it and no Take waits for one.
func (p *Places) TryTake(owner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiting) == 0 && p.mayTakeLocked(owner) {
		p.takeLocked(owner)
		return true
	}
	return false
}

// Take takes a place for owner: a free one when no waiting owner holds fewer places, else one a
// reclaimer frees (an idle sandbox it stops), else the first given back that is its turn,
// waiting until ctx ends (ErrFull).
func (p *Places) Take(ctx context.Context, owner string) error {
	p.mu.Lock()
	if len(p.waiting) == 0 && p.mayTakeLocked(owner) {
		p.takeLocked(owner)
		p.mu.Unlock()
		return nil
	}
	w := &placeWaiter{owner: owner}
	p.waiting = append(p.waiting, w)
	defer func() {
		p.mu.Lock()
		p.waiting = slices.DeleteFunc(p.waiting, func(x *placeWaiter) bool { return x == w })
		// The next in line may be another now, or a place may be left over for it.
		p.wakeLocked()
		p.mu.Unlock()
	}()
	for {
		if p.used < p.max {
			if p.turnLocked() == w {
				p.takeLocked(owner)
				p.mu.Unlock()
				return nil
			}
		} else if p.reclaimLocked(ctx) {
			continue // p.mu is held again
		}
		ch, n := p.changed, p.max
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w (%d): %w", ErrFull, n, ctx.Err())
		}
		p.mu.Lock()
	}
}

// reclaimLocked asks the reclaimers, with p.mu released, to stop an idle sandbox, and says
// whether one did. p.mu is held again when it returns.
func (p *Places) reclaimLocked(ctx context.Context) bool {
	rs := make([]func(context.Context) bool, 0, len(p.reclaim))
	for i := range p.next {
		if r := p.reclaim[i]; r != nil {
			rs = append(rs, r)
		}
	}
	p.mu.Unlock()
	defer p.mu.Lock()
	for _, r := range rs {
		if ctx.Err() == nil && r(ctx) {
			return true
		}
	}
	return false
}

// turnLocked is the waiter whose turn it is: of those a free place may go to, those whose
// owners hold the fewest places, the first to come.
func (p *Places) turnLocked() *placeWaiter {
	var best *placeWaiter
	for _, w := range p.waiting {
		if (best == nil || p.held[w.owner] < p.held[best.owner]) && p.mayTakeLocked(w.owner) {
			best = w
		}
	}
	return best
}

// mayTakeLocked says whether a free place may go to owner: one is free, and owner holds fewer
// than half the places, or more than one is free, or no other owner holds or waits for one.
func (p *Places) mayTakeLocked(owner string) bool {
	switch {
	case p.used >= p.max:
		return false
	case p.held[owner] < (p.max+1)/2 || p.max-p.used >= 2:
		return true
	}
	for o := range p.held {
		if o != owner {
			return false
		}
	}
	for _, w := range p.waiting {
		if w.owner != owner {
			return false
		}
	}
	return true
}

func (p *Places) takeLocked(owner string) {
	p.used++
	p.held[owner]++
}

// Give gives back a place that Take or TryTake took for owner.
func (p *Places) Give(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used > 0 {
		p.used--
	}
	if p.held[owner]--; p.held[owner] <= 0 {
		delete(p.held, owner)
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

// fullShares is the CPU weight of one running sandbox (cgroup v1 cpu.shares; on v2 the
// cpu.weight runsc converts it to).
const fullShares = 1024

// Weigh counts sb, running code, as one of owner's running sandboxes until done is called
// (once, however often): owner's running sandboxes share fullShares of CPU weight between them,
// each getting an equal part (at least 2 shares), rewritten as their number changes. A sandbox
// of no owner ("") keeps the weight it has. A weight that can't be written (the sandbox
// just ended) is skipped: the sandbox goes on with the weight it had.
func (p *Places) Weigh(owner string, sb *Sandbox) (done func()) {
	if owner == "" {
		return func() {}
	}
	p.wmu.Lock()
	p.running[owner] = append(p.running[owner], sb)
	p.reweighLocked(owner)
	p.wmu.Unlock()
	return sync.OnceFunc(func() {
		p.wmu.Lock()
		defer p.wmu.Unlock()
		p.running[owner] = slices.DeleteFunc(p.running[owner], func(x *Sandbox) bool { return x == sb })
		if len(p.running[owner]) == 0 {
			delete(p.running, owner)
			return
		}
		p.reweighLocked(owner)
	})
}

// Weight is the cpu.shares Weigh gives each of owner's running sandboxes now (fullShares when
// it has none).
func (p *Places) Weight(owner string) uint64 {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return ownerShares(len(p.running[owner]))
}

func ownerShares(n int) uint64 { return max(fullShares/uint64(max(n, 1)), 2) }

// reweighLocked writes the weight of each of owner's running sandboxes. p.wmu is held.
func (p *Places) reweighLocked(owner string) {
	shares := ownerShares(len(p.running[owner]))
	for _, sb := range p.running[owner] {
		_ = sb.setCPUShares(shares)
	}
}
