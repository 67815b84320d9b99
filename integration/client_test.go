package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client"
)

// The Go client package against the real host and the real echo plugin:
// list, call with streaming, cancel, read the run back, and pick a run up
// after every connection it rides on is cut.
func TestGoClientCallsCancelsAndReattachesThroughTheHost(t *testing.T) {
	const n = 8
	h := startHost(t, hostSpec{Tools: map[string]string{
		"say.toml":  echoTool("say", 2, 0),
		"slow.toml": echoTool("slow_say", 3, 10000),
		"tick.toml": echoTool("tick", n, 200),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := newProxy(t, h.Addr)
	conn, err := client.Dial(ctx, p.ln.Addr().String(), client.Options{Client: "integration"})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	list, err := conn.ListTools(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("ListTools = %+v, %v", list, err)
	}

	var out strings.Builder
	res, err := conn.Call(ctx, "say", map[string]any{"p00": "a", "p01": "b"}, func(e client.Event) {
		if e.Type == client.TypeStdout {
			out.WriteString(e.Data)
		}
	})
	if err != nil || !strings.Contains(string(res), `"echoed"`) || out.String() != "p00=a\np01=b\n" {
		t.Fatalf("Call = %s, %v; printed %q", res, err, out.String())
	}

	// Cancel a run from another goroutine; its call ends cancelled.
	started := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Call(ctx, "slow_say", map[string]any{"p00": "x"}, func(e client.Event) {
			if e.Type == client.TypeStarted {
				started <- e.Run
			}
		})
		errc <- err
	}()
	run := <-started
	if err := conn.Cancel(ctx, run); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	var ce *client.Error
	if err := <-errc; !errors.As(err, &ce) || ce.Code != "cancelled" {
		t.Fatalf("the cancelled call returned %v", err)
	}
	rec, err := conn.HTTP().Run(ctx, run, false)
	if err != nil || !rec.Done || rec.Error == nil || rec.Error.Code != "cancelled" || rec.Tool != "slow_say" {
		t.Fatalf("the cancelled run's record = %+v, %v", rec, err)
	}

	// Cut every connection twice during a run: the call comes back and
	// gets every line once.
	args := map[string]any{}
	for i := range n {
		args[fmt.Sprintf("p%02d", i)] = fmt.Sprint(i)
	}
	out.Reset()
	var seqs []uint64
	res, err = conn.Call(ctx, "tick", args, func(e client.Event) {
		seqs = append(seqs, e.Seq)
		if e.Type == client.TypeStdout {
			out.WriteString(e.Data)
		}
		if e.Seq == 2 || e.Seq == 5 {
			p.cut()
		}
	})
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "p%02d=%d\n", i, i)
	}
	if err != nil || out.String() != want.String() {
		t.Fatalf("Call through cut connections = %s, %v; printed %q, want %q", res, err, out.String(), want.String())
	}
	for i, s := range seqs {
		if s != uint64(i) {
			t.Fatalf("seqs %v: want each once, in order", seqs)
		}
	}
	p.mu.Lock()
	accepted := p.accepted
	p.mu.Unlock()
	if accepted < 3 {
		t.Fatalf("the proxy took %d connections; want the client back after each of 2 cuts", accepted)
	}
}
