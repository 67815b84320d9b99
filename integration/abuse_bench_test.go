package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// abuseBenchCalls is how many calls the victim makes in each phase of
// BenchmarkVictimUnderAbuse, whatever b.N is: a call under abuse takes
// seconds, so 300 of them (make bench's -benchtime 300x) would take many
// minutes.
const abuseBenchCalls = 40

// BenchmarkVictimUnderAbuse is the latency of another editor's trivial
// python tool call (POST /api/v1/tools/trivial/call, with the victim's
// token) on the abuse host of TestAnEditorCannotExhaustTheHost, first idle,
// then while an editor's token attacks on every path at once, over and over
// (a thousand sessions, filling its disk, CPU burners left behind by runs,
// a storm of checks, concurrent 8 MiB downloads). It reports p50 and p99 of
// each phase side by side, in ms, and their ratios (abuse / idle); the
// issue's goal is within 2×. Each phase makes abuseBenchCalls calls, one
// after another, whatever b.N is (the work is done once, in the first
// iteration of b.Loop: ns/op means nothing here).
//
// TOOLHOST_ABUSE_PATHS, when set, names the attack's paths to take, by
// number (1 sessions, 2 disk, 3 burners, 4 checks, 5 downloads): "4" is the
// storm of checks alone, to see which path slows the victim most. The CPU
// the machine spent during the measured abuse is logged, by who spent it.
//
// What protects the victim: caps, fair places and CPU weights, and a paced
// flood. The caps bound what the attacker holds
// at once: its runs and checks together ([runs] max_running_per_token, 2
// here), its sessions (5) and file transfers (2). Every sandbox shares
// [python.pool] max (4 here), taken per caller (sandbox.Places): a free
// place goes first to the waiting caller holding the fewest, and the last
// free one is kept from a caller holding half of them while others hold or
// wait. Each caller's running sandboxes share one sandbox's CPU weight.
// The burners end with the run that started them.
// And the attacker's thousands of refusals a second are paced to 50 a
// second per token (the host's CPU during the abuse went from 0.42 of a
// core to about 0.1).
//
// Measured on a 2-core machine of this kind (2026-12-06, -benchtime 1x, three
// runs): idle p50 206-220 ms, p99 241-270 ms (the victim's calls back to back
// each take a fresh sandbox, so they come as fast as sandboxes boot; the pool
// learnt their pace); under abuse p50 ratio 1.97×, 1.72×, 1.57× and p99 ratio
// 2.27×, 2.92×, 2.41×. The goal of 2× holds for p50, not for p99. During the
// abuse the attacker's sandboxes keep both cores busy (1.8 cores), and the
// victim's refills, started with few shares so that they yield to running
// calls, boot with what is left: the tail is a refill that waited. (On
// 2026-12-05, before the pool learnt the pace, idle p50 was 710-720 ms and the
// ratios p50 2.42×, 1.70×, p99 2.88×, 2.52×; a refill started with its caller's
// weight measured p50 1.54×, 1.38×, 2.65× and p99 3.76×, 1.18×, 3.58×, no clear
// gain within this noise, and was not kept.) On 2026-12-06 a sandbox prepared
// ahead for the next resume of a conversation (plugins/python/session/prepared.go)
// was made and removed over and over as the attack's sessions were checkpointed
// and places filled: p50 2.34×, p99 4.45× in that make bench. Started with few
// shares, and not made again for 10 s after one was removed for want of a place:
// p50 1.83×, 1.80×, 1.64×, p99 2.59×, 2.84×, 2.31× (idle p50 195-209 ms).
func BenchmarkVictimUnderAbuse(b *testing.B) {
	h := startAbuseHost(b)
	ctx := context.Background()
	if msg := h.victimCall(ctx); msg != "" {
		b.Fatalf("the victim's warm-up call: %s", msg)
	}
	at := &attack{h: h, bigSize: 8 << 20, paths: os.Getenv("TOOLHOST_ABUSE_PATHS")}
	at.prepare(b, ctx)
	idleBeforeMeasuring(b)

	var idle, abuse []time.Duration
	for b.Loop() {
		if idle != nil {
			continue
		}
		idle = victimLatencies(b, h, "idle")
		actx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			at.run(actx, true)
		}()
		// The attack takes what it can before measuring: its sessions,
		// burners and checks under way.
		time.Sleep(5 * time.Second)
		began, t0 := readCPUSplit(h.cmd.Process.Pid), time.Now()
		abuse = victimLatencies(b, h, "under abuse")
		used, took := readCPUSplit(h.cmd.Process.Pid).since(began), time.Since(t0).Seconds()
		b.Logf("CPU in the %.0f s of abuse measured, in cores: host %.2f, plugins %.2f, the test's clients %.2f, the rest (sandboxes) %.2f",
			took, used.host/took, used.plugins/took, used.test/took, (used.total-used.host-used.plugins-used.test)/took)
		stop()
		<-done
	}
	b.Logf("the attack's answers: sessions %v, disk %v, burners %v, checks %v, downloads %v", &at.sessions, &at.fill, &at.burners, &at.checks, &at.gets)
	i50, _, i99 := quantiles(idle)
	a50, _, a99 := quantiles(abuse)
	b.ReportMetric(i50/1000, "idle-p50-ms")
	b.ReportMetric(i99/1000, "idle-p99-ms")
	b.ReportMetric(a50/1000, "abuse-p50-ms")
	b.ReportMetric(a99/1000, "abuse-p99-ms")
	b.ReportMetric(a50/i50, "p50-ratio")
	b.ReportMetric(a99/i99, "p99-ratio")
}

// victimLatencies times abuseBenchCalls of the victim's trivial tool, one
// after another; each must succeed.
func victimLatencies(b *testing.B, h *abuseHost, phase string) []time.Duration {
	b.Helper()
	d := make([]time.Duration, 0, abuseBenchCalls)
	for range abuseBenchCalls {
		t0 := time.Now()
		msg := h.victimCall(context.Background())
		d = append(d, time.Since(t0))
		if msg != "" {
			b.Fatalf("the victim's call %s: %s", phase, msg)
		}
	}
	return d
}

// cpuSplit is the CPU time this machine spent, split by who spent it:
// the host process, its plugins, this test process (the clients, the
// attacker's included) and everything else (the sandboxes, mostly).
type cpuSplit struct{ host, plugins, test, total float64 }

// readCPUSplit reads the split now, in CPU-seconds since each began.
func readCPUSplit(hostPID int) cpuSplit {
	ticks := func(stat string) float64 {
		b, err := os.ReadFile(stat)
		if err != nil {
			return 0
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		// utime and stime are fields 14 and 15 of stat, 12 and 13 after the comm.
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		return (u + s) / 100
	}
	var c cpuSplit
	c.host = ticks(fmt.Sprintf("/proc/%d/stat", hostPID))
	for pid := range pluginChildren(hostPID) {
		c.plugins += ticks(fmt.Sprintf("/proc/%d/stat", pid))
	}
	c.test = ticks("/proc/self/stat")
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		for i, v := range f[1:] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, _ := strconv.ParseFloat(v, 64)
			c.total += n / 100
		}
	}
	return c
}

// since is the CPU spent from start to c.
func (c cpuSplit) since(start cpuSplit) cpuSplit {
	return cpuSplit{c.host - start.host, c.plugins - start.plugins, c.test - start.test, c.total - start.total}
}
