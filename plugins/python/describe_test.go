package main

import (
	"context"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/sdk"
)

// TestAPythonToolWithNetworkBringsOutsideText: the kind tells the host that
// a tool's runs bring outside text when its run table says network = true
// (it reads the web), and not otherwise: the host taints by this word.
func TestAPythonToolWithNetworkBringsOutsideText(t *testing.T) {
	info, err := newKind(kindOptions{Logger: hclog.NewNullLogger()}).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.OutsideText != sdk.OutsideTextNone || info.OutsideTextWhen != "network" {
		t.Errorf("Describe says OutsideText %v, OutsideTextWhen %q; want none, unless the run table's network is true", info.OutsideText, info.OutsideTextWhen)
	}
}

// TestDescribeDeclaresTheSessionTools: the kind declares the tools of conversation sandboxes the
// host serves, one for each value of run.session, each with the one argument that value reads.
func TestDescribeDeclaresTheSessionTools(t *testing.T) {
	info, err := newKind(kindOptions{Logger: hclog.NewNullLogger()}).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, st := range info.SessionTools {
		arg, ok := sessionTools[st.Session]
		if !ok || seen[st.Session] {
			t.Errorf("%s runs session %q, which is not a value of run.session or is another tool's", st.Name, st.Session)
			continue
		}
		seen[st.Session] = true
		var params []string
		for _, p := range st.Params {
			params = append(params, p.Name)
		}
		var want []string
		if arg != "" {
			want = append(want, arg)
		}
		if st.Session == "python" {
			want = append(want, "reset") // starts the interpreter afresh
		}
		if !slices.Equal(params, want) {
			t.Errorf("%s takes %v; its session %q reads %v", st.Name, params, st.Session, want)
		}
		if st.Description == "" || (st.Effect != "read" && st.Effect != "change") {
			t.Errorf("%s: description %q, effect %q", st.Name, st.Description, st.Effect)
		}
	}
	if len(seen) != len(sessionTools) {
		t.Errorf("the kind declares session tools for %v; want one for each of %v", seen, sessionTools)
	}
}
