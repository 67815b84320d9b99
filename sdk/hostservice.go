package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// hostServer serves the host's Host to a plugin over the broker.
type hostServer struct {
	pluginv1.UnimplementedHostServiceServer
	host Host
}

var _ pluginv1.HostServiceServer = (*hostServer)(nil)

func (s *hostServer) CallTool(ctx context.Context, req *pluginv1.CallToolRequest) (*pluginv1.CallToolResponse, error) {
	res, err := s.host.CallTool(ctx, req.GetParentRunId(), req.GetTool(), json.RawMessage(req.GetArgsJson()))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.CallToolResponse{ResultJson: string(res.Result), Printed: res.Printed, Error: errorToProto(res.Error)}, nil
}

func (s *hostServer) AskModel(ctx context.Context, req *pluginv1.AskModelRequest) (*pluginv1.AskModelResponse, error) {
	text, err := s.host.AskModel(ctx, req.GetParentRunId(), req.GetSystem(), req.GetPrompt())
	if err != nil {
		var ue *Error
		if errors.As(err, &ue) {
			return &pluginv1.AskModelResponse{Error: errorToProto(ue)}, nil
		}
		return nil, status.Error(codes.Unimplemented, err.Error())
	}
	return &pluginv1.AskModelResponse{Text: text}, nil
}

// hostClient is the plugin's side of HostService.
type hostClient struct {
	client pluginv1.HostServiceClient
}

var _ Host = (*hostClient)(nil)

func (c *hostClient) CallTool(ctx context.Context, parentRunID, tool string, args json.RawMessage) (ToolResult, error) {
	resp, err := c.client.CallTool(ctx, &pluginv1.CallToolRequest{ParentRunId: parentRunID, Tool: tool, ArgsJson: string(args)})
	if err != nil {
		return ToolResult{}, fmt.Errorf("the host didn't call %s: %w", tool, err)
	}
	res := ToolResult{Printed: resp.GetPrinted(), Error: errorFromProto(resp.GetError())}
	if resp.GetResultJson() != "" {
		res.Result = json.RawMessage(resp.GetResultJson())
	}
	return res, nil
}

func (c *hostClient) AskModel(ctx context.Context, parentRunID, system, prompt string) (string, error) {
	resp, err := c.client.AskModel(ctx, &pluginv1.AskModelRequest{ParentRunId: parentRunID, System: system, Prompt: prompt})
	if err != nil {
		return "", fmt.Errorf("the host didn't ask the model: %w", err)
	}
	if resp.GetError() != nil {
		return "", errorFromProto(resp.GetError())
	}
	return resp.GetText(), nil
}
