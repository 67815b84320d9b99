package main

import (
	"context"
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
