package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"testing"
	"time"
)

// quantiles returns the p50, p90 and p99 of durations, in microseconds.
func quantiles(d []time.Duration) (p50, p90, p99 float64) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return float64(s[i].Nanoseconds()) / 1e3
	}
	return at(0.50), at(0.90), at(0.99)
}

// benchIdle is how long a benchmark's host sits up and idle before it is measured: longer than
// go-plugin's broker timeout (5 s) and the pool's health check, so that benchmarks see the steady
// state of a host that has been running, not its first seconds. TOOLHOST_BENCH_IDLE overrides it.
func benchIdle(b *testing.B) time.Duration {
	if s := os.Getenv("TOOLHOST_BENCH_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("TOOLHOST_BENCH_IDLE=%q is not a duration like 30s: %v", s, err)
		}
		return d
	}
	return 30 * time.Second
}

// idleBeforeMeasuring waits benchIdle and says so in the benchmark's log.
func idleBeforeMeasuring(b *testing.B) {
	b.Helper()
	d := benchIdle(b)
	b.Logf("steady state: the host was up and idle for %v before measuring", d)
	time.Sleep(d)
}

func warmHTTPCall(b *testing.B, client *http.Client, url string, ws *WS) {
	b.Helper()
	resp, err := client.Get(url + "/items/1")
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ws.Send(map[string]any{"type": "call", "id": "warm", "tool": "get_item", "args": map[string]any{"id": "1"}})
	ws.UntilEnd("warm", 10*time.Second)
}

// BenchmarkHTTPCallOverhead measures, side by side in one run, an http
// tool call through the host over the websocket against a plain Go HTTP
// client asking the same local server the same thing. Each iteration does
// one of each, interleaved, so both see the same machine load.
func BenchmarkHTTPCallOverhead(b *testing.B) {
	srv := jsonServer(b)
	h := startHost(b, hostSpec{
		Config: "[http]\nallow_private = true\n",
		Tools:  map[string]string{"get_item.toml": getItemTool(srv.URL)},
	})
	ws := h.Dial(b)
	client := &http.Client{}
	var direct, hosted []time.Duration
	// One call each, then idle: what is measured is a host that has been up a while.
	warmHTTPCall(b, client, srv.URL, ws)
	idleBeforeMeasuring(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		resp, err := client.Get(srv.URL + "/items/1")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		direct = append(direct, time.Since(t0))

		id := fmt.Sprint("b", i)
		t0 = time.Now()
		ws.Send(map[string]any{"type": "call", "id": id, "tool": "get_item", "args": map[string]any{"id": "1"}})
		frames := ws.UntilEnd(id, 10*time.Second)
		hosted = append(hosted, time.Since(t0))
		if frames[len(frames)-1]["result"] != "item 1" {
			b.Fatalf("bad result %v", frames[len(frames)-1])
		}
	}
	b.StopTimer()
	d50, _, d99 := quantiles(direct)
	h50, _, h99 := quantiles(hosted)
	b.ReportMetric(d50, "direct-p50-µs")
	b.ReportMetric(d99, "direct-p99-µs")
	b.ReportMetric(h50, "host-ws-p50-µs")
	b.ReportMetric(h99, "host-ws-p99-µs")
	b.ReportMetric(h50/d50, "p50-ratio")
	b.ReportMetric(h99/d99, "p99-ratio")
	b.Logf("\n%-34s %10s %10s\n%-34s %10.0f %10.0f\n%-34s %10.0f %10.0f\n%-34s %10.1f %10.1f  (n=%d)",
		"http call", "p50 µs", "p99 µs",
		"direct Go HTTP client", d50, d99,
		"http tool via host websocket", h50, h99,
		"ratio", h50/d50, h99/d99, len(direct))
}
