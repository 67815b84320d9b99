// Command v1-kind is a plugin of the "v1" kind as a build of plugin
// protocol version 1 speaks it, kept as a test fixture: a host that speaks
// newer versions must still serve a plugin nobody rebuilt. It does not use
// sdk.Serve (which offers every version the SDK knows, 2 and up too): its
// go-plugin handshake offers version 1 only, with the same magic cookie,
// and it serves its own small Kind server on the generated code, saying
// protocol_versions [1]. Its tools print a line, report a progress of
// unknown fraction whose node is only in its message (as the graph kind
// of protocol 1 did), and return what they were given.
//
// It lives under sdk/ because it imports the SDK's internal generated
// code; sdk/hostside's and integration's version tests build it.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// handshake is protocol 1's, as the SDK of that version wrote it.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "TOOLHOST_PLUGIN",
	MagicCookieValue: "a kind for toolhost: started by the host, not by hand",
}

// version is this build's own version; set at build time with
// -ldflags "-X main.version=...".
var version = "1.0.0"

// kindPlugin serves server over go-plugin's gRPC transport.
type kindPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

func (kindPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginv1.RegisterKindServer(s, server{})
	return nil
}

func (kindPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("the v1 kind is a plugin, not a host")
}

// server is the v1 kind: "echo" tools with an optional run.prefix.
type server struct {
	pluginv1.UnimplementedKindServer
}

func (server) Describe(context.Context, *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	return &pluginv1.DescribeResponse{
		Kind: "v1", Version: version, ProtocolVersions: []uint32{1},
		RunSchema: `{"type":"object","properties":{"type":{"const":"v1"},"prefix":{"type":"string"}}}`,
	}, nil
}

func (server) Configure(context.Context, *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	return &pluginv1.ConfigureResponse{}, nil
}

// run is a tool's run table.
type run struct {
	Type   string `json:"type"`
	Prefix string `json:"prefix"`
}

func (server) Check(_ context.Context, req *pluginv1.CheckRequest) (*pluginv1.CheckResponse, error) {
	var r run
	if err := json.Unmarshal([]byte(req.GetTool().GetRunJson()), &r); err != nil {
		return &pluginv1.CheckResponse{Errors: []*pluginv1.FieldError{{Path: "run", Message: "is not a table: " + err.Error()}}}, nil
	}
	if r.Prefix == "" {
		r.Prefix = "echo: "
	}
	out, err := json.Marshal(r)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.CheckResponse{RunJson: string(out)}, nil
}

func (server) Invoke(req *pluginv1.InvokeRequest, stream pluginv1.Kind_InvokeServer) error {
	var r run
	_ = json.Unmarshal([]byte(req.GetTool().GetRunJson()), &r)
	var args map[string]any
	if err := json.Unmarshal([]byte(req.GetArgsJson()), &args); err != nil {
		return stream.Send(&pluginv1.Event{Seq: 0, Kind: &pluginv1.Event_Error{Error: &pluginv1.Error{Code: "bad_args", Message: "the arguments are not a JSON object"}}})
	}
	events := []*pluginv1.Event{
		{Kind: &pluginv1.Event_Stdout{Stdout: &pluginv1.Output{Data: fmt.Appendf(nil, "%s%v\n", r.Prefix, args["text"])}}},
		{Kind: &pluginv1.Event_Progress{Progress: &pluginv1.Progress{Fraction: -1, Message: `node "echo" done`}}},
	}
	result, err := json.Marshal(map[string]any{"echoed": args["text"], "protocol": 1})
	if err != nil {
		return err
	}
	events = append(events, &pluginv1.Event{Kind: &pluginv1.Event_Result{Result: &pluginv1.Result{Json: string(result)}}})
	for i, e := range events {
		e.Seq = uint64(i)
		if err := stream.Send(e); err != nil {
			return err
		}
	}
	return nil
}

func (server) Metrics(context.Context, *pluginv1.MetricsRequest) (*pluginv1.MetricsResponse, error) {
	return &pluginv1.MetricsResponse{}, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         plugin.PluginSet{"kind": kindPlugin{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
