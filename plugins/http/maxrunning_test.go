package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// waiting reads the kind's gauge of runs waiting for a place.
func waiting(t *testing.T, c *sdktest.Conn) float64 {
	t.Helper()
	ms, err := c.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == "http_runs_waiting" {
			return m.Value
		}
	}
	t.Fatalf("no http_runs_waiting metric in %+v", ms)
	return 0
}

// TestMaxRunningMakesRunsWait: [http] max_running bounds the requests going at once; a run past
// it waits for a place (its request is not sent), and one whose caller gives up while waiting
// ends as cancelled without sending anything.
func TestMaxRunningMakesRunsWait(t *testing.T) {
	var arrived atomic.Int32
	release := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		w.Write([]byte("ok"))
	}))
	defer s.Close()
	c := open(t, map[string]any{"max_running": 1})
	tool := sdktest.Tool(t, "slow", map[string]any{"type": "http", "url": s.URL + "/"})

	first := make(chan *sdktest.Run)
	go func() { first <- c.Invoke(context.Background(), tool, map[string]any{}) }()
	for arrived.Load() == 0 {
		waitABit()
	}
	second := make(chan *sdktest.Run)
	go func() { second <- c.Invoke(context.Background(), tool, map[string]any{}) }()
	for waiting(t, c) < 1 {
		waitABit()
	}
	// A third one gives up while it waits.
	ctx, cancel := context.WithCancel(context.Background())
	third := make(chan *sdktest.Run)
	go func() { third <- c.Invoke(ctx, tool, map[string]any{}) }()
	for waiting(t, c) < 2 {
		waitABit()
	}
	cancel()
	if r := <-third; r.Err == nil {
		t.Errorf("a run cancelled while it waited: %s", r.Result)
	} else if e := (*sdk.Error)(nil); !errors.Is(r.Err, context.Canceled) && (!errors.As(r.Err, &e) || e.Code != "cancelled") {
		t.Errorf("a run cancelled while it waited ended with %v", r.Err)
	}
	if n := arrived.Load(); n != 1 {
		t.Fatalf("%d requests went out with max_running = 1", n)
	}
	// The caller's cancel reaches the plugin a moment after the caller has its answer.
	for waiting(t, c) > 1 {
		waitABit()
	}
	close(release)
	for _, ch := range []chan *sdktest.Run{first, second} {
		if r := <-ch; r.Err != nil || !strings.Contains(string(r.Result), `"status":200`) {
			t.Errorf("a run: %s, %v", r.Result, r.Err)
		}
	}
	if n := arrived.Load(); n != 2 {
		t.Errorf("%d requests went out, want 2 (the cancelled run sends none)", n)
	}
	if w := waiting(t, c); w != 0 {
		t.Errorf("%v runs still waiting", w)
	}
}

// waitABit lets the runs move on before looking again.
func waitABit() { time.Sleep(5 * time.Millisecond) }
