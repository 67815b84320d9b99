package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// markRunner says it is ready, waits for one request, answers "fresh" when neither /work nor
// /tmp holds a mark yet ("seen" otherwise), and leaves a mark in both.
const markRunner = `
import os
f = os.fdopen(3, "r+b", buffering=0)
f.write(b"ready\n")
f.readline()
seen = os.path.exists("/work/mark") or os.path.exists("/tmp/mark")
for p in ("/work/mark", "/tmp/mark"):
    with open(p, "w") as m:
        m.write("x")
f.write(b"seen\n" if seen else b"fresh\n")
`

func poolSandbox() Options {
	return Options{Args: []string{"/usr/bin/python3", "-I", "-c", markRunner}, Limits: testLimits(), Ready: "ready"}
}

func newTestPool(t *testing.T, m *Manager, opts PoolOptions) *Pool {
	t.Helper()
	opts.Manager = m
	if opts.MemoryBytes == 0 {
		opts.MemoryBytes = 512 << 20
	}
	opts.Log = func(msg string, err error) { t.Logf("pool: %s: %v", msg, err) }
	p, err := NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("closing the pool: %v", err)
		}
	})
	return p
}

// waitFor polls cond until it holds; the limit is generous (a shared 2-core machine), and only
// a pool that never gets there fails.
func waitFor(t *testing.T, what string, cond func() bool, state ...func() string) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	for _, s := range state {
		what += " (" + s() + ")"
	}
	t.Fatalf("timed out waiting for %s", what)
}

func shapeStats(p *Pool) PoolStats {
	st := p.Stats()
	if len(st) == 0 {
		return PoolStats{}
	}
	return st[0]
}

// use runs one request on a sandbox from the pool and returns its answer.
func use(t *testing.T, p *Pool, opts Options) (id, answer string) {
	t.Helper()
	id, answer, err := tryUse(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return id, answer
}

// tryUse is use for another goroutine than the test's: it returns what failed.
func tryUse(p *Pool, opts Options) (id, answer string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := p.Get(ctx, opts)
	if err != nil {
		return "", "", err
	}
	defer p.Destroy(sb)
	if _, err := sb.Control.Write([]byte("go\n")); err != nil {
		return sb.ID, "", err
	}
	line, err := bufio.NewReader(sb.Control).ReadString('\n')
	if err != nil {
		return sb.ID, "", fmt.Errorf("reading the answer of %s: %w", sb.ID, err)
	}
	return sb.ID, strings.TrimSpace(line), nil
}

// TestPoolEveryRunGetsAFreshSandbox: runs one after another each get a sandbox of their own, all
// handed out ready, and none sees what an earlier one wrote.
func TestPoolEveryRunGetsAFreshSandbox(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, Max: 2})
	opts := poolSandbox()
	p.Warm(opts)
	var ids []string
	for i := range 4 {
		waitFor(t, "a ready sandbox", func() bool { return shapeStats(p).Ready >= 1 })
		id, answer := use(t, p, opts)
		if answer != "fresh" {
			t.Errorf("run %d: the sandbox saw an earlier run's files (%q)", i, answer)
		}
		if slices.Contains(ids, id) {
			t.Errorf("run %d: sandbox %s was handed out again", i, id)
		}
		ids = append(ids, id)
	}
	if st := shapeStats(p); st.HandedOut != 4 || st.Cold != 0 {
		t.Errorf("stats %+v; want 4 handed out ready, none cold", st)
	}
}

// TestPoolCallsBackToBackWaitForTheRefill: runs one right after another, faster than the pool
// refills, wait for the sandbox already starting rather than start one cold beside it: every
// one is handed out from the pool, each still fresh.
func TestPoolCallsBackToBackWaitForTheRefill(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, Max: 2})
	opts := poolSandbox()
	p.Warm(opts)
	waitFor(t, "a ready sandbox", func() bool { return shapeStats(p).Ready >= 1 })
	for i := range 4 {
		if _, answer := use(t, p, opts); answer != "fresh" {
			t.Errorf("run %d: the sandbox saw an earlier run's files (%q)", i, answer)
		}
	}
	if st := shapeStats(p); st.HandedOut != 4 || st.Cold != 0 {
		t.Errorf("stats %+v; want all 4 runs back to back handed out from the pool, none cold", st)
	}
}

// TestPoolBurstsStartColdSideBySide: a burst of calls that finds too few ready sandboxes starts
// the rest cold side by side; a call waits only for a start already under way that no other call
// waits for, never for one queued behind the pool's bound on starts (Starts: 1 here), which
// would run a burst's starts one after another.
func TestPoolBurstsStartColdSideBySide(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, Max: 4, Starts: 1})
	opts := poolSandbox()
	p.Warm(opts)
	waitFor(t, "a ready sandbox", func() bool { return shapeStats(p).Ready >= 1 })
	go4 := make(chan struct{})
	answers := make(chan string, 4)
	for range 4 {
		go func() {
			<-go4
			_, answer, err := tryUse(p, opts)
			if err != nil {
				answer = err.Error()
			}
			answers <- answer
		}()
	}
	close(go4)
	for range 4 {
		if a := <-answers; a != "fresh" {
			t.Errorf("a run of the burst: %q", a)
		}
	}
	if st := shapeStats(p); st.HandedOut+st.Cold != 4 || st.Cold < 2 {
		t.Errorf("stats %+v; want at least 2 of the burst of 4 started cold (one took the ready sandbox, at most one waited for the one start under way)", st)
	}
}

// TestPoolReplacesADeadSandbox: a ready sandbox killed from outside is never handed out, and the
// pool notices and replaces it by itself.
func TestPoolReplacesADeadSandbox(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, CheckEvery: time.Hour}) // only a Get checks
	opts := poolSandbox()
	p.Warm(opts)
	waitFor(t, "a ready sandbox", func() bool { return len(p.ReadyIDs()) == 1 })
	victim := p.ReadyIDs()[0]
	killFromOutside(t, victim)
	id, answer := use(t, p, opts)
	if id == victim || answer != "fresh" {
		t.Fatalf("got sandbox %s answering %q; the dead one was %s", id, answer, victim)
	}
	if st := shapeStats(p); st.Died != 1 || st.Cold != 1 {
		t.Errorf("stats %+v; want one died and the run started cold", st)
	}

	// The periodic check finds a dead one without a Get and starts another.
	q := newTestPool(t, m, PoolOptions{Size: 1, CheckEvery: 50 * time.Millisecond})
	q.Warm(opts)
	waitFor(t, "a ready sandbox", func() bool { return len(q.ReadyIDs()) == 1 })
	victim = q.ReadyIDs()[0]
	killFromOutside(t, victim)
	waitFor(t, "the dead sandbox to be replaced", func() bool {
		ids := q.ReadyIDs()
		return shapeStats(q).Died == 1 && len(ids) == 1 && ids[0] != victim
	})
	if id, answer := use(t, q, opts); id == victim || answer != "fresh" {
		t.Fatalf("got sandbox %s answering %q; the dead one was %s", id, answer, victim)
	}
}

// killFromOutside kills every process of a sandbox as something outside toolhost would (the OOM
// killer, an admin) and waits until they are gone.
func killFromOutside(t *testing.T, id string) {
	t.Helper()
	cg, err := OpenCgroups()
	if err != nil {
		t.Fatal(err)
	}
	cg.Kill(id)
	// Until every task is gone, not only cgroup.procs empty: a process's last threads still hold
	// its files (the sandbox's ends of its sockets) a moment after it left cgroup.procs.
	waitFor(t, "the killed sandbox's processes to end", func() bool { empty, ok := cg.Empty(id); return empty || !ok })
}

// TestPoolHandOutSetsTheRunsLimits: a ready sandbox waits with the pool's memory limit and few
// CPU shares; handed out it has the run's memory limit and full shares.
func TestPoolHandOutSetsTheRunsLimits(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, Max: 2, MemoryBytes: 512 << 20, StartShares: 128})
	opts := poolSandbox()
	p.Warm(opts)
	waitFor(t, "a ready sandbox", func() bool { return len(p.ReadyIDs()) == 1 })
	id := p.ReadyIDs()[0]
	cg := m.Cgroups()
	if got := memoryLimit(cg, id); got != 512<<20 {
		t.Errorf("a ready sandbox's memory limit is %d; want the pool's %d", got, 512<<20)
	}
	if got, want := cpuShares(cg, id), sharesAs(cg, 128); got != want {
		t.Errorf("a ready sandbox's CPU shares are %d; want %d (128 shares)", got, want)
	}
	opts.Limits.MemoryBytes = 160 << 20
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := p.Get(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy(sb)
	if sb.ID != id {
		t.Fatalf("got %s, not the ready %s", sb.ID, id)
	}
	if got := memoryLimit(cg, id); got != 160<<20 {
		t.Errorf("the handed-out sandbox's memory limit = %d; want %d", got, 160<<20)
	}
	if mem := filepath.Join(CgroupRoot, "memory", id); !cg.V2() && sandboxtest.Exists(filepath.Join(mem, "memory.memsw.limit_in_bytes")) {
		if got := readUint(filepath.Join(mem, "memory.memsw.limit_in_bytes")); got != 160<<20 {
			t.Errorf("memory.memsw.limit_in_bytes = %d; want %d", got, 160<<20)
		}
	}
	if got, want := cpuShares(cg, id), sharesAs(cg, 1024); got != want {
		t.Errorf("the handed-out sandbox's CPU shares = %d; want %d (1024 shares)", got, want)
	}
	// More memory than the pool's sandboxes have: a cold start with exactly that.
	opts.Limits.MemoryBytes = 768 << 20
	big, err := p.Get(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy(big)
	if got := memoryLimit(cg, big.ID); got != 768<<20 {
		t.Errorf("a cold sandbox's memory limit = %d; want %d", got, 768<<20)
	}
	if st := shapeStats(p); st.HandedOut != 1 || st.Cold != 1 {
		t.Errorf("stats %+v; want one handed out, one cold", st)
	}
}

// TestAnOwnersSandboxesShareOneWeight: the CPU weight of one sandbox is divided among an
// owner's running sandboxes (Places.Weigh), rewritten as they come and go: two of one owner's
// have half each, another owner's one has it whole, and once one of the two is gone the other
// has it whole again.
func TestAnOwnersSandboxesShareOneWeight(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, Max: 3})
	cg := m.Cgroups()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	get := func(owner string) *Sandbox {
		opts := poolSandbox()
		opts.Owner = owner
		sb, err := p.Get(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	a1, a2, b := get("a"), get("a"), get("b")
	defer p.Destroy(a2)
	defer p.Destroy(b)
	for _, c := range []struct {
		sb     *Sandbox
		shares uint64
	}{{a1, 512}, {a2, 512}, {b, 1024}} {
		if got, want := cpuShares(cg, c.sb.ID), sharesAs(cg, c.shares); got != want {
			t.Errorf("%s's sandbox has CPU shares %d; want %d (%d shares)", c.sb.owner, got, want, c.shares)
		}
	}
	p.Destroy(a1)
	if got, want := cpuShares(cg, a2.ID), sharesAs(cg, 1024); got != want {
		t.Errorf("with one of a's two sandboxes gone, the other has CPU shares %d; want %d (1024 shares)", got, want)
	}
}

// TestPoolGrowsAndShrinks: demand above Size grows the ready sandboxes up to Max; once it is gone
// for MaxIdle they go back to Size. Off (Size 0), every Get starts cold and nothing waits.
func TestPoolGrowsAndShrinks(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, Max: 3, MaxIdle: 2 * time.Second, CheckEvery: 100 * time.Millisecond})
	opts := poolSandbox()
	p.Warm(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var held []*Sandbox
	for range 3 {
		sb, err := p.Get(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, sb)
	}
	waitFor(t, "the pool to grow to Max", func() bool { return shapeStats(p).Ready == 3 })
	for _, sb := range held {
		p.Destroy(sb)
	}
	waitFor(t, "the pool to shrink to Size", func() bool {
		st := shapeStats(p)
		return st.Ready == 1 && st.InUse == 0 && st.Retired == 2
	}, func() string { return fmt.Sprintf("%+v", shapeStats(p)) })

	off := newTestPool(t, m, PoolOptions{Size: 0, Max: 4})
	for range 2 {
		if _, answer := use(t, off, opts); answer != "fresh" {
			t.Errorf("answer %q", answer)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if st := shapeStats(off); st.Cold != 2 || st.Ready != 0 || st.Starting != 0 || st.HandedOut != 0 {
		t.Errorf("a pool of size 0: stats %+v; want 2 cold starts and nothing ready", st)
	}
}

// TestPoolShapes: sandboxes with network are a shape of their own.
func TestPoolShapes(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1})
	plain := poolSandbox()
	p.Warm(plain)
	withNet := plain
	withNet.Network = true
	if _, answer := use(t, p, withNet); answer != "fresh" {
		t.Errorf("answer %q", answer)
	}
	waitFor(t, "both shapes ready", func() bool {
		st := p.Stats()
		return len(st) == 2 && st[0].Ready == 1 && st[1].Ready == 1
	})
	st := p.Stats()
	if st[0].Shape != "no_network" || st[1].Shape != "network" || st[1].Cold != 1 {
		t.Errorf("stats %+v", st)
	}
	if _, answer := use(t, p, withNet); answer != "fresh" {
		t.Errorf("network run: %q", answer)
	}
	if st := p.Stats(); st[1].HandedOut != 1 {
		t.Errorf("the second network run wasn't handed a ready sandbox: %+v", st)
	}
}

// TestPoolBoundsSandboxesInUse: the pool hands out at most Max sandboxes at once, across shapes; a
// Get beyond that waits until one is destroyed, and gives up with ErrFull when its context ends.
func TestPoolBoundsSandboxesInUse(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 0, Max: 2})
	plain := poolSandbox()
	other := plain
	other.Args = append(slices.Clone(plain.Args), "another shape")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := p.Get(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Get(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	if sb, err := p.Get(short, plain); !errors.Is(err, ErrFull) || !errors.Is(err, context.DeadlineExceeded) {
		if sb != nil {
			p.Destroy(sb)
		}
		t.Fatalf("a third Get with a Max of 2 = %v; want ErrFull once its context ended", err)
	}
	got := make(chan error, 1)
	go func() {
		sb, err := p.Get(ctx, plain)
		if err == nil {
			p.Destroy(sb)
		}
		got <- err
	}()
	p.Destroy(first)
	if err := <-got; err != nil {
		t.Errorf("a Get waiting for a place after one was destroyed: %v", err)
	}
	p.Destroy(second)
	long := plain
	long.Lifetime = LongLived
	if _, err := p.Get(ctx, long); err == nil {
		t.Error("the pool handed out a long-lived sandbox")
	}
}

// memoryLimit reads the sandbox id's memory limit: memory.limit_in_bytes (v1) or memory.max (v2).
func memoryLimit(cg *Cgroups, id string) uint64 {
	if cg.V2() {
		return readUint(filepath.Join(cg.dir(id), "memory.max"))
	}
	return readUint(filepath.Join(cg.v1("memory", id), "memory.limit_in_bytes"))
}

// cpuShares reads the sandbox id's cpu.shares (v1) or cpu.weight (v2).
func cpuShares(cg *Cgroups, id string) uint64 {
	if cg.V2() {
		return readUint(filepath.Join(cg.dir(id), "cpu.weight"))
	}
	return readUint(filepath.Join(cg.v1("cpu", id), "cpu.shares"))
}

// sharesAs is what cpuShares reads for shares: shares on v1, their weight on v2.
func sharesAs(cg *Cgroups, shares uint64) uint64 {
	if cg.V2() {
		return cpuWeight(shares)
	}
	return shares
}

// TestAGetWaitingWhenThePoolClosesStartsCold: a run waiting for the pool's start when the pool
// closes (its kind reloaded) still gets a sandbox, started cold, and so does one that comes
// after; neither is told the pool is closed.
func TestAGetWaitingWhenThePoolClosesStartsCold(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	p := newTestPool(t, m, PoolOptions{Size: 1, Max: 2, Starts: 1})
	opts := poolSandbox()
	p.Warm(opts)
	waitFor(t, "the pool's first start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.order) > 0 && p.order[0].running > 0
	})
	type result struct {
		answer string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		_, answer, err := tryUse(p, opts)
		got <- result{answer, err}
	}()
	waitFor(t, "the run to wait for the start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.order[0].waiting > 0
	}, func() string { return fmt.Sprintf("%+v", shapeStats(p)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || r.answer != "fresh" {
		t.Errorf("the run waiting when the pool closed = %q, %v; want a fresh sandbox", r.answer, r.err)
	}
	if _, answer, err := tryUse(p, opts); err != nil || answer != "fresh" {
		t.Errorf("a run after the pool closed = %q, %v; want a fresh sandbox", answer, err)
	}
	if st := shapeStats(p); st.Cold != 2 || st.InUse != 0 || st.Ready != 0 {
		t.Errorf("stats %+v; want both runs cold, nothing in use or ready", st)
	}
}

// TestPoolLearnsThePaceOfCalls: calls one at a time but close together want more ready than
// run at once — as many as come while one sandbox starts, up to the starts the pool makes at
// once — and the want is forgotten once MaxIdle passes without it; calls far apart want no more
// than Size. (The pool's arithmetic, on a clock of the test's.)
func TestPoolLearnsThePaceOfCalls(t *testing.T) {
	p := &Pool{opts: PoolOptions{Size: 1, MaxIdle: time.Minute, Starts: 4}, places: NewPlaces(8)}
	paced := func(every time.Duration, n int) (*poolShape, time.Time) {
		sh := &poolShape{refill: 300 * time.Millisecond, warm: true}
		now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
		for range n {
			now = now.Add(every)
			sh.noteGet(now, p.opts.Starts)
			sh.inUse-- // each run ends before the next call
		}
		return sh, now
	}
	sh, now := paced(100*time.Millisecond, 100)
	// 10 calls a second for 10 s, a start taking 0.3 s: about 3 come while one starts.
	if got := p.targetLocked(sh, now); got != 3 {
		t.Errorf("calls 0.1 s apart for 10 s, starts of 0.3 s: a target of %d (rate %.1f/s); want 3", got, sh.rate)
	}
	if got := p.targetLocked(sh, now.Add(30*time.Second)); got != 3 {
		t.Errorf("30 s after the last such call: a target of %d; want 3 still (MaxIdle is a minute)", got)
	}
	if got := p.targetLocked(sh, now.Add(61*time.Second)); got != 1 {
		t.Errorf("past MaxIdle after the last call: a target of %d; want Size (1)", got)
	}
	sh, now = paced(500*time.Millisecond, 40)
	if got := p.targetLocked(sh, now); got != 1 {
		t.Errorf("calls 0.5 s apart: a target of %d (rate %.1f/s); want Size (1)", got, sh.rate)
	}
	sh, now = paced(10*time.Millisecond, 1000)
	if got := p.targetLocked(sh, now); got != 4 {
		t.Errorf("calls 10 ms apart: a target of %d (rate %.1f/s); want the starts the pool makes at once (4): more can't keep up either", got, sh.rate)
	}
}
