package host

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pluginCollector reports each plugin's health and the metrics the plugin
// reports of itself, asked for at scrape time.
type pluginCollector struct{ h *Host }

var (
	pluginUpDesc       = prometheus.NewDesc("toolhost_plugin_up", "Whether the kind's plugin process is running (1) or not (0).", []string{"kind"}, nil)
	pluginRestartsDesc = prometheus.NewDesc("toolhost_plugin_restarts_total", "Times the kind's plugin was started again after it died.", []string{"kind"}, nil)
)

func (c pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pluginUpDesc
	ch <- pluginRestartsDesc
	// The plugins' own metrics are not known in advance: an unchecked
	// collector.
}

func (c pluginCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, kind := range c.h.plugins.Kinds() {
		p, ok := c.h.plugins.Kind(kind)
		if !ok {
			continue
		}
		up := 0.0
		if p.Up() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(pluginUpDesc, prometheus.GaugeValue, up, kind)
		ch <- prometheus.MustNewConstMetric(pluginRestartsDesc, prometheus.CounterValue, float64(p.Restarts()), kind)
		ms, err := p.Metrics(ctx)
		if err != nil {
			continue
		}
		for _, m := range ms {
			keys := make([]string, 0, len(m.Labels)+1)
			for k := range m.Labels {
				if k != "kind" {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			values := []string{kind}
			for _, k := range keys {
				values = append(values, m.Labels[k])
			}
			vt := prometheus.GaugeValue
			if m.Type == "counter" {
				vt = prometheus.CounterValue
			}
			desc := prometheus.NewDesc("toolhost_kind_"+sanitize(m.Name), m.Help, append([]string{"kind"}, keys...), nil)
			if metric, err := prometheus.NewConstMetric(desc, vt, m.Value, values...); err == nil {
				ch <- metric
			}
		}
	}
}

// capCollector reports how many times each cap refused something,
// labelled by the setting that is the cap (sessions.Caps): every cap is
// there from the start, at 0 until it refuses.
type capCollector struct{ h *Host }

var capRefusalsDesc = prometheus.NewDesc("toolhost_cap_refusals_total",
	"Requests refused because they would pass a cap of the config, by the cap's setting (e.g. sessions.max_sessions_per_principal).", []string{"cap"}, nil)

var pacedRefusalsDesc = prometheus.NewDesc("toolhost_paced_refusals_total",
	"Refusals (429) written only after their turn: the token was refused more often than its pace allows (api.RefusalRate a second).", nil, nil)

func (c capCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- capRefusalsDesc
	ch <- pacedRefusalsDesc
}

func (c capCollector) Collect(ch chan<- prometheus.Metric) {
	for name, n := range c.h.sessions.svc.Refusals() {
		ch <- prometheus.MustNewConstMetric(capRefusalsDesc, prometheus.CounterValue, float64(n), name)
	}
	if c.h.api != nil {
		ch <- prometheus.MustNewConstMetric(pacedRefusalsDesc, prometheus.CounterValue, float64(c.h.api.PacedRefusals()))
	}
}

// sanitize keeps a plugin's metric name within Prometheus's alphabet.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
}
