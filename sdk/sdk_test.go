package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// echoKind prints its args line by line, then returns them; "fail" makes it
// fail, "wait" blocks until cancelled, "call" calls another tool.
type echoKind struct{ configured json.RawMessage }

func (k *echoKind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "echo", Version: "0.1.0", RunSchema: json.RawMessage(`{"type":"object"}`)}, nil
}

func (k *echoKind) Configure(_ context.Context, cfg json.RawMessage) error {
	if strings.Contains(string(cfg), "bad") {
		return sdk.FieldErrors{{Path: "echo.mode", Message: "must be loud or quiet"}}
	}
	k.configured = cfg
	return nil
}

func (k *echoKind) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	var run map[string]any
	if err := json.Unmarshal(tool.Run, &run); err != nil {
		return nil, err
	}
	if run["mode"] == "busy" {
		return nil, errors.New("no sandbox could be started")
	}
	if _, ok := run["mode"]; !ok {
		return nil, sdk.FieldErrors{{Path: "run.mode", Message: "is required"}}
	}
	run["checked"] = true
	return json.Marshal(run)
}

func (k *echoKind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	var args map[string]string
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return nil, err
	}
	switch args["do"] {
	case "fail":
		emit.Stderr([]byte("about to fail\n"))
		return nil, sdk.Errorf("echo_failed", "echo failed because %s", args["why"])
	case "plain":
		return nil, errors.New("a plain error")
	case "wait":
		emit.Stdout([]byte("waiting\n"))
		<-ctx.Done()
		return nil, ctx.Err()
	case "call":
		res, err := call.Host.CallTool(ctx, sdk.ToolCall{ParentRunID: call.RunID, Tool: "inner", Args: json.RawMessage(`{"x":1}`)})
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, res.Error
		}
		return res.Result, nil
	}
	emit.Stdout([]byte("one\n"))
	emit.Progress(0.5, "half")
	emit.Stderr([]byte("two\n"))
	emit.Log("info", "logged")
	fmt := sdk.Emit(emit).StdoutWriter()
	_, _ = fmt.Write([]byte("three\n"))
	return json.Marshal(map[string]any{"args": args, "run": call.RunID})
}

func TestInvokeStreamsEventsInOrderThenResult(t *testing.T) {
	c := sdktest.Start(t, &echoKind{}, nil)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "e", map[string]any{"type": "echo"}), map[string]string{"a": "b"})
	if run.Err != nil {
		t.Fatalf("unexpected error: %v", run.Err)
	}
	if got := run.Stdout(); got != "one\nthree\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := run.Stderr(); got != "two\n" {
		t.Errorf("stderr = %q", got)
	}
	if len(run.Events) != 5 || run.Events[1].Progress == nil || run.Events[1].Progress.Message != "half" || run.Events[3].Log == nil {
		t.Errorf("events out of order: %+v", run.Events)
	}
	if string(run.Result) != `{"args":{"a":"b"},"run":"rtest"}` {
		t.Errorf("result = %s", run.Result)
	}
}

func TestInvokeErrorKeepsCodeAndMessage(t *testing.T) {
	c := sdktest.Start(t, &echoKind{}, nil)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "e", nil), map[string]string{"do": "fail", "why": "asked to"})
	if run.ErrorCode() != "echo_failed" || run.Err.Error() != "echo failed because asked to" {
		t.Fatalf("err = %#v", run.Err)
	}
	if run.Stderr() != "about to fail\n" {
		t.Errorf("stderr before the error was lost: %q", run.Stderr())
	}
	run = c.Invoke(context.Background(), sdktest.Tool(t, "e", nil), map[string]string{"do": "plain"})
	if run.ErrorCode() != "failed" || run.Err.Error() != "a plain error" {
		t.Fatalf("plain error = %#v", run.Err)
	}
}

func TestCancelStopsTheRun(t *testing.T) {
	c := sdktest.Start(t, &echoKind{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *sdktest.Run)
	go func() {
		done <- c.Invoke(ctx, sdktest.Tool(t, "e", nil), map[string]string{"do": "wait"})
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case run := <-done:
		if !errors.Is(run.Err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", run.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run went on after its context was cancelled")
	}
}

func TestCheckAndConfigureReturnFieldErrors(t *testing.T) {
	c := sdktest.Start(t, &echoKind{}, nil)
	_, err := c.Check(context.Background(), sdktest.Tool(t, "e", map[string]any{"type": "echo"}))
	var fe sdk.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Path != "run.mode" || fe[0].Message != "is required" {
		t.Fatalf("check err = %#v", err)
	}
	run, err := c.Check(context.Background(), sdktest.Tool(t, "e", map[string]any{"type": "echo", "mode": "x"}))
	if err != nil || string(run) != `{"checked":true,"mode":"x","type":"echo"}` {
		t.Fatalf("normalised = %s, %v", run, err)
	}
	err = c.Configure(context.Background(), json.RawMessage(`{"mode":"bad"}`))
	if !errors.As(err, &fe) || fe.Error() != "echo.mode: must be loud or quiet" {
		t.Fatalf("configure err = %#v", err)
	}
}

func TestDescribeNamesKindAndProtocol(t *testing.T) {
	c := sdktest.Start(t, &echoKind{}, nil)
	info, versions, err := c.Describe(context.Background())
	if err != nil || info.Kind != "echo" || info.Version != "0.1.0" || string(info.RunSchema) != `{"type":"object"}` {
		t.Fatalf("describe = %+v, %v", info, err)
	}
	// Every version the SDK knows, from 1 up: the host picks among them.
	if fmt.Sprint(versions) != "[1 2 3]" || int(versions[len(versions)-1]) != sdk.ProtocolVersion {
		t.Fatalf("versions = %v, want [1 2 3]", versions)
	}
}

type innerHost struct{ calls []string }

func (h *innerHost) CallTool(_ context.Context, req sdk.ToolCall) (sdk.ToolResult, error) {
	h.calls = append(h.calls, req.ParentRunID+">"+req.Tool+string(req.Args))
	return sdk.ToolResult{Result: json.RawMessage(`{"inner":true}`), Printed: "hi"}, nil
}

func (h *innerHost) AskModel(context.Context, sdk.ModelRequest) (sdk.ModelAnswer, error) {
	return sdk.ModelAnswer{}, errors.New("no model")
}

func TestHostServiceOverBroker(t *testing.T) {
	h := &innerHost{}
	c := sdktest.Start(t, &echoKind{}, h)
	run := c.Invoke(context.Background(), sdktest.Tool(t, "e", nil), map[string]string{"do": "call"})
	if run.Err != nil || string(run.Result) != `{"inner":true}` {
		t.Fatalf("nested call = %s, %v", run.Result, run.Err)
	}
	if len(h.calls) != 1 || h.calls[0] != `rtest>inner{"x":1}` {
		t.Fatalf("host saw %v", h.calls)
	}
}

type meteredKind struct{ *echoKind }

func (meteredKind) Metrics(context.Context) []sdk.Metric {
	return []sdk.Metric{{Name: "pool_ready", Help: "ready sandboxes", Type: "gauge", Value: 3, Labels: map[string]string{"shape": "net"}}}
}

func TestMetricsAreReportedWhenTheKindHasThem(t *testing.T) {
	got, err := sdktest.Start(t, meteredKind{&echoKind{}}, nil).Metrics(context.Background())
	if err != nil || len(got) != 1 || got[0].Name != "pool_ready" || got[0].Value != 3 || got[0].Labels["shape"] != "net" {
		t.Fatalf("metrics = %+v, %v", got, err)
	}
	got, err = sdktest.Start(t, &echoKind{}, nil).Metrics(context.Background())
	if err != nil || len(got) != 0 {
		t.Fatalf("a kind without metrics reported %+v, %v", got, err)
	}
}

func TestACheckTheKindCouldNotMakeIsNotAFieldError(t *testing.T) {
	c := sdktest.Start(t, &echoKind{}, nil)
	_, err := c.Check(context.Background(), sdktest.Tool(t, "e", map[string]any{"type": "echo", "mode": "busy"}))
	var cu *hostside.CheckUnavailableError
	var fe sdk.FieldErrors
	if !errors.As(err, &cu) || errors.As(err, &fe) || err.Error() != "the tool could not be checked just now: no sandbox could be started" {
		t.Fatalf("err = %#v", err)
	}
}
