package hostside

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// hostServer serves the host's Host to a plugin over the broker.
type hostServer struct {
	pluginv1.UnimplementedHostServiceServer
	host sdk.Host
}

var _ pluginv1.HostServiceServer = (*hostServer)(nil)

func (s *hostServer) CallTool(ctx context.Context, req *pluginv1.CallToolRequest) (*pluginv1.CallToolResponse, error) {
	res, err := s.host.CallTool(ctx, req.GetParentRunId(), req.GetTool(), json.RawMessage(req.GetArgsJson()))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.CallToolResponse{ResultJson: string(res.Result), Printed: res.Printed, Error: pluginv1.FromError(res.Error)}, nil
}

func (s *hostServer) AskModel(ctx context.Context, req *pluginv1.AskModelRequest) (*pluginv1.AskModelResponse, error) {
	text, err := s.host.AskModel(ctx, req.GetParentRunId(), req.GetSystem(), req.GetPrompt())
	if err != nil {
		var ue *sdk.Error
		if errors.As(err, &ue) {
			return &pluginv1.AskModelResponse{Error: pluginv1.FromError(ue)}, nil
		}
		return nil, status.Error(codes.Unimplemented, err.Error())
	}
	return &pluginv1.AskModelResponse{Text: text}, nil
}
