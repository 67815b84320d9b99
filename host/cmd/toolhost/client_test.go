package main

import (
	"testing"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/tools"
)

// TestParseArgsReadsTodaysSpecs: toolhost call reads a param's type from
// the spec the host serves, where an optional param's type also takes
// null: text stays text, other kinds are JSON, a json param takes plain
// text as a string.
func TestParseArgsReadsTodaysSpecs(t *testing.T) {
	tool := &tools.Tool{Tool: config.Tool{Name: "t", Description: "d", Effect: "read", Params: []config.Param{
		{Name: "req", Type: "text", Required: true},
		{Name: "opt", Type: "text"},
		{Name: "colour", Type: "text", Options: []string{"red"}},
		{Name: "n", Type: "integer"},
		{Name: "j", Type: "json"},
		{Name: "l", Type: "list", Items: "number"},
	}}, Kind: "echo"}
	got, err := parseArgs(tool.Spec(), []string{"req=42", "opt=true", "colour=red", "n=7", "j=plain words", "l=[1,2.5]"})
	if want := `{"colour":"red","j":"plain words","l":[1,2.5],"n":7,"opt":"true","req":"42"}`; err != nil || string(got) != want {
		t.Errorf("parseArgs = %s, %v; want %s", got, err, want)
	}
	if _, err := parseArgs(tool.Spec(), []string{"n=seven"}); err == nil || err.Error() != "n=seven: the value must be JSON (integer)" {
		t.Errorf("a bad integer: %v", err)
	}
}
