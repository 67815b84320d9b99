// Package apitest serves the real API over httptest with an in-process
// kind, for the tests of the API and of its clients.
package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// Kind is an in-process kind (its type is "fake"): "lines" prints n lines
// of size bytes (to stderr too when stderr is set, with a progress event
// half way), waiting delay_ms before each; "block" waits to be cancelled;
// "fail" prints a line and fails.
type Kind struct {
	// Stamp starts a line with the time it was printed, in nanoseconds,
	// for latency.
	Stamp bool
	// Done prints "done\n" to stderr when "lines" has printed its lines.
	Done bool
}

// Invoke runs one of the kind's tools.
func (k Kind) Invoke(ctx context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	var a struct {
		N       int  `json:"n"`
		Size    int  `json:"size"`
		DelayMS int  `json:"delay_ms"`
		Stderr  bool `json:"stderr"`
	}
	_ = json.Unmarshal(inv.Args, &a)
	switch inv.Tool.Name {
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "fail":
		onEvent(sdk.Event{Stdout: []byte("trying\n")})
		return nil, &sdk.Error{Code: "no_luck", Message: "the thing could not be done"}
	}
	prefix := 10
	if k.Stamp {
		prefix = 40
	}
	pad := strings.Repeat("x", max(0, a.Size-prefix))
	for i := range a.N {
		if a.DelayMS > 0 {
			select {
			case <-time.After(time.Duration(a.DelayMS) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if k.Stamp {
			onEvent(sdk.Event{Stdout: fmt.Appendf(nil, "%d %d %s\n", time.Now().UnixNano(), i, pad)})
		} else {
			onEvent(sdk.Event{Stdout: fmt.Appendf(nil, "%d %s\n", i, pad)})
		}
		if a.Stderr {
			onEvent(sdk.Event{Stderr: fmt.Appendf(nil, "warning %d\n", i)})
		}
		if a.Stderr && i == a.N/2 {
			onEvent(sdk.Event{Progress: &sdk.Progress{Fraction: 0.5, Message: "half way"}})
		}
	}
	if k.Done {
		onEvent(sdk.Event{Stderr: []byte("done\n")})
	}
	return json.Marshal(map[string]int{"lines": a.N})
}

// Tools are the tools of Kind: lines, block and fail.
func Tools() []*tools.Tool {
	param := func(name, kind string) config.Param { return config.Param{Name: name, Type: kind} }
	run := json.RawMessage(`{"type":"fake"}`)
	return []*tools.Tool{
		{Tool: config.Tool{Name: "lines", Description: "Print lines.", Effect: "read",
			Params: []config.Param{param("n", "integer"), param("size", "integer"), param("delay_ms", "integer"), param("stderr", "bool")}},
			Kind: "fake", Run: run},
		{Tool: config.Tool{Name: "block", Description: "Wait to be cancelled.", Effect: "read"}, Kind: "fake", Run: run},
		{Tool: config.Tool{Name: "fail", Description: "Fail.", Effect: "read"}, Kind: "fake", Run: run},
	}
}

// Setup says what the host serves.
type Setup struct {
	// Kind runs the tools of kind "fake".
	Kind Kind
	// Tools go in the registry; nil means Tools().
	Tools []*tools.Tool
	// Spill is how many bytes of a run's log stay in memory before it
	// spills to a temporary directory; 0 means it never spills.
	Spill int
}

// Host is the API served over httptest.
type Host[H http.Handler] struct {
	Srv  *httptest.Server
	API  H
	Runs *runs.Dispatcher
}

// Start serves the handler that newAPI makes of the registry and the
// dispatcher (the real API: api.New) with small socket buffers, so that
// a client that does not read is felt by the host at once. The test's
// cleanup closes it and cancels its runs.
func Start[H http.Handler](t testing.TB, s Setup, newAPI func(*tools.Registry, *runs.Dispatcher) H) *Host[H] {
	t.Helper()
	if s.Tools == nil {
		s.Tools = Tools()
	}
	reg := tools.NewRegistry()
	reg.Replace(s.Tools)
	d := runs.NewDispatcher(reg, func(kind string) (runs.Invoker, bool) { return s.Kind, kind == "fake" }, nil, time.Hour)
	if s.Spill > 0 {
		sd, err := runs.OpenSpillDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		d.SpillTo(sd, s.Spill)
	}
	api := newAPI(reg, d)
	srv := httptest.NewUnstartedServer(api)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		d.CancelAll("the test is over")
		d.Close()
	})
	return &Host[H]{Srv: srv, API: api, Runs: d}
}

// smallBuffers makes the host's socket buffers small.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}
