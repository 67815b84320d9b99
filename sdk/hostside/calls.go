package hostside

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// The optional calls: a plugin built before one existed answers
// Unimplemented, which reads as "nothing to report".

// Metrics asks the plugin for its metrics (sdk.MetricsSource).
func (c *KindClient) Metrics(ctx context.Context) ([]sdk.Metric, error) {
	resp, err := c.client.Metrics(ctx, &pluginv1.MetricsRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the plugin didn't report its metrics: %w", err)
	}
	return convert.MetricsFromProto(resp), nil
}

// Doctor asks the plugin to check this machine with the given config
// table (sdk.Doctor).
func (c *KindClient) Doctor(ctx context.Context, config json.RawMessage) (sdk.DoctorReport, error) {
	resp, err := c.client.Doctor(ctx, &pluginv1.DoctorRequest{ConfigJson: string(config)})
	if status.Code(err) == codes.Unimplemented {
		return sdk.DoctorReport{}, nil
	}
	if err != nil {
		return sdk.DoctorReport{}, fmt.Errorf("the plugin didn't check the machine: %s", status.Convert(err).Message())
	}
	return convert.DoctorReportFromProto(resp), nil
}
