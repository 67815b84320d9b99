package session

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestMeasureSessionRootfs prints what the session rootfs's scientific stack costs a warm session
// (TOOLHOST_MEASURE=1; no assertions on time or memory): the sandbox's memory (its memcg's usage)
// after print(1) cells, then after the first `import pandas` (and its time), then after numpy
// and matplotlib.pyplot too.
func TestMeasureSessionRootfs(t *testing.T) {
	if os.Getenv("TOOLHOST_MEASURE") == "" {
		t.Skip("set TOOLHOST_MEASURE=1 to measure")
	}
	ts := newSetup(t)
	m := ts.manager(t, Options{DiskMB: 64, Limits: testLimits()})
	ctx := context.Background()
	id := testID("measure-rootfs")
	run := func(code string) time.Duration {
		t.Helper()
		t0 := time.Now()
		res, err := m.Run(ctx, id, Run{Language: "python", Code: code, Timeout: 2 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%q: %+v, %v", code, res, err)
		}
		return time.Since(t0)
	}
	memory := func() float64 {
		t.Helper()
		m.mu.Lock()
		s := m.sessions[id]
		m.mu.Unlock()
		s.mu.Lock()
		b := s.box
		s.mu.Unlock()
		if b == nil {
			t.Fatal("the session has no sandbox")
		}
		time.Sleep(time.Second) // what the cell freed settles
		st, err := b.sb.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return float64(st.MemoryBytes) / (1 << 20)
	}
	for range 5 {
		run("print(1)")
	}
	t.Logf("session rootfs %s: memcg usage after 5 cells of print(1): %.1f MiB", testEnv.SessionRootfs, memory())
	if res, err := m.Run(ctx, id, Run{Language: "python", Code: "import importlib.util\nimportlib.util.find_spec('pandas') is not None", Timeout: time.Minute}); err != nil || res.Value != "True" {
		t.Skipf("no pandas on this rootfs (a lean one, measured for comparison): %+v %v", res, err)
	}
	d := run("import pandas")
	t.Logf("first `import pandas` in the live interpreter: %v; memcg usage after it: %.1f MiB", d, memory())
	run("print(1)")
	t.Logf("after one more print(1): %.1f MiB", memory())
	d = run("import numpy, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot")
	t.Logf("then `import numpy, matplotlib.pyplot` (Agg): %v; memcg usage: %.1f MiB", d, memory())
	d = run("import pandas; pandas.DataFrame({'a': range(1000)})['a'].sum()")
	t.Logf("a warm pandas cell afterwards: %v", d)
}
