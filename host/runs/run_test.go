package runs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func testRun(t *testing.T, dir *SpillDir, memory int) *Run {
	t.Helper()
	r := newRun("rtest", Request{Tool: "t", Principal: "p", Session: "s", IdempotencyKey: "k"}, spillConfig{dir: dir, memoryBytes: memory}, func(error) {})
	t.Cleanup(r.discard)
	return r
}

// testSpillDir is a spill folder under a new state folder.
func testSpillDir(t *testing.T) *SpillDir {
	t.Helper()
	sd, err := OpenSpillDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	return sd
}

// readAll reads a run from seq from to its end with Next, as a client
// would, and checks every seq comes exactly once in order.
func readAll(t *testing.T, r *Run, from uint64) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []Event
	for {
		evs, err := r.Next(ctx, from)
		if err != nil {
			t.Fatalf("Next(%d): %v", from, err)
		}
		if evs == nil {
			return out
		}
		for _, e := range evs {
			if e.Seq != from {
				t.Fatalf("got seq %d, want %d", e.Seq, from)
			}
			from++
			out = append(out, e)
		}
	}
}

func TestRunSpillsOldEventsToDiskAndReadsThemBackInOrder(t *testing.T) {
	sd := testSpillDir(t)
	dir := sd.Path()
	r := testRun(t, sd, 4<<10)
	line := strings.Repeat("x", 200) + "\n"
	for i := range 500 {
		r.append(Event{Type: "stdout", Data: fmt.Sprintf("%03d%s", i, line)})
	}
	r.append(Event{Type: "result", Result: []byte(`{"ok":true}`)})

	spilled, err := r.Spilled()
	if err != nil || spilled < 400 {
		t.Fatalf("spilled %d events (err %v); want most of 501 on disk", spilled, err)
	}
	r.mu.Lock()
	if r.memBytes > 4<<10 {
		t.Errorf("%d bytes kept in memory, over the 4 KiB budget", r.memBytes)
	}
	r.mu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "rtest.jsonl")); err != nil {
		t.Fatalf("no spill file: %v", err)
	}

	all := readAll(t, r, 0)
	if len(all) != 502 || all[0].Type != "started" || all[501].Type != "result" {
		t.Fatalf("read %d events back, want 502 from started to result", len(all))
	}
	for i := 1; i <= 500; i++ {
		if want := fmt.Sprintf("%03d", i-1); !strings.HasPrefix(all[i].Data, want) {
			t.Fatalf("event %d = %.10q, want it to start %q", i, all[i].Data, want)
		}
	}
	// From the middle of the file, and from memory.
	if tail := readAll(t, r, 250); len(tail) != 252 || tail[0].Seq != 250 {
		t.Fatalf("reading from seq 250 gave %d events", len(tail))
	}
	evs, err := r.Events(0)
	if err != nil || len(evs) != 502 {
		t.Fatalf("Events(0) = %d events, %v", len(evs), err)
	}
	out, _, err := r.Printed()
	if err != nil || strings.Count(out, "\n") != 500 || !strings.HasPrefix(out, "000") {
		t.Fatalf("Printed() gave %d lines, %v", strings.Count(out, "\n"), err)
	}
	last, err := r.Wait(context.Background())
	if err != nil || last.Type != "result" || last.Seq != 501 {
		t.Fatalf("Wait() = %+v, %v", last, err)
	}

	r.discard()
	if _, err := os.Stat(filepath.Join(dir, "rtest.jsonl")); !os.IsNotExist(err) {
		t.Fatalf("the spill file is still there after discard: %v", err)
	}
}

func TestRunWithoutSpillDirKeepsEverythingInMemory(t *testing.T) {
	r := testRun(t, nil, 100)
	for range 50 {
		r.append(Event{Type: "stdout", Data: "line\n"})
	}
	r.append(Event{Type: "result", Result: []byte("null")})
	if n, _ := r.Spilled(); n != 0 {
		t.Fatalf("spilled %d events with no folder to spill to", n)
	}
	if got := readAll(t, r, 0); len(got) != 52 {
		t.Fatalf("read %d events, want 52", len(got))
	}
}

// A reader following a run live, while it spills, gets every event once,
// in order, and sees nothing after the terminal event.
func TestLiveReadersGetEveryEventOnceWhileTheRunSpills(t *testing.T) {
	r := testRun(t, testSpillDir(t), 2<<10)
	const n = 3000
	var wg sync.WaitGroup
	results := make([][]Event, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = readAll(t, r, 0)
		}()
	}
	for i := range n {
		r.append(Event{Type: "stdout", Data: fmt.Sprintf("%d\n", i)})
	}
	r.append(Event{Type: "error", Error: &ErrorBody{Code: "cancelled", Message: "the run was cancelled"}})
	r.append(Event{Type: "stdout", Data: "after the end\n"})
	wg.Wait()
	for i, evs := range results {
		if len(evs) != n+2 || evs[len(evs)-1].Type != "error" {
			t.Errorf("reader %d got %d events, want %d ending with the error", i, len(evs), n+2)
		}
	}
}

func TestNextReturnsWhenTheContextEnds(t *testing.T) {
	r := testRun(t, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	evs, err := r.Next(ctx, 1)
	if evs != nil || err == nil {
		t.Fatalf("Next on a quiet run with a cancelled context = %v, %v", evs, err)
	}
}

func TestSweepForgetsEndedRunsAfterTheKeepTimeAndRemovesTheirFiles(t *testing.T) {
	sd, err := OpenSpillDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := sd.Path()
	d := NewDispatcher(nil, nil, nil, time.Minute)
	d.SpillTo(sd, 1<<10)
	ended := newRun("rended", Request{Tool: "t"}, d.spill, func(error) {})
	for range 100 {
		ended.append(Event{Type: "stdout", Data: strings.Repeat("y", 100)})
	}
	ended.append(Event{Type: "result", Result: []byte("1")})
	going := newRun("rgoing", Request{Tool: "t"}, d.spill, func(error) {})
	d.runs[ended.ID], d.runs[going.ID] = ended, going

	d.Sweep(time.Now())
	if _, ok := d.Get("rended"); !ok {
		t.Fatal("a run that just ended was forgotten at once")
	}
	d.Sweep(time.Now().Add(2 * time.Minute))
	if _, ok := d.Get("rended"); ok {
		t.Fatal("a run ended more than keep_minutes ago is still kept")
	}
	if _, ok := d.Get("rgoing"); !ok {
		t.Fatal("a run still going was forgotten")
	}
	if _, err := os.Stat(filepath.Join(dir, "rended.jsonl")); !os.IsNotExist(err) {
		t.Fatalf("the forgotten run's file is still there: %v", err)
	}
	d.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Close left the spill folder: %v", err)
	}
}
