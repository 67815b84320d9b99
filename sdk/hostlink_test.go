package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// callingKind calls the tool "inner" through the host on every run.
type callingKind struct{}

func (callingKind) Describe(context.Context) (sdk.Info, error)       { return sdk.Info{Kind: "calling"}, nil }
func (callingKind) Configure(context.Context, json.RawMessage) error { return nil }
func (callingKind) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	return tool.Run, nil
}
func (callingKind) Invoke(ctx context.Context, call sdk.Call, _ sdk.Emit) (json.RawMessage, error) {
	res, err := call.Host.CallTool(ctx, sdk.ToolCall{ParentRunID: call.RunID, Tool: "inner", Args: json.RawMessage(`{}`)})
	if err != nil {
		return nil, err
	}
	return res.Result, nil
}

type answeringHost struct{}

func (answeringHost) CallTool(context.Context, sdk.ToolCall) (sdk.ToolResult, error) {
	return sdk.ToolResult{Result: json.RawMessage(`"inner answered"`)}, nil
}
func (answeringHost) AskModel(context.Context, sdk.ModelRequest) (sdk.ModelAnswer, error) {
	return sdk.ModelAnswer{}, errors.New("no model")
}

// start serves p in-process over go-plugin's test connection (real unix
// sockets, the real broker), with or without broker multiplexing, and
// returns the host's client.
func start(t *testing.T, multiplex bool, p *sdk.KindPlugin, host sdk.Host) *sdktest.Conn {
	t.Helper()
	return sdktest.StartPlugin(t, p, host, multiplex)
}

// connCounter counts the connections the plugin opens to the host.
type connCounter struct{ begins, ends atomic.Int32 }

func (c *connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c *connCounter) HandleRPC(context.Context, stats.RPCStats)                         {}
func (c *connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *connCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	switch s.(type) {
	case *stats.ConnBegin:
		c.begins.Add(1)
	case *stats.ConnEnd:
		c.ends.Add(1)
	}
}

func invokeCalling(t *testing.T, kc *sdktest.Conn, what string) {
	t.Helper()
	res, err := kc.KindClient.Invoke(context.Background(), hostside.Invocation{Tool: sdk.Tool{Name: "c"}, RunID: "r1"}, nil)
	if err != nil || string(res) != `"inner answered"` {
		t.Errorf("%s: nested call = %s, %v", what, res, err)
	}
}

var modes = map[string]bool{"one listener per id": false, "multiplexed broker": true}

// TestTheHostIsDialledOnceAtConfigure: one connection for the life of the
// plugin, made when it is configured; calls after the broker forgot the
// announcement, and a reload, use it.
func TestTheHostIsDialledOnceAtConfigure(t *testing.T) {
	t.Parallel()
	for name, multiplex := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conns := &connCounter{}
			kc := start(t, multiplex, sdk.WithHostDialOpts(&sdk.KindPlugin{Impl: callingKind{}}, grpc.WithStatsHandler(conns)), answeringHost{})
			if err := kc.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(6 * time.Second) // longer than the broker remembers an announcement
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					invokeCalling(t, kc, fmt.Sprintf("call %d", i))
				}()
			}
			wg.Wait()
			if err := kc.Configure(context.Background(), json.RawMessage(`{"again":true}`)); err != nil {
				t.Fatal(err)
			}
			invokeCalling(t, kc, "after a reload")
			if b, e := conns.begins.Load(), conns.ends.Load(); b != 1 || e != 0 {
				t.Fatalf("the plugin opened %d connections to the host and lost %d; want one, kept", b, e)
			}
		})
	}
}

// TestTheHostConnectionComesBackAfterGoingIdle checks what the production
// dial avoids with WithIdleTimeout(0): had gRPC let the connection go idle,
// the next call would reconnect, because the host's listener outlives the
// broker's announcement. Here the idle timeout is short to see it happen.
func TestTheHostConnectionComesBackAfterGoingIdle(t *testing.T) {
	t.Parallel()
	for name, multiplex := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conns := &connCounter{}
			kc := start(t, multiplex, sdk.WithHostDialOpts(&sdk.KindPlugin{Impl: callingKind{}}, grpc.WithStatsHandler(conns), grpc.WithIdleTimeout(200*time.Millisecond)), answeringHost{})
			if err := kc.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			invokeCalling(t, kc, "at once")
			time.Sleep(6 * time.Second)
			if e := conns.ends.Load(); e == 0 {
				t.Fatal("the connection did not go idle: the test proves nothing")
			}
			invokeCalling(t, kc, "after the connection went idle")
			if b := conns.begins.Load(); b < 2 {
				t.Fatalf("the plugin opened %d connections; want a reconnect", b)
			}
		})
	}
}

func TestNoHostSaysWhatIsWrong(t *testing.T) {
	kc := start(t, false, &sdk.KindPlugin{Impl: callingKind{}}, nil)
	if err := kc.Configure(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	_, err := kc.KindClient.Invoke(context.Background(), hostside.Invocation{Tool: sdk.Tool{Name: "c"}, RunID: "r1"}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "this plugin was started without a connection to the host") {
		t.Fatalf("err = %v", err)
	}
}

// TestAHostThatNamesItOnlyPerCall: a host older than ConfigureRequest's
// host_service_id sends it only with each call. A run that uses Host then
// dials on first use: that works in the plugin's first seconds; later it
// fails with a sentence saying why, and does not wait for the broker again.
func TestAHostThatNamesItOnlyPerCall(t *testing.T) {
	t.Parallel()
	oldConfigure := func(t *testing.T, kc *sdktest.Conn) {
		t.Helper()
		if _, err := pluginv1.NewKindClient(kc.ClientConn()).Configure(context.Background(), &pluginv1.ConfigureRequest{ConfigJson: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("at once", func(t *testing.T) {
		t.Parallel()
		kc := start(t, false, &sdk.KindPlugin{Impl: callingKind{}}, answeringHost{})
		oldConfigure(t, kc)
		invokeCalling(t, kc, "first call")
		time.Sleep(6 * time.Second)
		invokeCalling(t, kc, "after the host sat idle")
	})
	t.Run("first used after the broker forgot", func(t *testing.T) {
		t.Parallel()
		kc := start(t, false, &sdk.KindPlugin{Impl: callingKind{}}, answeringHost{})
		oldConfigure(t, kc)
		time.Sleep(6 * time.Second)
		for i := range 2 {
			began := time.Now()
			_, err := kc.KindClient.Invoke(context.Background(), hostside.Invocation{Tool: sdk.Tool{Name: "c"}, RunID: "r1"}, nil)
			t.Logf("call %d took %s: %v", i, time.Since(began), err)
			if err == nil || !strings.HasPrefix(err.Error(), "this plugin could not connect back to the host") {
				t.Fatalf("call %d: err = %v", i, err)
			}
		}
	})
}
