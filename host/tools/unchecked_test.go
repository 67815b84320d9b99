package tools

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// TestUncheckedIsByTypeAndCodeNotByText: a tool is checked again later when
// its plugin could not check it (unavailable, or said so), found by type
// and code through any wrapping; an error that merely says the words is
// the tool's own fault.
func TestUncheckedIsByTypeAndCodeNotByText(t *testing.T) {
	for _, err := range []error{
		&hostside.CheckUnavailableError{Reason: "the sandbox did not start"},
		fmt.Errorf("checking t: %w", &sdk.Error{Code: wire.CodePluginUnavailable, Message: "the python plugin is not running"}),
	} {
		if !Unchecked(err) {
			t.Errorf("%v: not taken as unchecked", err)
		}
	}
	for _, err := range []error{
		errors.New("plugin_unavailable"),
		&sdk.Error{Code: wire.CodePluginCrashed, Message: "plugin_unavailable"},
		sdk.FieldErrors{{Path: "run.url", Message: "plugin_unavailable"}},
	} {
		if Unchecked(err) {
			t.Errorf("%v: taken as unchecked", err)
		}
	}
}
