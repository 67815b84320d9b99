package sdk

import (
	"context"

	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// MetricsSource is implemented by a kind that reports metrics. It is
// optional: a kind without it reports none.
type MetricsSource interface {
	Metrics(ctx context.Context) []Metric
}

func (s *kindServer) Metrics(ctx context.Context, _ *pluginv1.MetricsRequest) (*pluginv1.MetricsResponse, error) {
	src, ok := s.impl.(MetricsSource)
	if !ok {
		return &pluginv1.MetricsResponse{}, nil
	}
	return convert.ToProtoMetrics(src.Metrics(ctx)), nil
}
