package sdk

import (
	"context"

	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// Metric is one gauge or counter a kind reports; the host serves it on
// /metrics as toolhost_kind_<Name>{kind="<kind>", Labels...}.
type Metric struct {
	// Name is snake_case, without a prefix.
	Name string
	Help string
	// Type is "gauge" or "counter".
	Type   string
	Value  float64
	Labels map[string]string
}

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
