package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// chainGraph is a graph tool of n template nodes in a chain between its
// arg and its return.
func chainGraph(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\ndescription = \"A chain of %d templates.\"\n[[params]]\nname = \"id\"\nkind = \"text\"\nrequired = true\n[run]\ntype = \"graph\"\n", name, n)
	b.WriteString("[[run.nodes]]\nid = \"t0\"\ntype = \"arg\"\nparam = \"id\"\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "[[run.nodes]]\nid = \"t%d\"\ntype = \"template\"\ntext = \"{{t%d}}\"\n", i, i-1)
	}
	fmt.Fprintf(&b, "[[run.nodes]]\nid = \"out\"\ntype = \"return\"\nvalue = \"t%d\"\n", n)
	return b.String()
}

// nestedGetItem is a graph whose one call_tool node calls get_item.
const nestedGetItem = `name = "nested_get_item"
description = "get_item, called by a graph."
[[params]]
name = "id"
kind = "text"
required = true
[run]
type = "graph"
[[run.nodes]]
id = "id"
type = "arg"
param = "id"
[[run.nodes]]
id = "fetch"
type = "call_tool"
tool = "get_item"
args = { id = "id" }
[[run.nodes]]
id = "out"
type = "return"
value = "fetch"
`

// BenchmarkGraphOverhead measures, interleaved in one run on a host that
// sat idle first, what a graph costs: a chain of 20 template nodes against
// a chain of 1 (the difference over 19 is the cost of one node), and an
// http tool called by a graph's call_tool node against the same tool
// called directly (the cost of a nested call).
func BenchmarkGraphOverhead(b *testing.B) {
	srv := jsonServer(b)
	h := startHost(b, hostSpec{
		Config: "[http]\nallow_private = true\n",
		Tools: map[string]string{
			"get_item.toml": getItemTool(srv.URL), "nested.toml": nestedGetItem,
			"chain1.toml": chainGraph("chain1", 1), "chain20.toml": chainGraph("chain20", 20),
		},
	})
	ws := h.Dial(b)
	tools := []string{"chain1", "chain20", "get_item", "nested_get_item"}
	want := map[string]any{"chain1": "7", "chain20": "7", "get_item": "item 7", "nested_get_item": "item 7"}
	call := func(tool, id string) time.Duration {
		t0 := time.Now()
		ws.Send(map[string]any{"type": "call", "id": id, "tool": tool, "args": map[string]any{"id": "7"}})
		frames := ws.UntilEnd(id, 30*time.Second)
		took := time.Since(t0)
		if got := frames[len(frames)-1]["result"]; got != want[tool] {
			b.Fatalf("%s ended with %v, want %v\n%s", tool, frames[len(frames)-1], want[tool], h.Stderr())
		}
		return took
	}
	for _, tool := range tools {
		call(tool, "warm-"+tool)
	}
	idleBeforeMeasuring(b)
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, tool := range tools {
			took[tool] = append(took[tool], call(tool, fmt.Sprint(tool, i)))
		}
	}
	b.StopTimer()
	p50 := map[string]float64{}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-40s %10s %10s\n", "graph call (websocket)", "p50 µs", "p99 µs")
	for _, tool := range tools {
		m, _, p99 := quantiles(took[tool])
		p50[tool] = m
		fmt.Fprintf(&table, "%-40s %10.0f %10.0f\n", tool, m, p99)
	}
	perNode := (p50["chain20"] - p50["chain1"]) / 19
	nested := p50["nested_get_item"] - p50["get_item"]
	fmt.Fprintf(&table, "%-40s %10.1f\n", "per template node (20 vs 1)/19", perNode)
	fmt.Fprintf(&table, "%-40s %10.0f  (ratio %.2f, n=%d)", "nested call_tool over a direct call", nested, p50["nested_get_item"]/p50["get_item"], b.N)
	b.ReportMetric(perNode, "per-node-µs")
	b.ReportMetric(nested, "nested-call-overhead-µs")
	b.ReportMetric(p50["nested_get_item"]/p50["get_item"], "nested-ratio")
	// Printed, not logged: go test keeps only the start of a benchmark's
	// log, and this table is what `make bench` is run for.
	fmt.Printf("BenchmarkGraphOverhead, n=%d:%s\n", b.N, table.String())
}
