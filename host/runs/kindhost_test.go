package runs

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// TestANestedCallMustComeFromThePluginRunningItsParent: the Host of the
// plugin executing a run serves its nested calls, with the run's
// principal; the Host of another kind's plugin, which learned the run's
// id, is refused as for an unknown run, for tools and the model alike, and
// starts nothing; so is a run that ended, and no id at all.
func TestANestedCallMustComeFromThePluginRunningItsParent(t *testing.T) {
	d, _ := talkDispatcher(t)
	d.SetModel(echoModel{})
	parent, err := d.Start(Request{Tool: "hold", Principal: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Cancel()
	ctx := context.Background()
	own, other := d.ForKind("talk"), d.ForKind("python")

	res, err := own.CallTool(ctx, sdk.ToolCall{ParentRunID: parent.ID, Tool: "quick"})
	if err != nil || res.Error != nil || string(res.Result) != "1" {
		t.Fatalf("a call of the plugin running the parent: %+v %v", res, err)
	}
	if ans, err := own.AskModel(ctx, sdk.ModelRequest{ParentRunID: parent.ID, Prompt: "hi"}); err != nil || ans.Text != "hi" {
		t.Fatalf("a question of the plugin running the parent: %+v %v", ans, err)
	}

	ended, err := d.Start(Request{Tool: "quick", Principal: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ended.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	started := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.runs)
	}
	before := started()
	for _, tc := range []struct {
		name string
		host sdk.Host
		run  string
	}{
		{"another kind's plugin", other, parent.ID},
		{"a run that ended", own, ended.ID},
		{"no run", own, ""},
		{"an unknown run", own, "rnope"},
	} {
		res, err := tc.host.CallTool(ctx, sdk.ToolCall{ParentRunID: tc.run, Tool: "quick"})
		if err != nil || res.Error == nil || res.Error.Code != wire.CodeUnknownRun || !strings.Contains(res.Error.Message, "a call of quick must be made by a run that this plugin") {
			t.Errorf("%s: a call: %+v %v; want unknown_run", tc.name, res.Error, err)
		}
		_, err = tc.host.AskModel(ctx, sdk.ModelRequest{ParentRunID: tc.run, Prompt: "hi"})
		if errcode.Code(err) != wire.CodeUnknownRun || !strings.Contains(err.Error(), "a question for the model must be made by a run that this plugin") {
			t.Errorf("%s: a question: %v; want unknown_run", tc.name, err)
		}
	}
	if _, err := other.CallTool(ctx, sdk.ToolCall{ParentRunID: parent.ID, Tool: "quick"}); err != nil {
		t.Fatal(err)
	}
	if res, _ := other.CallTool(ctx, sdk.ToolCall{ParentRunID: parent.ID, Tool: "quick"}); !strings.Contains(res.Error.Message, "(the python kind)") {
		t.Errorf("the refusal does not name the plugin's kind: %s", res.Error.Message)
	}
	if n := started(); n != before {
		t.Errorf("%d runs were started by refused calls", n-before)
	}
}
