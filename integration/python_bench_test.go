package integration

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
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
// call) and on (each call waits, untimed, until the pool has a sandbox ready: the latency of a
// call that finds one). It reports the median and p90.
func BenchmarkPythonToolCall(b *testing.B) {
	for _, pool := range []int{0, 2} {
		b.Run(fmt.Sprintf("pool=%d", pool), func(b *testing.B) {
			h := startPythonHostPool(b, map[string]string{"trivial.toml": pythonTrivialTool}, pool)
			var d []time.Duration
			b.ResetTimer()
			for range b.N {
				if pool > 0 {
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
		resp, err := http.Get(h.url + "/metrics")
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

// BenchmarkPythonPlainSubprocess is the predecessor's design for comparison: Debian's
// /usr/bin/python3 in a subprocess, rlimits set by the child, no sandbox.
func BenchmarkPythonPlainSubprocess(b *testing.B) {
	py := "/usr/bin/python3"
	if !fileExists(py) {
		b.Skip("no " + py)
	}
	code := `import json, resource
resource.setrlimit(resource.RLIMIT_CPU, (10, 10))
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
scope = {}
exec(compile("def run():\n    return 1\n", "tool.py", "exec"), scope)
print(json.dumps(scope["run"]()))`
	dir := b.TempDir()
	var d []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		cmd := exec.Command(py, "-I", "-B", "-c", code)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + dir}
		cmd.Dir = dir
		out, err := cmd.Output()
		d = append(d, time.Since(t0))
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			b.Fatalf("python3: %v %q", err, out)
		}
	}
	b.StopTimer()
	reportPercentiles(b, d)
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	s := slices.Clone(d)
	slices.Sort(s)
	b.ReportMetric(float64(s[(len(s)-1)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(s[(len(s)-1)*9/10].Microseconds())/1000, "p90-ms")
}
