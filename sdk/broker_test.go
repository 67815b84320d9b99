package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// brokerForgets is longer than go-plugin's broker keeps an announcement
// that nobody dialled (5 s, grpc_broker.go timeoutWait): after it, a dial
// of the HostService id the host announced at start finds nothing.
const brokerForgets = 6 * time.Second

// countingHost answers nested calls and counts them.
type countingHost struct {
	mu    sync.Mutex
	calls []string
}

func (h *countingHost) CallTool(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, req.ParentRunID+">"+req.Tool+string(req.Args))
	return sdk.ToolResult{Result: json.RawMessage(`{"inner":true}`), Printed: "hi"}, nil
}

func (h *countingHost) AskModel(context.Context, sdk.ModelRequest) (sdk.ModelAnswer, error) {
	return sdk.ModelAnswer{}, errors.New("no model")
}

func (h *countingHost) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// TestHostAnswersAfterTheHostSatIdle is the host that has been up for a
// while: configured, idle past the broker's memory, then a call that calls
// another tool. The nested call must reach the host.
func TestHostAnswersAfterTheHostSatIdle(t *testing.T) {
	t.Parallel()
	h := &countingHost{}
	c := sdktest.Start(t, &echoKind{}, h)
	if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(brokerForgets)
	for i := range 3 {
		start := time.Now()
		run := c.Invoke(context.Background(), sdktest.Tool(t, "e", nil), map[string]string{"do": "call"})
		t.Logf("nested call %d after %s idle took %s", i, brokerForgets, time.Since(start))
		if run.Err != nil || string(run.Result) != `{"inner":true}` {
			t.Fatalf("nested call %d after the host sat idle = %s, %v", i, run.Result, run.Err)
		}
	}
	if got := h.seen(); len(got) != 3 || got[0] != `rtest>inner{"x":1}` {
		t.Fatalf("the host saw %v", got)
	}
	// A reload configures the plugin again with the same id: the
	// connection it holds goes on serving.
	if err := c.Configure(context.Background(), json.RawMessage(`{"mode":"loud"}`)); err != nil {
		t.Fatal(err)
	}
	run := c.Invoke(context.Background(), sdktest.Tool(t, "e", nil), map[string]string{"do": "call"})
	if run.Err != nil || string(run.Result) != `{"inner":true}` {
		t.Fatalf("nested call after a reload = %s, %v", run.Result, run.Err)
	}
}

// TestACallThatDoesNotUseTheHostNeverWaitsForIt: a kind that never calls
// back into the host is not held up by the broker, however long the host
// sat idle, configured or not.
func TestACallThatDoesNotUseTheHostNeverWaitsForIt(t *testing.T) {
	t.Parallel()
	for _, configure := range []bool{true, false} {
		t.Run(map[bool]string{true: "configured", false: "never configured"}[configure], func(t *testing.T) {
			t.Parallel()
			c := sdktest.Start(t, &echoKind{}, &countingHost{})
			if configure {
				if err := c.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(brokerForgets)
			start := time.Now()
			run := c.Invoke(context.Background(), sdktest.Tool(t, "e", nil), map[string]string{"a": "b"})
			took := time.Since(start)
			t.Logf("a call without the host after %s idle took %s", brokerForgets, took)
			if run.Err != nil || run.Stdout() != "one\nthree\n" {
				t.Fatalf("call = %q, %v", run.Stdout(), run.Err)
			}
			// The failure this guards against is exactly the broker's 5 s
			// dial timeout on every call; 4 s is a coarse bound far above
			// a sub-millisecond in-process call on any machine.
			if took > 4*time.Second {
				t.Fatalf("a call that never uses the host took %s: it waited for the broker", took)
			}
		})
	}
}
