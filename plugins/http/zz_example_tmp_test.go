package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	hostconfig "github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
)

func TestTmpExample(t *testing.T) {
	data, _ := os.ReadFile("../../examples/tools/get_json.toml")
	tool, err := hostconfig.ParseTool("get_json.toml", data)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := json.Marshal(tool.Run)
	var ps []sdk.Param
	for _, p := range tool.Params {
		ps = append(ps, sdk.Param{Name: p.Name, Kind: p.Kind, Required: p.Required})
	}
	k := &kind{}
	out, err := k.Check(context.Background(), sdk.Tool{Name: tool.Name, Params: ps, Run: run})
	t.Logf("%s %v", out, err)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := compile(sdk.Tool{Params: ps, Run: run}, defaultConfig())
	req, err := p.request(context.Background(), args{"resource": json.RawMessage(`"todos"`), "id": json.RawMessage(`1`)})
	t.Logf("%v %v %v", req.URL, req.Header, err)
}
