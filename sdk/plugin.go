package sdk

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// ProtocolVersion is the newest plugin protocol this SDK speaks. It must
// equal the "protocol_version" written in sdk/proto/v1/plugin.proto (a test
// checks).
//
// The policy: each release that adds to the protocol (a field, a call)
// raises ProtocolVersion, so that a host and a plugin know from the
// go-plugin handshake, before the first call, what the other has. The wire
// package stays toolhost.plugin.v1 while every change is additive (`buf
// breaking` against sdk/proto/v1.released.binpb keeps it so); a breaking
// change would be a new package, sdk/proto/v2. Every version from
// MinProtocolVersion up is served side by side: a plugin built with the
// SDK offers them all (pluginSets), the host asks for them all
// (hostside.PluginSets), and go-plugin picks the highest both speak.
//
// Version 2 added Progress.Node; version 3 a result's Content, Log.ToCaller
// and ToolResult.Content.
const ProtocolVersion = 3

// MinProtocolVersion is the oldest plugin protocol this SDK and the host
// still speak.
const MinProtocolVersion = 1

// ProtocolVersions lists every protocol version served, oldest first.
func ProtocolVersions() []int {
	out := make([]int, 0, ProtocolVersion-MinProtocolVersion+1)
	for v := MinProtocolVersion; v <= ProtocolVersion; v++ {
		out = append(out, v)
	}
	return out
}

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
// protocol version, every one it knows, all served by the same code (the
// versions differ only in what they add, and an older peer leaves that
// unset). The host's are hostside.PluginSets.
func pluginSets(kind Kind, logger hclog.Logger) map[int]plugin.PluginSet {
	sets := map[int]plugin.PluginSet{}
	for _, v := range ProtocolVersions() {
		sets[v] = plugin.PluginSet{PluginName: &KindPlugin{Impl: kind, Logger: logger, Protocol: v}}
	}
	return sets
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
	// Protocol is the plugin protocol this set serves (0: ProtocolVersion):
	// what the kind sends is kept to what a host of it reads.
	Protocol int

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
		impl:     p.Impl,
		protocol: p.Protocol,
		host:     &hostLink{broker: broker, dialOpts: p.hostDialOpts},
		logger:   logger,
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
