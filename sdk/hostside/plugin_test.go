package hostside

import (
	"testing"

	"github.com/toolhost/toolhost/sdk"
)

// TestPluginSetsServeEveryVersion: the host asks for every protocol
// version from 1 up to the one the plugins' SDK serves, under the same
// name, so a plugin built with an older SDK is still served.
func TestPluginSetsServeEveryVersion(t *testing.T) {
	sets := PluginSets(nil)
	for v := 1; v <= sdk.ProtocolVersion; v++ {
		set, ok := sets[v]
		if !ok {
			t.Fatalf("PluginSets has no set for protocol version %d", v)
		}
		if kp, ok := set[sdk.PluginName].(*sdk.KindPlugin); !ok || kp.Dispense == nil {
			t.Fatalf("the set of version %d dispenses no *sdk.KindPlugin named %q", v, sdk.PluginName)
		}
	}
	if len(sets) != sdk.ProtocolVersion {
		t.Fatalf("PluginSets has %d sets, want versions 1 to %d", len(sets), sdk.ProtocolVersion)
	}
}
