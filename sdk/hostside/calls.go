package hostside

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk"
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
	out := make([]sdk.Metric, len(resp.GetMetrics()))
	for i, m := range resp.GetMetrics() {
		out[i] = sdk.Metric{Name: m.GetName(), Help: m.GetHelp(), Type: m.GetType(), Value: m.GetValue(), Labels: m.GetLabels()}
	}
	return out, nil
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
	rep := sdk.DoctorReport{Summary: resp.GetSummary()}
	for _, pc := range resp.GetChecks() {
		rep.Checks = append(rep.Checks, sdk.DoctorCheck{Name: pc.GetName(), OK: pc.GetOk(), Detail: pc.GetDetail(), Fix: pc.GetFix()})
	}
	return rep, nil
}
