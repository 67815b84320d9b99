package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const pythonTrivialTool = `name = "trivial"
description = "Returns 1."
[run]
type = "python"
seconds = 10
code = '''
def run():
    return 1
'''
`

// BenchmarkPythonToolCall is a trivial python tool call through a real host
// (POST /api/v1/tools/trivial/call), with the pool of ready sandboxes off (a cold sandbox each
// call), on with each call waiting, untimed, until the pool has a sandbox ready (the latency of
// a call that finds one), and on with calls back to back, as an agent makes them (the steady
// state when calls outrun the pool's refill). It reports the median and p90.
func BenchmarkPythonToolCall(b *testing.B) {
	for _, c := range []struct {
		name      string
		pool      int
		awaitPool bool
	}{{"pool=0", 0, false}, {"pool=2", 2, true}, {"pool=2/back_to_back", 2, false}} {
		b.Run(c.name, func(b *testing.B) {
			h := startPythonHostPool(b, map[string]string{"trivial.toml": pythonTrivialTool}, c.pool)
			if status, out := h.call(b, "trivial", map[string]any{}); status != http.StatusOK {
				b.Fatalf("the warm-up call of trivial = %d %v", status, out)
			}
			idleBeforeMeasuring(b)
			var d []time.Duration
			b.ResetTimer()
			for range b.N {
				if c.awaitPool {
					b.StopTimer()
					h.awaitReady(b)
					b.StartTimer()
				}
				t0 := time.Now()
				status, out := h.call(b, "trivial", map[string]any{})
				d = append(d, time.Since(t0))
				if status != http.StatusOK {
					b.Fatalf("trivial = %d %v", status, out)
				}
			}
			b.StopTimer()
			reportPercentiles(b, d)
		})
	}
}

// awaitReady waits until the host's python pool has a sandbox of the no-network shape ready.
func (h *pythonHost) awaitReady(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, `toolhost_kind_pool_ready{kind="python",shape="no_network"} `); ok && v != "0" {
				return
			}
		}
	}
	t.Fatal("the python pool has no sandbox ready after 30s")
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	p50, p90, _ := quantiles(d)
	b.ReportMetric(p50/1000, "p50-ms")
	b.ReportMetric(p90/1000, "p90-ms")
}
