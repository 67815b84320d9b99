package hostside

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/toolhost/toolhost/sdk"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// PluginSets is the versioned plugin sets the host asks a plugin for, one
// entry per protocol version it speaks (sdk.ProtocolVersions: every one
// from 1 up, so a plugin built with an older SDK is still served), with
// host answering the plugins' HostService calls (nil: none served). Pass
// it with sdk.Handshake to go-plugin's ClientConfig; the client's
// NegotiatedVersion is then the highest version both sides speak.
func PluginSets(host sdk.Host) map[int]plugin.PluginSet {
	sets := map[int]plugin.PluginSet{}
	for _, v := range sdk.ProtocolVersions() {
		sets[v] = plugin.PluginSet{sdk.PluginName: &sdk.KindPlugin{Dispense: Dispense(host)}}
	}
	return sets
}

// Dispense is the host's half of sdk.KindPlugin: it makes the
// *KindClient of a plugin process. When host is set it serves HostService
// over the broker for the plugin to call back into, on one broker id for
// the life of the plugin process: the KindClient sends that id in every
// Configure, and the plugin dials it at the first (see sdk/hostlink.go for
// why then, and not per call). A nil host serves none.
func Dispense(host sdk.Host) func(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return func(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
		c := &KindClient{client: pluginv1.NewKindClient(conn), sessions: pluginv1.NewSessionsClient(conn)}
		if host != nil {
			c.hostServiceID = broker.NextId()
			go broker.AcceptAndServe(c.hostServiceID, func(opts []grpc.ServerOption) *grpc.Server {
				s := grpc.NewServer(opts...)
				pluginv1.RegisterHostServiceServer(s, &hostServer{host: host})
				return s
			})
		}
		return c, nil
	}
}
