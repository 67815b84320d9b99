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

// KindPlugin is a kind over go-plugin's gRPC transport, both halves in
// one declaration: GRPCServer serves Impl, the plugin's half (Serve sets
// it), and GRPCClient calls Dispense, the host's half (hostside.PluginSets
// sets it, as sdk can't import the host's client). sdktest sets both, in
// one process.
type KindPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the kind a plugin serves; nil on the host.
	Impl Kind
	// Dispense makes the host's client of a plugin process
	// (hostside.Dispense); nil in a plugin.
	Dispense func(ctx context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error)
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
	if p.Impl == nil {
		return errors.New("this sdk.KindPlugin has no kind to serve (Impl): it is the host's half, made by hostside.PluginSets")
	}
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

// GRPCClient makes the host's client of a plugin process with Dispense.
func (p *KindPlugin) GRPCClient(ctx context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	if p.Dispense == nil {
		return nil, errors.New("this sdk.KindPlugin has no host's half (Dispense): a plugin serves its kind, and the host dispenses with hostside.PluginSets")
	}
	return p.Dispense(ctx, broker, conn)
}
