package sdk

import (
	"context"

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
	ms := src.Metrics(ctx)
	out := make([]*pluginv1.Metric, len(ms))
	for i, m := range ms {
		out[i] = &pluginv1.Metric{Name: m.Name, Help: m.Help, Type: m.Type, Value: m.Value, Labels: m.Labels}
	}
	return &pluginv1.MetricsResponse{Metrics: out}, nil
}
