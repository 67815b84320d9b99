package hostside

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// hostServer serves the host's Host to a plugin over the broker.
type hostServer struct {
	pluginv1.UnimplementedHostServiceServer
	host sdk.Host
}

var _ pluginv1.HostServiceServer = (*hostServer)(nil)

func (s *hostServer) CallTool(ctx context.Context, req *pluginv1.CallToolRequest) (*pluginv1.CallToolResponse, error) {
	res, err := s.host.CallTool(ctx, convert.ToolCallFromProto(req))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return convert.ToProtoCallToolResponse(res), nil
}

func (s *hostServer) CallToolStream(req *pluginv1.CallToolRequest, stream pluginv1.HostService_CallToolStreamServer) error {
	var mu sync.Mutex
	var sendErr error
	send := func(pe *pluginv1.Event) {
		mu.Lock()
		defer mu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(pe)
		}
	}
	call := convert.ToolCallFromProto(req)
	streamed := false
	call.OnEvent = func(e sdk.Event) {
		if pe := convert.ToProtoEvent(e); pe != nil {
			streamed = streamed || e.Stdout != nil
			send(pe)
		}
	}
	res, err := s.host.CallTool(stream.Context(), call)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if !streamed && res.Printed != "" {
		// A host that tells only at the end what the run printed.
		send(convert.ToProtoEvent(sdk.Event{Stdout: []byte(res.Printed)}))
	}
	if res.Error != nil {
		send(&pluginv1.Event{Kind: &pluginv1.Event_Error{Error: pluginv1.FromError(res.Error)}})
	} else {
		send(&pluginv1.Event{Kind: &pluginv1.Event_Result{Result: convert.ToProtoResult(res.Result, res.Content)}})
	}
	mu.Lock()
	defer mu.Unlock()
	return sendErr
}

func (s *hostServer) AskModel(ctx context.Context, req *pluginv1.AskModelRequest) (*pluginv1.AskModelResponse, error) {
	ans, err := s.host.AskModel(ctx, convert.ModelRequestFromProto(req))
	if err != nil {
		var ue *sdk.Error
		if errors.As(err, &ue) {
			return &pluginv1.AskModelResponse{Error: pluginv1.FromError(ue)}, nil
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	return convert.ToProtoAskModelResponse(ans), nil
}

func (s *hostServer) AskModelStream(req *pluginv1.AskModelRequest, stream pluginv1.HostService_AskModelStreamServer) error {
	var sendErr error
	mreq := convert.ModelRequestFromProto(req)
	mreq.OnText = func(text string) {
		if sendErr == nil {
			sendErr = stream.Send(&pluginv1.ModelEvent{Kind: &pluginv1.ModelEvent_Text{Text: text}})
		}
	}
	ans, err := s.host.AskModel(stream.Context(), mreq)
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		var ue *sdk.Error
		if !errors.As(err, &ue) {
			return status.Error(codes.Internal, err.Error())
		}
		return stream.Send(&pluginv1.ModelEvent{Kind: &pluginv1.ModelEvent_Error{Error: pluginv1.FromError(ue)}})
	}
	return stream.Send(&pluginv1.ModelEvent{Kind: &pluginv1.ModelEvent_Answer{Answer: convert.ToProtoAskModelResponse(ans)}})
}
