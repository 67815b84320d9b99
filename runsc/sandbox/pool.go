package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Manager makes and removes the sandboxes.
	Manager *Manager
	// Size is how many ready sandboxes the pool keeps of each shape in use; 0 turns the pool off
	// (every Get starts a sandbox cold).
	Size int
	// Max is the pool's capacity: the most sandboxes handed out at once, across shapes (a Get
	// beyond it waits until one is destroyed), and so the most ready sandboxes of one shape when
	// demand grows. Size when it is less; at least 1. Ignored when Places is set.
	Max int
	// Places, if not nil, are the places the pool shares with other users of sandboxes (a
	// session manager): a handed-out sandbox takes one, and ready sandboxes are kept only in
	// places nobody uses (those above it are retired at the next check), so that the sandboxes
	// of the pool and of its sharers together stay within Places.Max. Nil: the pool has Max
	// places of its own.
	Places *Places
	// MaxIdle is how long demand is remembered: ready sandboxes above Size go once the pool has
	// not needed them for this long, and a shape not asked for in this long (other than one
	// made by Warm) keeps none. 10 minutes when 0.
	MaxIdle time.Duration
	// MemoryBytes is the memory limit ready sandboxes wait with; a Get lowers it to what it
	// asks for when it hands one out, and a Get asking for more starts a sandbox cold.
	MemoryBytes int64
	// Starts bounds how many sandboxes the pool starts at once (default: the number of CPUs).
	Starts int
	// StartShares is cpu.shares of a sandbox while it starts and waits (default 256; a handed-out
	// one gets 1024), so filling the pool yields the CPU to running calls.
	StartShares uint64
	// CheckEvery is how often ready sandboxes are checked for life (default one second). A Get
	// checks the one it hands out too.
	CheckEvery time.Duration
	// Log, if not nil, hears of sandboxes that failed to start or to be removed.
	Log func(msg string, err error)
}

// Pool hands out OneRun sandboxes, at most Max at once, and keeps sandboxes ready — started,
// their first process waiting for its request — so that a run does not wait for a sandbox to
// start. A sandbox leaves the pool for exactly one run and is destroyed after it (Destroy); the
// pool starts a replacement in the background. Sandboxes are never reused and never shared.
//
// Sandboxes that differ in anything but their memory limit (network on or off, the command, …)
// are of different shapes, each with ready sandboxes of its own; the memory limit is lowered to
// what the run asks for when a sandbox is handed out (cgroup v1 memory.limit_in_bytes), so one
// shape serves every memory limit up to MemoryBytes.
//
// How many are kept: Size of each shape in use, more while demand is higher — the most sandboxes
// of the shape in use at once, or the most Gets that come while one sandbox starts (the rate of
// Gets times how long a start takes: calls back to back need several starting at once even when
// only one runs at a time), during the last MaxIdle — up to Max. Ready sandboxes that die are
// noticed (every CheckEvery, and before a hand-out), removed and replaced, never handed out.
type Pool struct {
	opts   PoolOptions
	ctx    context.Context
	cancel context.CancelFunc
	starts chan struct{}
	places *Places // one per sandbox handed out: the pool's capacity
	kickCh chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	shapes map[string]*poolShape
	order  []*poolShape
	inUse  map[*Sandbox]*poolShape // handed out and not yet destroyed, with the shape each counts against
	closed bool
}

// poolShape is the ready sandboxes of one shape and what the pool knows of its demand.
type poolShape struct {
	key, label string
	opts       Options // what ready sandboxes are made with
	warm       bool    // made by Warm: keeps Size ready however long it waits

	ready    []*Sandbox
	starting int
	// running counts the starts under way (past the Starts bound; the others queue for it);
	// waiting counts the Gets waiting for one of those rather than starting one cold;
	// readied is closed (and replaced) whenever a start ends, well or not.
	running int
	waiting int
	readied chan struct{}
	inUse   int
	peak    int // the most wanted lately: in use at once, or the rate's want (rateWant)
	peakAt  time.Time
	lastGet time.Time
	// rate is the Gets per second as of lastGet, a moving average over rateWindow; refill is
	// how long a start for the pool takes (not its wait for the Starts bound: a queue that grows
	// must not grow the target that feeds it), a moving average of the last few.
	rate     float64
	refill   time.Duration
	failures int
	retryAt  time.Time

	handedOut, cold, died, retired, startFailures uint64
}

// PoolStats are the state of one shape of a pool.
type PoolStats struct {
	// Shape names the shape: "no_network" or "network" (with a number after it when several
	// shapes share that).
	Shape string
	// Ready, Starting and InUse count sandboxes now; Target is how many the pool keeps ready now
	// (before the bound of the places free).
	Ready, Starting, InUse, Target int
	// Refill is how long a start for the pool takes lately (its wait for the Starts bound left out).
	Refill time.Duration
	// HandedOut counts runs given a ready sandbox, Cold runs that started one because none was
	// ready, Died ready sandboxes found dead, Retired ready sandboxes removed as not needed,
	// StartFailures sandboxes that failed to start for the pool.
	HandedOut, Cold, Died, Retired, StartFailures uint64
}

// NewPool starts a pool. Close it before closing its Manager.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Manager == nil {
		return nil, errors.New("the sandbox pool needs a manager")
	}
	if opts.Size < 0 {
		return nil, fmt.Errorf("the sandbox pool's size must not be negative, not %d", opts.Size)
	}
	opts.Max = max(opts.Max, opts.Size, 1)
	places := opts.Places
	if places == nil {
		places = NewPlaces(opts.Max)
	}
	if opts.MaxIdle <= 0 {
		opts.MaxIdle = 10 * time.Minute
	}
	if opts.Starts <= 0 {
		opts.Starts = max(runtime.NumCPU(), 1)
	}
	if opts.StartShares == 0 {
		opts.StartShares = 256
	}
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{opts: opts, ctx: ctx, cancel: cancel, starts: make(chan struct{}, opts.Starts),
		places: places, kickCh: make(chan struct{}, 1),
		shapes: map[string]*poolShape{}, inUse: map[*Sandbox]*poolShape{}}
	p.wg.Add(1)
	go p.loop()
	return p, nil
}

// Warm makes opts' shape one the pool keeps Size ready of from now on, without waiting for a
// Get.
func (p *Pool) Warm(opts Options) {
	if p.opts.Size == 0 || opts.Limits.MemoryBytes > p.opts.MemoryBytes {
		return
	}
	p.mu.Lock()
	sh := p.shapeLocked(opts)
	sh.warm = true
	p.mu.Unlock()
	p.kick()
}

// ErrFull says a Get (or Places.Take) gave up waiting: every place was in use until its
// context ended.
var ErrFull = errors.New("every sandbox the pool may have at once is in use")

// Get returns a sandbox of its own for exactly one run of opts, once it has a place (Places.Take:
// it may stop an idle session sandbox for one, or wait until one is free or ctx ends: ErrFull):
// a ready one, its memory limit lowered to opts.Limits.MemoryBytes; when none is ready, the one
// the pool is starting if no other Get waits for it; else one started now (a cold start). The
// caller gives it to Destroy once the run is over.
func (p *Pool) Get(ctx context.Context, opts Options) (_ *Sandbox, err error) {
	if opts.Lifetime != OneRun {
		return nil, errors.New("a sandbox pool hands out one-run sandboxes only")
	}
	if err := p.places.Take(ctx, opts.Owner); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.places.Give(opts.Owner)
		}
	}()
	pooled := p.opts.Size > 0 && opts.Limits.MemoryBytes <= p.opts.MemoryBytes
	var sb *Sandbox
	p.mu.Lock()
	// A closed pool (its kind was reconfigured while this run began) keeps nothing ready: the
	// run starts its sandbox cold on the manager, which stays open until the runs on it end.
	pooled = pooled && !p.closed
	sh, now := p.countGetLocked(opts)
	if pooled {
		if sb, err = p.takeOrAwaitReadyLocked(ctx, sh, now); err != nil {
			p.mu.Unlock()
			return nil, err
		}
	}
	if sb != nil {
		sh.handedOut++
		p.inUse[sb] = sh
		sb.owner = opts.Owner
	} else {
		sh.cold++
	}
	p.mu.Unlock()
	p.kick()
	if sb != nil && p.handOutReady(sb, sh, opts) {
		return sb, nil
	}
	return p.startCold(ctx, sh, opts)
}

// countGetLocked counts a Get of opts among its shape's sandboxes in use (and its peak), and
// returns the shape and when the Get was counted.
func (p *Pool) countGetLocked(opts Options) (*poolShape, time.Time) {
	sh := p.shapeLocked(opts)
	now := time.Now()
	sh.noteGet(now, p.opts.Starts)
	return sh, now
}

// noteGet counts a Get at now among sh's sandboxes in use, in its rate, and in its peak; starts
// is how many sandboxes the pool starts at once.
func (sh *poolShape) noteGet(now time.Time, starts int) {
	sh.inUse++
	if !sh.lastGet.IsZero() {
		sh.rate *= math.Exp(-now.Sub(sh.lastGet).Seconds() / rateWindow.Seconds())
	}
	sh.rate += 1 / rateWindow.Seconds()
	sh.lastGet = now
	if want := max(sh.inUse, sh.rateWant(starts)); want >= sh.peak {
		sh.peak, sh.peakAt = want, now
	}
}

// takeOrAwaitReadyLocked takes a ready sandbox of sh, starting its replacement; when none is
// ready but one is starting that no other Get waits for, it waits for that start to end (p.mu
// unlocked meanwhile) and tries again. It returns nil when the Get must start a sandbox cold, and
// an error (the Get no longer counted in use) when ctx ends first.
func (p *Pool) takeOrAwaitReadyLocked(ctx context.Context, sh *poolShape, now time.Time) (*Sandbox, error) {
	for {
		sb := p.takeReadyLocked(sh)
		// None ready, but one is starting that no other Get waits for: it began before this
		// call and will be ready sooner than a cold start begun now (calls back to back
		// outrun the refill otherwise, and each cold start slows the starts under way). Only
		// a start under way counts, not one queued for the Starts bound: a burst of calls
		// starts cold side by side, as before, rather than one after another.
		waitable := sh.running > sh.waiting
		p.fillLocked(sh, now, p.freePlaces()) // the replacement starts now, not when the pool's loop gets to it
		if sb != nil || !waitable {
			return sb, nil
		}
		sh.waiting++
		readied := sh.readied
		p.mu.Unlock()
		select {
		case <-readied:
		case <-ctx.Done():
		case <-p.ctx.Done():
		}
		p.mu.Lock()
		sh.waiting--
		if err := ctx.Err(); err != nil {
			sh.inUse--
			return nil, fmt.Errorf("waiting for a sandbox to start: %w", err)
		}
		if p.closed {
			// The start it waited for was given up with the pool: a reload must not fail the
			// runs that were waiting, so this one starts cold.
			return nil, nil
		}
	}
}

// handOutReady lowers a ready sandbox's memory limit to the run's and weighs it among its owner's
// sandboxes. When that fails, it counts the Get as a cold start instead, destroys the sandbox in
// the background and reports false.
func (p *Pool) handOutReady(sb *Sandbox, sh *poolShape, opts Options) bool {
	if err := sb.handOut(opts.Limits.MemoryBytes); err == nil {
		sb.unweigh = p.places.Weigh(opts.Owner, sb)
		return true
	} else if p.opts.Log != nil {
		p.opts.Log("handing out a ready sandbox", err)
	}
	p.mu.Lock()
	delete(p.inUse, sb)
	sh.handedOut--
	sh.cold++
	p.mu.Unlock()
	p.destroyInBackground(sb)
	return false
}

// startCold starts a sandbox of opts on the manager for a Get no ready sandbox served, and counts
// it in use; when the start fails, the Get is no longer counted in use.
func (p *Pool) startCold(ctx context.Context, sh *poolShape, opts Options) (*Sandbox, error) {
	sb, err := p.opts.Manager.Start(ctx, opts)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		sh.inUse--
		return nil, err
	}
	p.inUse[sb] = sh
	sb.owner = opts.Owner
	sb.unweigh = p.places.Weigh(opts.Owner, sb)
	return sb, nil
}

// takeReadyLocked takes the first live ready sandbox of sh, removing dead ones it finds.
func (p *Pool) takeReadyLocked(sh *poolShape) *Sandbox {
	for len(sh.ready) > 0 {
		cand := sh.ready[0]
		sh.ready = sh.ready[1:]
		if cand.alive() {
			return cand
		}
		sh.died++
		p.destroyInBackground(cand)
	}
	return nil
}

// Destroy destroys a sandbox Get returned, in the background, and frees its place.
func (p *Pool) Destroy(sb *Sandbox) {
	p.mu.Lock()
	sh, ok := p.inUse[sb]
	if ok {
		sh.inUse--
		delete(p.inUse, sb)
	}
	p.mu.Unlock()
	if ok && sb.unweigh != nil {
		sb.unweigh()
	}
	p.destroyInBackground(sb)
	if ok {
		p.places.Give(sb.owner)
	}
	p.kick()
}

// Stats returns the state of every shape the pool has seen, in the order they were first seen.
func (p *Pool) Stats() []PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PoolStats, 0, len(p.order))
	for _, sh := range p.order {
		out = append(out, PoolStats{Shape: sh.label, Ready: len(sh.ready), Starting: sh.starting, InUse: sh.inUse,
			Target: p.targetLocked(sh, time.Now()), Refill: sh.refill,
			HandedOut: sh.handedOut, Cold: sh.cold, Died: sh.died, Retired: sh.retired, StartFailures: sh.startFailures})
	}
	return out
}

// ReadyIDs returns the ids of the ready sandboxes of every shape (for tests and diagnostics).
func (p *Pool) ReadyIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, sh := range p.order {
		for _, sb := range sh.ready {
			ids = append(ids, sb.ID)
		}
	}
	return ids
}

// Close stops filling the pool, destroys its ready sandboxes and waits for starts under way to
// end. Sandboxes handed out are the caller's to Destroy. A Get waiting for a start, or made
// after Close, starts its sandbox cold on the Manager (a reload doesn't fail the runs begun on
// the pool it replaces).
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var ready []*Sandbox
	for _, sh := range p.order {
		ready = append(ready, sh.ready...)
		sh.ready = nil
	}
	p.mu.Unlock()
	p.cancel()
	errs := destroyAll(ctx, ready)
	waited := make(chan struct{})
	go func() { p.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for the pool's sandbox starts to end: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// shapeLocked returns the shape of opts, making it if it is new.
func (p *Pool) shapeLocked(opts Options) *poolShape {
	key := shapeKey(opts)
	if sh := p.shapes[key]; sh != nil {
		return sh
	}
	label := "no_network"
	if opts.Network {
		label = "network"
	}
	n := 1
	for _, sh := range p.order {
		if sh.opts.Network == opts.Network {
			n++
		}
	}
	if n > 1 {
		label += "_" + strconv.Itoa(n)
	}
	ready := opts
	ready.Limits.MemoryBytes = p.opts.MemoryBytes
	ready.Limits.CPUShares = p.opts.StartShares
	sh := &poolShape{key: key, label: label, opts: ready, readied: make(chan struct{})}
	p.shapes[key] = sh
	p.order = append(p.order, sh)
	return sh
}

// shapeKey is what sandboxes of one shape have in common: everything but the memory limit.
func shapeKey(opts Options) string {
	opts.Limits.MemoryBytes = 0
	opts.Limits.CPUShares = 0
	b, _ := json.Marshal(opts)
	return string(b)
}

func (p *Pool) kick() {
	select {
	case p.kickCh <- struct{}{}:
	default:
	}
}

// loop keeps the pool's shapes filled, checked and trimmed until the pool closes.
func (p *Pool) loop() {
	defer p.wg.Done()
	tick := time.NewTicker(p.opts.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
			p.maintain(true)
		case <-p.kickCh:
			p.maintain(false)
		}
	}
}

// maintain removes dead ready sandboxes (when check is set), retires those not needed and
// starts what is missing.
func (p *Pool) maintain(check bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	now := time.Now()
	// Ready sandboxes wait only in places nobody uses, when the places are shared.
	free := p.freePlaces()
	for _, sh := range p.order {
		if check {
			kept := sh.ready[:0]
			for _, sb := range sh.ready {
				if sb.alive() {
					kept = append(kept, sb)
				} else {
					sh.died++
					p.destroyInBackground(sb)
				}
			}
			clear(sh.ready[len(kept):])
			sh.ready = kept
		}
		free -= p.fillLocked(sh, now, free)
	}
}

// freePlaces is how many places ready sandboxes may wait in: those nobody uses, when the
// places are shared; no bound otherwise.
func (p *Pool) freePlaces() int {
	if p.opts.Places != nil {
		return p.places.Free()
	}
	return math.MaxInt
}

// fillLocked retires the ready sandboxes of sh above its target (at most free) and starts what
// it lacks. It returns the target.
func (p *Pool) fillLocked(sh *poolShape, now time.Time, free int) int {
	target := min(p.targetLocked(sh, now), free)
	for len(sh.ready) > target {
		sh.retired++
		p.destroyInBackground(sh.ready[0])
		sh.ready = sh.ready[1:]
	}
	need := target - len(sh.ready) - sh.starting
	if need <= 0 || now.Before(sh.retryAt) {
		return target
	}
	sh.starting += need
	for range need {
		p.wg.Add(1)
		go p.start(sh)
	}
	return target
}

// rateWindow is the span the rate of Gets is averaged over: long enough to learn a pace of
// calls within seconds, short enough to follow a change of it.
const rateWindow = 5 * time.Second

// rateWant is how many sandboxes of sh the rate of Gets wants ready: the Gets expected while one
// sandbox starts (its refill time), rounded up — the starts that must be under way at once to
// keep up (Little's law) — but no more than starts, the pool's bound on starts at once: past it
// the pool can't keep up however many it aims for, and a larger target would only queue starts
// and hold memory (measured: calls 0.1 s apart on 2 cores learnt a target of 14, and ran no
// faster).
func (sh *poolShape) rateWant(starts int) int {
	return min(int(math.Ceil(sh.rate*sh.refill.Seconds())), starts)
}

// targetLocked is how many sandboxes of sh should be ready: Size, or the most wanted lately
// (in use at once, or by the rate of Gets) when that is more, up to the places' Max; none for a
// shape not asked for in MaxIdle.
func (p *Pool) targetLocked(sh *poolShape, now time.Time) int {
	if p.opts.Size == 0 {
		return 0
	}
	if !sh.warm && now.Sub(sh.lastGet) > p.opts.MaxIdle {
		return 0
	}
	if now.Sub(sh.peakAt) > p.opts.MaxIdle {
		sh.peak, sh.peakAt = sh.inUse, now
	}
	return min(max(p.opts.Size, sh.peak), p.places.Max())
}

// start starts one sandbox for sh, at most Starts at once across the pool.
func (p *Pool) start(sh *poolShape) {
	defer p.wg.Done()
	select {
	case p.starts <- struct{}{}:
	case <-p.ctx.Done():
		p.mu.Lock()
		sh.starting--
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	sh.running++
	p.mu.Unlock()
	began := time.Now()
	sb, err := p.opts.Manager.Start(p.ctx, sh.opts)
	<-p.starts
	p.mu.Lock()
	sh.starting--
	sh.running--
	close(sh.readied)
	sh.readied = make(chan struct{})
	if err != nil {
		closed := p.closed
		if !closed {
			sh.startFailures++
			sh.failures++
			sh.retryAt = time.Now().Add(min(time.Duration(1<<min(sh.failures, 5))*time.Second, 30*time.Second))
		}
		p.mu.Unlock()
		if !closed && p.opts.Log != nil {
			p.opts.Log("starting a sandbox for the pool", err)
		}
		return
	}
	sh.failures = 0
	if took := time.Since(began); sh.refill == 0 {
		sh.refill = took
	} else {
		sh.refill += (took - sh.refill) / 4
	}
	if p.closed {
		p.mu.Unlock()
		_ = sb.Destroy(context.Background())
		return
	}
	sh.ready = append(sh.ready, sb)
	p.mu.Unlock()
}

// destroyInBackground destroys sb without waiting, logging a failure.
func (p *Pool) destroyInBackground(sb *Sandbox) {
	var onErr func(error)
	if p.opts.Log != nil {
		onErr = func(err error) { p.opts.Log("removing sandbox "+sb.ID, err) }
	}
	p.opts.Manager.DestroyInBackground(sb, onErr)
}

// awaitReady reads the first process's ready line from Control.
func (s *Sandbox) awaitReady(ctx context.Context, line string) error {
	began := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Control.SetReadDeadline(time.Now()) })
	defer stop()
	_ = s.Control.SetReadDeadline(deadline)
	defer func() { _ = s.Control.SetReadDeadline(time.Time{}) }()
	want := line + "\n"
	got := make([]byte, 0, len(want))
	b := make([]byte, 1)
	for len(got) < len(want) {
		n, err := s.Control.Read(b)
		if n == 1 {
			got = append(got, b[0])
			if b[0] == '\n' {
				break
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for the sandbox to be ready: %w", ctx.Err())
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("the sandbox was not ready within %s (a machine short of CPU starts sandboxes slowly): %s",
					time.Since(began).Round(time.Second), s.stderrTail())
			}
			return fmt.Errorf("the sandbox ended before it was ready: %s", s.stderrTail())
		}
	}
	if string(got) != want {
		return fmt.Errorf("the sandbox's first process said %q instead of that it is ready", strings.TrimSpace(string(got)))
	}
	return nil
}

// stderrTail is what the sandbox wrote to stderr so far (up to 2 KiB, its end), for messages.
func (s *Sandbox) stderrTail() string {
	buf := make([]byte, 64<<10)
	_ = s.Stderr.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	n, _ := s.Stderr.Read(buf)
	_ = s.Stderr.SetReadDeadline(time.Time{})
	msg := strings.TrimSpace(string(buf[:n]))
	if len(msg) > 2048 {
		msg = "…" + msg[len(msg)-2048:]
	}
	if msg == "" {
		return "it printed nothing"
	}
	return msg
}

// alive reports whether a sandbox waiting for its request still waits: nothing to read on its
// control socket, stdout or stderr (a dead sandbox's ends close; a waiting runner writes
// nothing).
func (s *Sandbox) alive() bool {
	fds := make([]unix.PollFd, 0, 3)
	for _, f := range []*os.File{s.Control, s.Stdout, s.Stderr} {
		rc, err := f.SyscallConn()
		if err != nil {
			return false
		}
		if err := rc.Control(func(fd uintptr) {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP})
		}); err != nil {
			return false
		}
	}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false
		}
		return n == 0
	}
}

// handOut gives a ready sandbox what its run asks for: its memory limit (lowered from the
// pool's), a clean failure count, and full CPU shares.
func (s *Sandbox) handOut(memoryBytes int64) error {
	if memoryBytes > 0 && memoryBytes != s.opts.Limits.MemoryBytes {
		if err := s.m.cg.SetMemoryLimit(s.ID, s.opts.Limits.MemoryBytes, memoryBytes); err != nil {
			return err
		}
		s.opts.Limits.MemoryBytes = memoryBytes
	}
	base, err := s.m.cg.ResetCounters(s.ID)
	if err != nil {
		return err
	}
	s.baseline = base
	return s.giveFullShares()
}

// giveFullShares gives a sandbox started with few CPU shares (a pool's, a prepared one) a
// running sandbox's, as it starts running code.
func (s *Sandbox) giveFullShares() error {
	if s.opts.Limits.CPUShares != 0 && s.opts.Limits.CPUShares != fullShares {
		if err := s.setCPUShares(fullShares); err != nil {
			return err
		}
		s.opts.Limits.CPUShares = fullShares
	}
	return nil
}

// setCPUShares gives the sandbox shares of CPU time under contention (a limit changed through
// a verb of the cgroup; Options keep the shares it started with).
func (s *Sandbox) setCPUShares(shares uint64) error { return s.m.cg.SetCPUShares(s.ID, shares) }
