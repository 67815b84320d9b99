package sdk

import (
	"context"
	"strings"
	"testing"
)

// TestKindPluginHalfMissing: a KindPlugin asked for the half it wasn't
// given says which one it is, instead of serving nothing or panicking.
func TestKindPluginHalfMissing(t *testing.T) {
	hostHalf := &KindPlugin{}
	if err := hostHalf.GRPCServer(nil, nil); err == nil || !strings.Contains(err.Error(), "Impl") {
		t.Errorf("serving without a kind: got %v, want an error naming Impl", err)
	}
	pluginHalf := &KindPlugin{Impl: nil}
	if _, err := pluginHalf.GRPCClient(context.Background(), nil, nil); err == nil || !strings.Contains(err.Error(), "Dispense") {
		t.Errorf("dispensing without a host's half: got %v, want an error naming Dispense", err)
	}
}
