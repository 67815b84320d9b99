package sdk

import "google.golang.org/grpc"

// WithHostDialOpts adds opts to p's dial of the host's HostService (tests
// count and time out its connections).
func WithHostDialOpts(p *KindPlugin, opts ...grpc.DialOption) *KindPlugin {
	p.hostDialOpts = opts
	return p
}
