package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// hostClient is the plugin's side of HostService.
type hostClient struct {
	client pluginv1.HostServiceClient
}

var _ Host = (*hostClient)(nil)

// errHostStopped is a stream from the host that ended without its
// terminal event.
var errHostStopped = errors.New("the host's answer stopped before its end")

func (c *hostClient) CallTool(ctx context.Context, req ToolCall) (ToolResult, error) {
	preq := convert.ToProtoCallToolRequest(req)
	stream, err := c.client.CallToolStream(ctx, preq)
	if err == nil {
		var res ToolResult
		res, err = c.readToolStream(stream, req.OnEvent)
		if err == nil {
			return res, nil
		}
	}
	if status.Code(err) != codes.Unimplemented {
		return ToolResult{}, fmt.Errorf("the host didn't call %s: %w", req.Tool, err)
	}
	// A host older than CallToolStream: the whole answer at the end.
	resp, err := c.client.CallTool(ctx, preq)
	if err != nil {
		return ToolResult{}, fmt.Errorf("the host didn't call %s: %w", req.Tool, err)
	}
	return convert.ToolResultFromProto(resp), nil
}

// readToolStream reads a nested run's events up to its terminal one.
func (c *hostClient) readToolStream(stream pluginv1.HostService_CallToolStreamClient, onEvent func(Event)) (ToolResult, error) {
	var printed []byte
	for {
		pe, err := stream.Recv()
		if err == io.EOF {
			return ToolResult{}, errHostStopped
		}
		if err != nil {
			return ToolResult{}, err
		}
		switch k := pe.GetKind().(type) {
		case *pluginv1.Event_Result:
			value, parts := convert.ResultFromProto(k.Result)
			return ToolResult{Result: value, Content: parts, Printed: string(printed)}, nil
		case *pluginv1.Event_Error:
			return ToolResult{Error: k.Error.ToError(), Printed: string(printed)}, nil
		case *pluginv1.Event_Stdout:
			printed = append(printed, k.Stdout.GetData()...)
		}
		if ev, ok := convert.EventFromProto(pe); ok && onEvent != nil {
			onEvent(ev)
		}
	}
}

func (c *hostClient) AskModel(ctx context.Context, req ModelRequest) (ModelAnswer, error) {
	preq := convert.ToProtoAskModelRequest(req)
	stream, err := c.client.AskModelStream(ctx, preq)
	if err == nil {
		var ans ModelAnswer
		if ans, err = readModelStream(stream, req.OnText); err == nil {
			return ans, nil
		}
		var ue *Error
		if errors.As(err, &ue) {
			return ModelAnswer{}, ue
		}
	}
	if status.Code(err) != codes.Unimplemented {
		return ModelAnswer{}, fmt.Errorf("the host didn't ask the model: %w", err)
	}
	// A host older than AskModelStream.
	resp, err := c.client.AskModel(ctx, preq)
	if err != nil {
		return ModelAnswer{}, fmt.Errorf("the host didn't ask the model: %w", err)
	}
	if resp.GetError() != nil {
		return ModelAnswer{}, resp.GetError().ToError()
	}
	if req.OnText != nil && resp.GetText() != "" {
		req.OnText(resp.GetText())
	}
	return convert.ModelAnswerFromProto(resp), nil
}

func readModelStream(stream pluginv1.HostService_AskModelStreamClient, onText func(string)) (ModelAnswer, error) {
	for {
		me, err := stream.Recv()
		if err == io.EOF {
			return ModelAnswer{}, errHostStopped
		}
		if err != nil {
			return ModelAnswer{}, err
		}
		switch k := me.GetKind().(type) {
		case *pluginv1.ModelEvent_Text:
			if onText != nil {
				onText(k.Text)
			}
		case *pluginv1.ModelEvent_Answer:
			return convert.ModelAnswerFromProto(k.Answer), nil
		case *pluginv1.ModelEvent_Error:
			return ModelAnswer{}, k.Error.ToError()
		}
	}
}
