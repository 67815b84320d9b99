package runsc

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func busy() float64 {
	b, _ := os.ReadFile("/proc/stat")
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:]
	var tot, idle float64
	for i, x := range f {
		v, _ := strconv.ParseFloat(x, 64)
		tot += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return (tot - idle) / 100
}

func TestScratchCPU(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	m := newTestManager(t, NetworkOptions{})
	ctx := context.Background()
	rp := "../plugins/python/runner.py"
	if v := os.Getenv("SCRATCH_RUNNER"); v != "" {
		rp = v
	}
	src, _ := os.ReadFile(rp)
	args := []string{"/usr/bin/python3", "-I", "-B", "-c", string(src)}
	if os.Getenv("SCRATCH_S") != "" {
		args = []string{"/usr/bin/python3", "-I", "-S", "-B", "-c", string(src)}
	}
	if os.Getenv("SCRATCH_SH") != "" {
		args = []string{"/bin/sh", "-c", "echo ready >&3; read x <&3"}
	}
	if os.Getenv("SCRATCH_PYMIN") != "" {
		args = []string{"/usr/bin/python3", "-I", "-B", "-c", "import os\nos.write(3, b'ready\\n')\nos.read(3, 10)\n"}
	}
	if os.Getenv("SCRATCH_PYFORK") != "" {
		args = []string{"/usr/bin/python3", "-I", "-B", "-c", "import os\npid = os.fork()\nif pid == 0:\n    os.write(3, b'ready\\n')\n    os.read(3, 10)\nelse:\n    os.wait()\n"}
	}
	if os.Getenv("SCRATCH_PYIMP") != "" {
		args = []string{"/usr/bin/python3", "-I", "-B", "-c", "import os, json, mmap, resource, signal, struct, sys\nos.write(3, b'ready\\n')\nos.read(3, 10)\n"}
	}
	n := 20
	var prep, cl time.Duration
	var cprep, ccl float64
	for range n {
		b0 := busy()
		t0 := time.Now()
		sb, err := m.Prepare(ctx, SandboxOptions{Args: args, Limits: testLimits(), Ready: "ready"})
		if err != nil {
			t.Fatal(err)
		}
		prep += time.Since(t0)
		b1 := busy()
		cprep += b1 - b0
		time.Sleep(200 * time.Millisecond)
		b2 := busy()
		t1 := time.Now()
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
		cl += time.Since(t1)
		time.Sleep(200 * time.Millisecond)
		ccl += busy() - b2
	}
	t.Logf("prepare: %v wall, %.3f cpu-s; close: %v wall, %.3f cpu-s (incl. 200ms idle after)", prep/time.Duration(n), cprep/float64(n), cl/time.Duration(n), ccl/float64(n))
}
