package sandbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestPlacesBoundTakers: Take takes a free place; with none free it asks the reclaimers first
// (one that frees a place gives it to the taker), then waits for a Give or its context's end
// (ErrFull). A lowered Max stops nothing: new takers wait until fewer are in use.
func TestPlacesBoundTakers(t *testing.T) {
	p := NewPlaces(2)
	ctx := context.Background()
	for range 2 {
		if err := p.Take(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if p.TryTake("") || p.Free() != 0 || p.InUse() != 2 {
		t.Fatalf("with 2 of 2 taken: TryTake succeeded or Free %d, InUse %d", p.Free(), p.InUse())
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := p.Take(short, "")
	cancel()
	if !errors.Is(err, ErrFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Take with every place taken: %v; want ErrFull once its context ended", err)
	}

	// A reclaimer that has an idle sandbox frees its place for the taker; one with none is passed.
	idle := 1
	calls := 0
	remove := p.OnFull(func(context.Context) bool {
		calls++
		if idle == 0 {
			return false
		}
		idle--
		p.Give("")
		return true
	})
	p.OnFull(func(context.Context) bool { return false })
	if err := p.Take(ctx, ""); err != nil {
		t.Fatalf("Take with a reclaimer holding an idle sandbox: %v", err)
	}
	if calls != 1 || p.InUse() != 2 {
		t.Errorf("after a reclaim: %d calls, %d in use; want 1 and 2", calls, p.InUse())
	}
	remove()

	// A waiter gets the place a Give frees.
	got := make(chan error, 1)
	go func() { got <- p.Take(ctx, "") }()
	select {
	case err := <-got:
		t.Fatalf("Take returned %v with no place free", err)
	case <-time.After(50 * time.Millisecond):
	}
	p.Give("")
	if err := <-got; err != nil {
		t.Errorf("a waiting Take after a Give: %v", err)
	}

	// Lowered below what is in use: nothing more until enough are given back.
	p.SetMax(1)
	p.Give("")
	if p.TryTake("") {
		t.Error("TryTake succeeded with 1 in use of a Max lowered to 1")
	}
	p.Give("")
	if !p.TryTake("") {
		t.Error("TryTake failed with none in use of 1")
	}
	p.SetMax(3)
	if p.Free() != 2 || p.Max() != 3 {
		t.Errorf("after raising Max to 3 with 1 in use: Free %d, Max %d", p.Free(), p.Max())
	}
}

// TestPoolReadySandboxesUseOnlyFreePlaces: a pool on shared places keeps its ready sandboxes
// only in places nobody uses: when a sharer (a session manager) takes them, the ready ones are
// retired, so ready, handed-out and shared sandboxes together stay within Max; places given back
// are filled again.
func TestPoolReadySandboxesUseOnlyFreePlaces(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	places := NewPlaces(2)
	p := newTestPool(t, m, PoolOptions{Size: 2, Places: places, CheckEvery: 50 * time.Millisecond})
	p.Warm(poolSandbox())
	ready := func() int { return len(p.ReadyIDs()) }
	state := func() string { return fmt.Sprintf("%d ready, %d places in use", ready(), places.InUse()) }
	waitFor(t, "2 ready sandboxes", func() bool { return ready() == 2 }, state)
	if !places.TryTake("") {
		t.Fatal("no place free for a sharer")
	}
	waitFor(t, "1 ready sandbox with 1 of 2 places shared", func() bool { return ready() == 1 }, state)
	if !places.TryTake("") {
		t.Fatal("no place free for a second sharer")
	}
	waitFor(t, "no ready sandbox with both places shared", func() bool { return ready() == 0 }, state)
	places.Give("")
	places.Give("")
	waitFor(t, "2 ready sandboxes once the places were given back", func() bool { return ready() == 2 }, state)
}

// TestPlacesGoFirstToTheOwnerHoldingFewest: when places are scarce, a place given back goes to
// the waiting owner that holds the fewest, though another owner's Take waited longer; among
// owners holding as many, to the first that came. One caller with many sandboxes can't keep
// another's waiting behind all of its own.
func TestPlacesGoFirstToTheOwnerHoldingFewest(t *testing.T) {
	p := NewPlaces(3)
	ctx := context.Background()
	for _, owner := range []string{"greedy", "greedy", "other"} {
		if err := p.Take(ctx, owner); err != nil {
			t.Fatal(err)
		}
	}
	waiters := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.waiting)
	}
	got := make(chan string, 4)
	take := func(owner string) {
		n := waiters()
		go func() {
			if err := p.Take(ctx, owner); err != nil {
				t.Error(err)
			}
			got <- owner
		}()
		for waiters() == n {
			time.Sleep(time.Millisecond)
		}
	}
	// greedy (holding 2) asks first, twice; then quiet (holding 0), then other (holding 1).
	take("greedy")
	take("greedy")
	take("quiet")
	take("other")
	var order []string
	for _, giver := range []string{"greedy", "other", "greedy", "quiet"} {
		p.Give(giver)
		select {
		case o := <-got:
			order = append(order, o)
		case <-time.After(10 * time.Second):
			t.Fatalf("after Give(%s) nobody got the place: so far %v", giver, order)
		}
	}
	// Give(greedy): greedy 1, other 1, quiet 0 → quiet. Give(other): greedy 1, other 0,
	// quiet 1 → other. Give(greedy): greedy 0 → greedy, then greedy again.
	if want := "[quiet other greedy greedy]"; fmt.Sprint(order) != want {
		t.Errorf("places went to %v, want %s", order, want)
	}
	if p.InUse() != 3 || p.Held("greedy") != 2 || p.Held("quiet") != 0 || p.Held("other") != 1 {
		t.Errorf("in use %d; held greedy %d, quiet %d, other %d", p.InUse(), p.Held("greedy"), p.Held("quiet"), p.Held("other"))
	}
}

// TestTheLastPlaceIsKeptForAnotherOwner: an owner holding half the places or more doesn't take
// the last free one while another owner holds one; the other owner does, and alone the first
// owner takes it.
func TestTheLastPlaceIsKeptForAnotherOwner(t *testing.T) {
	p := NewPlaces(4)
	for _, owner := range []string{"a", "a", "b"} {
		if !p.TryTake(owner) {
			t.Fatalf("%s was refused a place with %d of 4 in use", owner, p.InUse())
		}
	}
	if p.TryTake("a") {
		t.Fatal("a, holding 2 of 4, took the last free place while b holds one")
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := p.Take(short, "a")
	cancel()
	if !errors.Is(err, ErrFull) {
		t.Fatalf("a's Take of the last free place: %v; want it to wait, and ErrFull at its context's end", err)
	}
	if !p.TryTake("b") {
		t.Fatal("b, holding 1 of 4, was refused the last free place")
	}
	p.Give("b")
	p.Give("b")
	if !p.TryTake("a") || p.Held("a") != 3 {
		t.Fatalf("alone, a was refused a free place (holds %d)", p.Held("a"))
	}
}
