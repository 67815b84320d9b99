package sdk_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// doctorKind checks one thing: that its table names a mode.
type doctorKind struct{ *echoKind }

func (doctorKind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "echo", Version: "0.1.0", RunSchema: json.RawMessage(`{"type":"object"}`),
		ConfigSchema: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string","format":"path"}}}`)}, nil
}

func (doctorKind) Doctor(_ context.Context, cfg json.RawMessage) (sdk.DoctorReport, error) {
	var c struct{ Mode string }
	_ = json.Unmarshal(cfg, &c)
	if c.Mode == "" {
		return sdk.DoctorReport{Checks: []sdk.DoctorCheck{{Name: "mode", Detail: "no mode set", Fix: "set mode"}}}, nil
	}
	return sdk.DoctorReport{Checks: []sdk.DoctorCheck{{Name: "mode", OK: true, Detail: c.Mode}}, Summary: "echo can echo"}, nil
}

func TestDoctorChecksCrossTheProtocol(t *testing.T) {
	c := sdktest.Start(t, doctorKind{&echoKind{}}, nil)
	rep, err := c.Doctor(context.Background(), json.RawMessage(`{}`))
	if err != nil || len(rep.Checks) != 1 || rep.Checks[0].OK || rep.Checks[0].Fix != "set mode" || rep.Checks[0].Detail != "no mode set" {
		t.Fatalf("doctor = %+v, %v", rep, err)
	}
	rep, err = c.Doctor(context.Background(), json.RawMessage(`{"mode":"loud"}`))
	if err != nil || len(rep.Checks) != 1 || !rep.Checks[0].OK || rep.Checks[0].Detail != "loud" || rep.Summary != "echo can echo" {
		t.Fatalf("doctor = %+v, %v", rep, err)
	}
	rep, err = sdktest.Start(t, &echoKind{}, nil).Doctor(context.Background(), nil)
	if err != nil || len(rep.Checks) != 0 {
		t.Fatalf("a kind without checks reported %+v, %v", rep, err)
	}
}

func TestDescribeCarriesTheConfigSchema(t *testing.T) {
	info, _, err := sdktest.Start(t, doctorKind{&echoKind{}}, nil).Describe(context.Background())
	if err != nil || string(info.ConfigSchema) != `{"type":"object","properties":{"dir":{"type":"string","format":"path"}}}` {
		t.Fatalf("describe = %+v, %v", info, err)
	}
	info, _, err = sdktest.Start(t, &echoKind{}, nil).Describe(context.Background())
	if err != nil || info.ConfigSchema != nil {
		t.Fatalf("a kind without settings described %q, %v", info.ConfigSchema, err)
	}
}
