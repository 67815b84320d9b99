package errcode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/toolhost/toolhost/client/wire"
)

// TestTheErrorIsTheProtocolsErrorObject: the one error type marshals to
// the wire's {"code","message"} byte for byte, and reads it back.
func TestTheErrorIsTheProtocolsErrorObject(t *testing.T) {
	b, err := json.Marshal(&Error{Code: BadArgs, Message: `parameter "id" is required`})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"code":"bad_args","message":"parameter \"id\" is required"}`; string(b) != want {
		t.Fatalf("got %s; want %s", b, want)
	}
	var e Error
	if err := json.Unmarshal([]byte(`{"code":"cancelled","message":"the run was cancelled"}`), &e); err != nil || e.Code != Cancelled {
		t.Fatalf("read back %+v, %v", e, err)
	}
	if e.Error() != "the run was cancelled" {
		t.Fatalf("Error() is %q; want the message alone (people read it)", e.Error())
	}
}

// TestErrorsMatchByCode: errors.Is and Has find an *Error of a code
// through wrapping, whatever its message; Code gives "" when none.
func TestErrorsMatchByCode(t *testing.T) {
	err := fmt.Errorf("checking get_json: %w", New(PluginUnavailable, "the http plugin is not running"))
	if !errors.Is(err, &Error{Code: PluginUnavailable}) || !Has(err, PluginUnavailable) || Code(err) != PluginUnavailable {
		t.Fatalf("a wrapped plugin_unavailable is not found")
	}
	if errors.Is(err, &Error{Code: wire.CodePluginCrashed}) || Has(err, "") || Has(errors.New("plugin_unavailable"), PluginUnavailable) {
		t.Fatalf("a code matched what it is not")
	}
	if Code(errors.New("x")) != "" || Code(nil) != "" {
		t.Fatalf("Code of an error without one is not empty")
	}
}

// TestFromRunDecidesCancellation: the one rule for how a run ends.
func TestFromRunDecidesCancellation(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want *Error
	}{
		{"no error", done, nil, nil},
		{"plain", live, errors.New("boom"), &Error{Code: Failed, Message: "boom"}},
		{"coded", live, fmt.Errorf("x: %w", New("http_status", "404")), &Error{Code: "http_status", Message: "404"}},
		{"ctx error", live, fmt.Errorf("x: %w", context.Canceled), &Error{Code: Cancelled, Message: "the run was cancelled"}},
		{"cancelled, plain", done, errors.New("connection reset"), &Error{Code: Cancelled, Message: "the run was cancelled"}},
		{"cancelled, failed", done, New(Failed, "it failed"), &Error{Code: Cancelled, Message: "the run was cancelled"}},
		{"cancelled, timeout kept", done, New(Timeout, "too long"), &Error{Code: Timeout, Message: "too long"}},
		{"nil ctx", nil, errors.New("boom"), &Error{Code: Failed, Message: "boom"}},
	}
	for _, c := range cases {
		got := FromRun(c.ctx, c.err)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: got %+v; want %+v", c.name, got, c.want)
		}
	}
}
