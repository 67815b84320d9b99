package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// What BenchmarkHostsThroughHAProxy does, whatever b.N is: a python call takes a sandbox, so 300
// rounds (make bench's -benchtime 300x) would take hours.
const (
	mhWarmupCalls  = 10               // calls to each address before measuring, untimed
	mhLatencyCalls = 100              // calls timed one after another, at each address
	mhClients      = 8                // parallel clients of the throughput phases
	mhThroughputOf = 25 * time.Second // how long each throughput phase runs
)

// mhTool is the small python tool each host serves.
var mhTool = pythonTool("two", "print(1 + 1)\n    return 1 + 1", map[string]any{"seconds": 10})

// BenchmarkHostsThroughHAProxy is what HAProxy in front of several hosts on one store costs and
// gives (issue 23): three hosts on one real PostgreSQL, each with the same small python tool
// (print(1 + 1), in the real runsc sandbox), its own state and its default pool of ready
// sandboxes (size 2), and real HAProxy (examples/haproxy/haproxy.cfg, balance leastconn) in
// front of them, and a second HAProxy, the same config, in front of the first host alone.
// Callers use the editor's token of tokensConfig, over HTTP (POST /api/v1/tools/two/call).
//
//   - Latency, p50 and p99 of mhLatencyCalls calls one after another, straight to the first host
//     (the baseline) and through HAProxy to the three, and their ratios: first back to back, then
//     each call made once the pools it may go to have a sandbox ready (waited for, untimed).
//   - Throughput: mhClients clients calling back to back for mhThroughputOf, in calls a second,
//     through HAProxy to the first host alone and to the three, and their ratio; with the
//     machine's CPU in use meanwhile, in cores.
//
// All the hosts share this machine's 2 cores (and its one PostgreSQL): the 3-to-1 ratio of
// throughput here is the cost of sharing the store and the balancer, not what three hosts on
// three machines would give. Calls back to back wait on the refill of the pool, as a sandbox
// boots in longer than a call takes; behind HAProxy they are spread over three pools, which
// refill while the other hosts serve, so back to back the latency through HAProxy is lower than
// straight to one host. The calls that find a sandbox ready show what HAProxy itself adds. How
// many calls each server took is printed for each phase.
//
// The work is done once, in the first iteration of b.Loop (ns/op means nothing here); the table
// is printed, not logged, as go test keeps only the first lines of a benchmark's log.
//
// Measured on a 2-core machine of this kind (2026-12-05, -benchtime 1x, niced, with other
// builds running on it, load average 10-30; three runs, p50 / p99 in ms, the first run without
// the rows of sandboxes ready):
//
//	back to back, straight to host1      716 / 2108,  775 / 1825,  1492 / 3168
//	back to back, HAProxy to 3 hosts     406 / 1939,  250 / 2349,   380 / 3643
//	  ratio                              0.57× 0.92×, 0.32× 1.29×, 0.25× 1.15×
//	sandbox ready, straight to host1                   46 / 96,      40 / 107
//	sandbox ready, HAProxy to 3 hosts                  55 / 162,     55 / 286
//	  ratio                                          1.19× 1.69×,  1.37× 2.66×
//	8 clients, HAProxy to 1 host, calls/s     1.75,        1.48,         1.33
//	8 clients, HAProxy to 3 hosts, calls/s    1.75,        1.72,         1.64
//	  ratio                                   1.00×,       1.16×,        1.23×
//
// A call that finds a sandbox ready pays 9-15 ms at p50 for HAProxy and the hop (p99, the second
// slowest of 100, is noise at this count). Back to back, the three pools make calls through
// HAProxy 2-4× faster at p50. Under 8 clients both cores are busy (1.99-2.00 cores, the other
// builds included; about 1.2-1.5 CPU-seconds a call, mostly booting sandboxes), so throughput is
// the machine's, not the hosts': three hosts on it do no worse than one (runs 2 and 3: p50
// under load 2.4 s against 4.2-4.8 s, p99 10-12 s against 19-23 s), and HAProxy spreads the
// calls evenly. The whole benchmark takes 10-12 minutes here.
func BenchmarkHostsThroughHAProxy(b *testing.B) {
	bin := haproxyBinary(b)
	if _, err := pgtest.Bin(); err != nil {
		b.Skipf("this benchmark runs a real PostgreSQL: %v", err)
	}
	_, runscBin, rootfs := sandboxBuild(b)
	pg := pgtest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	hosts := make([]*pythonHost, 3)
	for i := range hosts {
		hosts[i] = startMultihostPythonHost(b, url, runscBin, rootfs)
	}
	front3, front1 := freePort(b), freePort(b)
	hp3 := startHAProxy(b, bin, front3, []*Host{hosts[0].Host, hosts[1].Host, hosts[2].Host})
	hp1 := startHAProxy(b, bin, front1, []*Host{hosts[0].Host})

	client := &http.Client{Transport: &http.Transport{}}
	for _, addr := range []string{hosts[0].Addr, hosts[1].Addr, hosts[2].Addr, front3, front1} {
		for range mhWarmupCalls {
			if err := mhCall(ctx, client, addr); err != nil {
				b.Fatalf("a warm-up call at %s: %v", addr, err)
			}
		}
	}
	idleBeforeMeasuring(b)

	var (
		direct, through, readyDirect, readyThrough []time.Duration
		one, three                                 mhThroughput
		shares                                     [4]string
	)
	for b.Loop() {
		if direct != nil {
			continue
		}
		direct = mhLatencies(b, ctx, client, hosts[0].Addr, "straight to host1", nil)
		served := haproxyServed(b, hp3)
		through = mhLatencies(b, ctx, client, front3, "through HAProxy to three hosts", nil)
		shares[0] = servedSince(b, hp3, served)
		readyDirect = mhLatencies(b, ctx, client, hosts[0].Addr, "straight to host1, a sandbox ready", hosts[:1])
		served = haproxyServed(b, hp3)
		readyThrough = mhLatencies(b, ctx, client, front3, "through HAProxy to three hosts, sandboxes ready", hosts)
		shares[1] = servedSince(b, hp3, served)
		served = haproxyServed(b, hp1)
		one = mhThroughputAt(ctx, front1, hosts[0].cmd.Process.Pid)
		shares[2] = servedSince(b, hp1, served)
		served = haproxyServed(b, hp3)
		three = mhThroughputAt(ctx, front3, hosts[0].cmd.Process.Pid)
		shares[3] = servedSince(b, hp3, served)
	}
	for _, tp := range []mhThroughput{one, three} {
		if len(tp.failed) > 0 {
			b.Errorf("%d calls failed in a throughput phase; the first: %s", len(tp.failed), tp.failed[0])
		}
	}
	d50, _, d99 := quantiles(direct)
	t50, _, t99 := quantiles(through)
	rd50, _, rd99 := quantiles(readyDirect)
	rt50, _, rt99 := quantiles(readyThrough)
	o50, _, o99 := quantiles(one.took)
	h50, _, h99 := quantiles(three.took)
	b.ReportMetric(d50/1000, "direct-p50-ms")
	b.ReportMetric(d99/1000, "direct-p99-ms")
	b.ReportMetric(t50/1000, "haproxy3-p50-ms")
	b.ReportMetric(t99/1000, "haproxy3-p99-ms")
	b.ReportMetric(rt50/rd50, "ready-p50-ratio")
	b.ReportMetric(rt99/rd99, "ready-p99-ratio")
	b.ReportMetric(one.perSecond(), "haproxy1-calls/s")
	b.ReportMetric(three.perSecond(), "haproxy3-calls/s")
	b.ReportMetric(three.perSecond()/one.perSecond(), "throughput-ratio")

	var table strings.Builder
	row := func(name string, p50, p99 float64, rest string) {
		fmt.Fprintf(&table, "%-46s %9.0f %9.0f %s\n", name, p50/1000, p99/1000, rest)
	}
	ratio := func(name string, p50, p99 float64) {
		fmt.Fprintf(&table, "%-46s %8.2f× %8.2f×\n", name, p50, p99)
	}
	fmt.Fprintf(&table, "\n%-46s %9s %9s %9s %6s  %s\n", "python call over HTTP", "p50 ms", "p99 ms", "calls/s", "cores", "calls each server took")
	row("back to back, straight to host1", d50, d99, "")
	row("back to back, HAProxy to 3 hosts", t50, t99, fmt.Sprintf("%18s%s", "", shares[0]))
	ratio("  ratio (HAProxy to 3 / straight)", t50/d50, t99/d99)
	row("sandbox ready, straight to host1", rd50, rd99, "")
	row("sandbox ready, HAProxy to 3 hosts", rt50, rt99, fmt.Sprintf("%18s%s", "", shares[1]))
	ratio("  ratio (HAProxy to 3 / straight)", rt50/rd50, rt99/rd99)
	row(fmt.Sprintf("%d clients, HAProxy to 1 host", mhClients), o50, o99, fmt.Sprintf("%9.2f %6.2f  %s", one.perSecond(), one.cores, shares[2]))
	row(fmt.Sprintf("%d clients, HAProxy to 3 hosts", mhClients), h50, h99, fmt.Sprintf("%9.2f %6.2f  %s", three.perSecond(), three.cores, shares[3]))
	fmt.Fprintf(&table, "%-46s %9s %9s %8.2f×\n", "  ratio (3 hosts / 1 host)", "", "", three.perSecond()/one.perSecond())
	fmt.Fprintf(&table, "(latency: %d calls one after another each; throughput: %d clients for %v each; %d and %d calls)",
		mhLatencyCalls, mhClients, mhThroughputOf, one.ok, three.ok)
	fmt.Printf("BenchmarkHostsThroughHAProxy:%s\n", table.String())
}

// startMultihostPythonHost starts a host with [store] at url, tokensConfig, and mhTool in a
// python sandbox of its own prefix and state; when it has stopped, none of its sandboxes may be
// left.
func startMultihostPythonHost(b *testing.B, url, runscBin, rootfs string) *pythonHost {
	b.Helper()
	// A short folder of its own: sandbox socket paths must stay short.
	dir, err := os.MkdirTemp("", "thmh")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	id := make([]byte, 2)
	_, _ = rand.Read(id)
	ph := &pythonHost{token: editorToken, prefix: "thmh" + hex.EncodeToString(id) + "-", stateDir: filepath.Join(dir, "py"), runscBin: runscBin}
	// Registered before the host's own Stop, so it runs after it.
	b.Cleanup(func() { ph.assertNothingLeft(b) })
	ph.Host = startHost(b, hostSpec{
		Config: tokensConfig() + fmt.Sprintf(`
[store]
url = %q

[python]
runsc = %q
rootfs = %q
state_dir = %q
sandbox_prefix = %q
work_mb = 64
`, url, runscBin, rootfs, ph.stateDir, ph.prefix),
		Tools: map[string]string{"two.toml": mhTool},
	})
	ph.url = ph.URL("")
	return ph
}

// mhCall calls mhTool at addr as the editor, and says what was wrong unless it answered 200
// with its result.
func mhCall(ctx context.Context, client *http.Client, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v1/tools/two/call", strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+editorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Result  any    `json:"result"`
		Printed string `json:"printed"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.Result != 2.0 || out.Printed != "2" {
		return fmt.Errorf("%s: %s; want 200, result 2 and printed 2", resp.Status, body)
	}
	return nil
}

// mhLatencies times mhLatencyCalls calls at addr, one after another, each made once every host
// of ready has a sandbox ready (waited for, untimed); each must succeed.
func mhLatencies(b *testing.B, ctx context.Context, client *http.Client, addr, where string, ready []*pythonHost) []time.Duration {
	b.Helper()
	d := make([]time.Duration, 0, mhLatencyCalls)
	for i := range mhLatencyCalls {
		for _, h := range ready {
			h.awaitReady(b)
		}
		t0 := time.Now()
		err := mhCall(ctx, client, addr)
		d = append(d, time.Since(t0))
		if err != nil {
			b.Fatalf("call %d %s: %v", i+1, where, err)
		}
	}
	return d
}

// mhThroughput is what a throughput phase got: how many calls succeeded in how long, each
// call's latency, and the failures.
type mhThroughput struct {
	ok     int
	took   []time.Duration
	span   time.Duration
	cores  float64 // the machine's CPU in use meanwhile
	failed []string
}

func (tp mhThroughput) perSecond() float64 { return float64(tp.ok) / tp.span.Seconds() }

// mhThroughputAt runs mhClients clients calling at addr back to back, each on a kept-alive
// connection of its own, for mhThroughputOf; a call under way then is let finish and counted.
// hostPID is a host's process, which readCPUSplit asks for.
func mhThroughputAt(ctx context.Context, addr string, hostPID int) mhThroughput {
	var (
		tp mhThroughput
		mu sync.Mutex
		wg sync.WaitGroup
	)
	cpu, t0 := readCPUSplit(hostPID), time.Now()
	until := t0.Add(mhThroughputOf)
	for range mhClients {
		wg.Go(func() {
			client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for time.Now().Before(until) && ctx.Err() == nil {
				c0 := time.Now()
				err := mhCall(ctx, client, addr)
				took := time.Since(c0)
				mu.Lock()
				if err != nil {
					tp.failed = append(tp.failed, err.Error())
				} else {
					tp.ok++
					tp.took = append(tp.took, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	tp.span = time.Since(t0)
	tp.cores = readCPUSplit(hostPID).since(cpu).total / tp.span.Seconds()
	return tp
}

// haproxyServed reads from HAProxy's stats socket how many requests each server of the
// toolhost backend has taken so far (its stot).
func haproxyServed(tb testing.TB, p *haproxyProc) map[string]int {
	tb.Helper()
	servers, err := p.servers()
	if err != nil {
		tb.Fatalf("HAProxy's show stat can't be read: %v", err)
	}
	out := map[string]int{}
	for name, cols := range servers {
		if stot, ok := cols["stot"]; ok && strings.HasPrefix(name, "host") {
			out[name], _ = strconv.Atoi(stot)
		}
	}
	return out
}

// servedSince says how many requests each server took since before, as "host1 34, host2 33".
func servedSince(tb testing.TB, p *haproxyProc, before map[string]int) string {
	tb.Helper()
	now := haproxyServed(tb, p)
	var parts []string
	for i := 1; i <= len(now); i++ {
		name := fmt.Sprintf("host%d", i)
		parts = append(parts, fmt.Sprintf("%s %d", name, now[name]-before[name]))
	}
	return strings.Join(parts, ", ")
}
