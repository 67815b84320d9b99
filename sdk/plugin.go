package sdk

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// ProtocolVersion is the plugin protocol this SDK speaks: the version of
// sdk/proto/v1. It must equal the "protocol_version" written in that proto
// file (a test checks). Raise it only with a new proto package; keep serving
// the old one beside it in PluginSets.
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

// PluginSets is the versioned plugin sets a plugin serves and a host asks
// for: one entry per protocol version. On the plugin side pass the kind
// and a nil host; on the host side a nil kind and the host's services.
func PluginSets(kind Kind, host Host) map[int]plugin.PluginSet {
	return pluginSets(kind, host, nil)
}

func pluginSets(kind Kind, host Host, logger hclog.Logger) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		1: {PluginName: &KindPlugin{Impl: kind, Host: host, Logger: logger}},
	}
}

// KindPlugin adapts a Kind to go-plugin's gRPC transport. Impl is set in
// the plugin process; Host is set in the host process.
type KindPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Kind
	Host Host
	// Logger is where the plugin side logs what its caller can't see
	// (nil: nowhere).
	Logger hclog.Logger

	// hostDialOpts are added to the plugin's dial of HostService (tests).
	hostDialOpts []grpc.DialOption
}

var _ plugin.GRPCPlugin = (*KindPlugin)(nil)

// GRPCServer registers the kind's gRPC server (plugin side).
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
	return nil
}

// GRPCClient returns a *KindClient (host side). When Host is set it serves
// HostService over the broker for the plugin to call back into, on one
// broker id for the life of the plugin process: the KindClient sends that
// id in every Configure, and the plugin dials it at the first (see
// hostlink.go for why then, and not per call).
func (p *KindPlugin) GRPCClient(ctx context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	c := &KindClient{client: pluginv1.NewKindClient(conn)}
	if p.Host != nil {
		c.hostServiceID = broker.NextId()
		go broker.AcceptAndServe(c.hostServiceID, func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(opts...)
			pluginv1.RegisterHostServiceServer(s, &hostServer{host: p.Host})
			return s
		})
	}
	return c, nil
}
