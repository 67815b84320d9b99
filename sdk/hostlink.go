package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// How the plugin reaches the host's HostService, and why this way.
//
// The host serves HostService on a go-plugin broker id: hostside.Dispense (sdk.KindPlugin.GRPCClient)
// calls broker.AcceptAndServe(id) once, when the host makes its client of a
// plugin process. Accept opens a listener on the host and sends its address
// to the plugin down the broker's stream. The plugin's broker keeps that
// announcement for 5 s only (go-plugin v1.8.0 grpc_broker.go: Run starts
// timeoutWait, which deletes it after 5 s unless a Dial took it), and a Dial
// of an id whose announcement is gone waits 5 s (DialWithOptions) and fails.
// So an id can be dialled once, within 5 s of the announcement; the
// listener, on the other hand, serves until the broker closes, and every
// later reconnect of a connection already dialled goes straight to its
// address (netAddrDialer; with broker multiplexing, a fresh knock that the
// host's listenForKnocks answers while the listener lives).
//
// Hence the design: the host sends the id in ConfigureRequest (its first
// call after Describe, milliseconds after the announcement), and the plugin
// dials it right then, once, and keeps the connection for the life of the
// process. Invoke never dials while it holds that connection, and even then
// only when the run actually uses Host (the Host a run gets dials on first
// use, not when the run starts), so a kind that never calls back is never
// held up by the broker. A reload configures the plugin again with the same
// id: the connection it holds is kept. A restarted plugin is a new process,
// a new client on the host, a new id, dialled at its own Configure.
//
// The connection is dialled with grpc.WithIdleTimeout(0). gRPC would
// otherwise let it go idle after 30 minutes without a call and reconnect on
// the next one; that reconnect would work (the host's listener is still
// serving), but it would re-dial a unix socket path in a temporary folder
// that nothing refreshes for as long as the host sits idle, and a cleaner
// of old files in /tmp can remove it. One open socket per plugin process
// costs nothing; a nested call that fails after a quiet week costs a lot.
//
// The alternative, a broker id per call (go-plugin's examples/bidirectional),
// opens a listener and a gRPC server on the host for every call, whether the
// run uses Host or not, and a run that first calls back more than 5 s after
// it started (a graph waiting on a slow tool) finds its announcement gone.
//
// A host older than this SDK sends the id only in Call.host_service_id: a
// run that uses Host then dials it on first use, bounded by the broker's 5 s
// and the run's context, and a failed dial is remembered, so only one call
// of the process waits for it.

// hostLink is the plugin's one connection to the host's HostService.
type hostLink struct {
	broker *plugin.GRPCBroker
	// dialOpts are added to every dial (tests shorten the idle timeout).
	dialOpts []grpc.DialOption

	mu   sync.Mutex
	id   uint32           // the broker id conn was dialled on
	conn *grpc.ClientConn // nil until dialled
	// failed remembers why dialling an id failed: its announcement is gone
	// and dialling it again would only wait another 5 s.
	failed map[uint32]error
	// dialing is closed when the dial in flight ends; nil when none is.
	dialing chan struct{}
}

// errNoHostService is the Host's error when the host serves none.
var errNoHostService = errors.New("this plugin was started without a connection to the host, so it can't call other tools or ask the model: " +
	"the host that started it serves no HostService to its plugins")

// connect returns the connection to the host's HostService on broker id
// (0: the one the plugin holds), dialling it if the plugin holds none.
// atConfigure says the host named id in Configure (it announced it just
// before), rather than only in a call. One dial runs at a time; callers
// wait for it, or for ctx.
func (l *hostLink) connect(ctx context.Context, id uint32, atConfigure bool) (*grpc.ClientConn, error) {
	for {
		l.mu.Lock()
		if id == 0 {
			id = l.id
		}
		if id == 0 || l.broker == nil {
			l.mu.Unlock()
			return nil, errNoHostService
		}
		if l.conn != nil && l.id == id {
			conn := l.conn
			l.mu.Unlock()
			return conn, nil
		}
		if err, ok := l.failed[id]; ok {
			l.mu.Unlock()
			return nil, err
		}
		if l.dialing == nil {
			l.dialing = make(chan struct{})
			go l.dial(id, atConfigure, l.dialing)
		}
		dialing := l.dialing
		l.mu.Unlock()
		select {
		case <-dialing:
		case <-ctx.Done():
			return nil, fmt.Errorf("this plugin was still connecting to the host when the call was cancelled: %w", ctx.Err())
		}
	}
}

// dial dials broker id and records the outcome. The broker's Dial takes no
// context; it gives up on its own after 5 s.
func (l *hostLink) dial(id uint32, atConfigure bool, done chan struct{}) {
	opts := append([]grpc.DialOption{grpc.WithIdleTimeout(0)}, l.dialOpts...)
	conn, err := l.broker.DialWithOptions(id, opts...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.failed == nil {
			l.failed = map[uint32]error{}
		}
		if atConfigure {
			l.failed[id] = fmt.Errorf("this plugin could not connect back to the host, so it can't call other tools or ask the model "+
				"(go-plugin broker id %d: %w): restart the plugin (kill it; the host starts it again)", id, err)
		} else {
			l.failed[id] = fmt.Errorf("this plugin could not connect back to the host, so it can't call other tools or ask the model "+
				"(go-plugin broker id %d: %w): the host is older than the plugin's SDK and offers that connection only in "+
				"the plugin's first 5 seconds; upgrade toolhost", id, err)
		}
	} else {
		// A host that names another id than the one held serves there now;
		// the old connection is left open for runs still using it.
		l.id, l.conn = id, conn
	}
	l.dialing = nil
	close(done)
}

// lazyHost is the Host of one run: it reaches the host only when the run
// uses it.
type lazyHost struct {
	link *hostLink
	id   uint32 // Call.host_service_id; 0 when the host sent none
}

var _ Host = lazyHost{}

func (h lazyHost) client(ctx context.Context) (*hostClient, error) {
	conn, err := h.link.connect(ctx, h.id, false)
	if err != nil {
		return nil, err
	}
	return &hostClient{client: pluginv1.NewHostServiceClient(conn)}, nil
}

func (h lazyHost) CallTool(ctx context.Context, req ToolCall) (ToolResult, error) {
	c, err := h.client(ctx)
	if err != nil {
		return ToolResult{}, err
	}
	return c.CallTool(ctx, req)
}

func (h lazyHost) AskModel(ctx context.Context, req ModelRequest) (ModelAnswer, error) {
	c, err := h.client(ctx)
	if err != nil {
		return ModelAnswer{}, err
	}
	return c.AskModel(ctx, req)
}
