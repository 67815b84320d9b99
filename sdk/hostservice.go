package sdk

import (
	"context"
	"encoding/json"
	"fmt"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

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
	res := ToolResult{Printed: resp.GetPrinted(), Error: resp.GetError().ToError()}
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
		return "", resp.GetError().ToError()
	}
	return resp.GetText(), nil
}
