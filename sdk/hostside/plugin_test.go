package hostside

import (
	"testing"

	"github.com/toolhost/toolhost/sdk"
)

// TestPluginSetsServeTheSDKsVersion: the host asks for the protocol
// version the plugins' SDK serves, under the same name.
func TestPluginSetsServeTheSDKsVersion(t *testing.T) {
	set, ok := PluginSets(nil)[sdk.ProtocolVersion]
	if !ok {
		t.Fatalf("PluginSets has no set for protocol version %d", sdk.ProtocolVersion)
	}
	if _, ok := set[sdk.PluginName].(*KindPlugin); !ok {
		t.Fatalf("the set serves no *KindPlugin named %q", sdk.PluginName)
	}
}
