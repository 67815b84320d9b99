package api

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkPrintToFrame measures, one line at a time (a line every
// millisecond), the time from a kind handing the host a printed line to
// the websocket frame holding it being decoded by a client: the host's
// whole path (run log, forwarder, encoding, writer, socket) without the
// plugin's gRPC hop. It reports p50 and p99 in microseconds.
func BenchmarkPrintToFrame(b *testing.B) {
	h := newTestHost(b, Options{})
	c := h.dial(b, http.Header{})
	c.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": b.N, "delay_ms": 1}})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for len(lat) < b.N {
		f := c.read(30 * time.Second)
		if f.Type != "stdout" {
			continue
		}
		ns, err := strconv.ParseInt(strings.Fields(f.Data)[0], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, f.at.Sub(time.Unix(0, ns)))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFramesPerSecond measures how many stdout frames (of 100 bytes)
// one connection carries per second when the run prints as fast as it
// can.
func BenchmarkFramesPerSecond(b *testing.B) {
	h := newTestHost(b, Options{ConnBuffer: 1 << 30})
	c := h.dial(b, http.Header{})
	b.ResetTimer()
	begin := time.Now()
	c.send(map[string]any{"type": "call", "id": "c", "tool": "lines", "args": map[string]any{"n": b.N, "size": 100}})
	frames, _ := c.follow("c", 60*time.Second)
	took := time.Since(begin)
	b.StopTimer()
	if len(frames) != b.N+2 {
		b.Fatalf("%d frames, want %d", len(frames), b.N+2)
	}
	b.ReportMetric(float64(len(frames))/took.Seconds(), "frames/s")
}
