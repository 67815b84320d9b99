package sdk

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// ProtocolVersion is the plugin protocol this SDK speaks: the version of
// sdk/proto/v1. It must equal the "protocol_version" written in that proto
// file (a test checks). Raise it only with a new proto package; keep serving
// the old one beside it in pluginSets and hostside.PluginSets.
const ProtocolVersion = 1

// PluginName is the name the kind is served under inside a plugin set.
const PluginName = "kind"

// Handshake is shared by the host and every plugin. The magic cookie only
// keeps a plugin binary from being run by hand by mistake; it is not a
// security measure (the host pins each binary's SHA-256 instead).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "TOOLHOST_PLUGIN",
	MagicCookieValue: "a kind for toolhost: started by the host, not by hand",
}

// pluginSets is the versioned plugin sets a plugin serves: one entry per
// protocol version. The host's are hostside.PluginSets.
func pluginSets(kind Kind, logger hclog.Logger) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &KindPlugin{Impl: kind, Logger: logger}},
	}
}

// KindPlugin is the plugin's half of a kind over go-plugin's gRPC
// transport: GRPCServer serves Impl. Serve uses it; sdktest pairs it with
// the host's half (sdk/hostside) in-process.
type KindPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Kind
	// Logger is where the plugin side logs what its caller can't see
	// (nil: nowhere).
	Logger hclog.Logger

	// hostDialOpts are added to the plugin's dial of HostService (tests).
	hostDialOpts []grpc.DialOption
}

var _ plugin.GRPCPlugin = (*KindPlugin)(nil)

// GRPCServer registers the kind's gRPC server, and the Sessions service
// beside it for a kind that is a SessionKeeper.
func (p *KindPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	logger := p.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	pluginv1.RegisterKindServer(s, &kindServer{
		impl:   p.Impl,
		host:   &hostLink{broker: broker, dialOpts: p.hostDialOpts},
		logger: logger,
	})
	if keeper, ok := p.Impl.(SessionKeeper); ok {
		pluginv1.RegisterSessionsServer(s, &sessionsServer{impl: keeper})
	}
	return nil
}

// GRPCClient is the host's half, not made here.
func (p *KindPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("sdk.KindPlugin is the plugin's half of a kind: the host's is hostside.KindPlugin (hostside.PluginSets)")
}
