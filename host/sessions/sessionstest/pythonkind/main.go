// Command pythonkind is a stand-in for the python kind's plugin in tests of
// the host's sessions: a real plugin process over the real protocol that
// says it is the "python" kind, keeps conversation sandboxes and declares
// their tools (Tools: run_python, run_bash, sandbox_files, sandbox_file),
// but runs nothing. A session tool's run answers as the python kind does
// ({"exit_code","stdout","stderr","stopped","message"}) and adds what the
// call carried ("session", "network", "proxy"), so a test sees what reached
// the plugin; run_python's code "exit N" exits N, "sleep" waits to be
// cancelled. Its sessions' files are kept in memory.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/toolhost/toolhost/client/wire"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/host/sessions/sessionstest"
	"github.com/toolhost/toolhost/sdk"
)

type kind struct {
	*sessionstest.Backend
}

func (kind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "python", Version: "test", RunSchema: json.RawMessage(`{"type":"object"}`),
		SessionTools: sessionstest.Tools()}, nil
}

func (kind) Configure(context.Context, json.RawMessage) error { return nil }

func (kind) Check(_ context.Context, t sdk.Tool) (json.RawMessage, error) {
	var run map[string]any
	if err := json.Unmarshal(t.Run, &run); err != nil {
		return nil, err
	}
	if run["session"] == nil && run["code"] == nil {
		return nil, sdk.FieldErrors{{Path: "run.code", Message: "is required"}}
	}
	return t.Run, nil
}

func (k kind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	var run struct{ Session string }
	_ = json.Unmarshal(call.Tool.Run, &run)
	if run.Session == "" {
		return json.RawMessage(`"not a session tool"`), nil
	}
	if call.Session == "" {
		return nil, &sdk.Error{Code: wire.CodeBadArgs, Message: call.Tool.Name + " needs a session"}
	}
	var args struct{ Code, Command string }
	_ = json.Unmarshal(call.Args, &args)
	k.Put(call.Session, ".ran", "") // the workspace is made at the first run
	exit := 0
	switch {
	case args.Code == "sleep":
		<-ctx.Done()
		return nil, ctx.Err()
	case strings.HasPrefix(args.Code, "exit "):
		exit, _ = strconv.Atoi(strings.TrimPrefix(args.Code, "exit "))
	}
	out := fmt.Sprintf("ran in %s\n", call.Session)
	emit.Stdout([]byte(out))
	return json.Marshal(map[string]any{"exit_code": exit, "stdout": out, "stderr": "", "stopped": "", "message": "",
		"session": call.Session, "network": call.SessionNetwork, "proxy": call.SessionProxy})
}

func main() {
	sdk.Serve(kind{sessionstest.New()})
}

var _ sdk.SessionKeeper = kind{}
