package sandbox

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// TestMeasureHeavyImports compares, on a rootfs with python3-numpy (make the second rootfs with
// `runsc/rootfs/build.sh build/rootfs-numpy python3-numpy`), ways to run code that imports numpy:
// a sandbox whose run imports it (cold and ready), a ready sandbox whose runner preloaded it (the
// pool's preload), and runsc restore of a checkpointed python that imported it. It prints wall
// time and CPU-seconds (the whole machine's, so run it on a quiet machine) and runs only with
// TOOLHOST_BENCH=1:
//
//	TOOLHOST_BENCH=1 go test -run TestMeasureHeavyImports -v ./runsc/
func TestMeasureHeavyImports(t *testing.T) {
	if os.Getenv("TOOLHOST_BENCH") != "1" {
		t.Skip("set TOOLHOST_BENCH=1 to measure")
	}
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	rootfs, _ := filepath.Abs(sandboxtest.EnvOr("TOOLHOST_ROOTFS_NUMPY", "../../build/rootfs-numpy"))
	if !sandboxtest.Exists(filepath.Join(rootfs, "usr/lib/python3/dist-packages/numpy")) {
		t.Skip("no numpy rootfs at " + rootfs + ": runsc/rootfs/build.sh build/rootfs-numpy python3-numpy")
	}
	base := newTestManager(t, NetworkOptions{})
	m, err := NewManager(ManagerOptions{Runtime: base.opts.Runtime, Rootfs: rootfs, StateDir: testEnv.Dir, Prefix: testEnv.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx := context.Background()
	runner, err := os.ReadFile("../../plugins/python/runner.py")
	if err != nil {
		t.Fatal(err)
	}
	lim := testLimits()
	lim.MemoryBytes, lim.CPUSeconds = 512<<20, 60
	const n = 8
	req := `{"mode":"run","code":"import numpy\ndef run():\n    return int(numpy.arange(10).sum())\n","args":{},"cpu_seconds":10}` + "\n"

	for _, preload := range []bool{false, true} {
		var prep, answer []time.Duration
		var mem []uint64
		var cpu float64
		for range n {
			args := []string{"/usr/bin/python3", "-I", "-B", "-c", string(runner)}
			if preload {
				args = append(args, "numpy")
			}
			c0, t0 := busyCPU(), time.Now()
			sb, err := m.Start(ctx, Options{Args: args, Limits: lim, Ready: "ready"})
			if err != nil {
				t.Fatal(err)
			}
			prep, cpu = append(prep, time.Since(t0)), cpu+busyCPU()-c0
			time.Sleep(300 * time.Millisecond)
			st, _ := sb.Stats()
			mem = append(mem, st.MemoryBytes)
			t1 := time.Now()
			if _, err := sb.Control.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(sb.Control).ReadString('\n')
			answer = append(answer, time.Since(t1))
			_ = sb.Destroy(ctx)
			if !strings.Contains(line, `"result": 45`) {
				t.Fatalf("answer %q, %v", line, err)
			}
		}
		t.Logf("preload=%v: start %v (%.2f CPU-s), request→answer %v, cold total %v, waiting memcg %.1f MiB",
			preload, median(prep), cpu/n, median(answer), median(prep)+median(answer), float64(slices.Max(mem))/(1<<20))
	}

	// Checkpoint and restore: a python that imported numpy reads its request on stdin.
	prog := "import numpy, sys\nsys.stdout.write('ready\\n'); sys.stdout.flush()\nsys.stdin.readline()\nprint(int(numpy.arange(10).sum()), flush=True)\n"
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	id, _ := NewID(testEnv.Prefix)
	spec, err := Spec(BundleOptions{Rootfs: rootfs, Args: []string{"/usr/bin/python3", "-I", "-B", "-c", prog},
		UID: 65534, GID: 65534, Limits: lim, CgroupsPath: "/" + id})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteBundle(bundle, spec); err != nil {
		t.Fatal(err)
	}
	o := base.opts.Runtime.Options()
	runsc := func(args ...string) *exec.Cmd {
		return exec.Command(o.Binary, append([]string{"--root=" + o.Root, "--platform=" + o.Platform, "--network=none"}, args...)...)
	}
	waitFor := func(path, want string) {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
				return
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(path)
				t.Fatalf("%s never said %q: %q", path, want, b)
			}
		}
	}
	fifo := filepath.Join(dir, "in")
	if err := exec.Command("mkfifo", fifo).Run(); err != nil {
		t.Fatal(err)
	}
	in, _ := os.OpenFile(fifo, os.O_RDWR, 0) // never written: the python waits
	defer in.Close()
	out, _ := os.Create(filepath.Join(dir, "out"))
	defer out.Close()
	cmd := runsc("run", "--detach", "--bundle", bundle, id)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, out
	if err := cmd.Run(); err != nil {
		t.Fatalf("runsc run: %v", err)
	}
	waitFor(out.Name(), "ready")
	img := filepath.Join(dir, "img")
	t0 := time.Now()
	if b, err := runsc("checkpoint", "--image-path", img, id).CombinedOutput(); err != nil {
		t.Fatalf("checkpoint: %v %s", err, b)
	}
	took := time.Since(t0)
	_ = runsc("delete", "--force", id).Run()
	if cg, err := OpenCgroups(); err == nil {
		_ = cg.Remove(id)
	}
	du, _ := exec.Command("du", "-sh", img).Output()
	var restore []time.Duration
	var cpu float64
	goFile := filepath.Join(dir, "go")
	_ = os.WriteFile(goFile, []byte("go\n"), 0o644)
	for i := range n {
		rid, _ := NewID(testEnv.Prefix)
		spec.Linux.CgroupsPath = "/" + rid
		if err := WriteBundle(bundle, spec); err != nil {
			t.Fatal(err)
		}
		stdin, _ := os.Open(goFile)
		rout := filepath.Join(dir, "out"+strconv.Itoa(i))
		o2, _ := os.Create(rout)
		c0, t1 := busyCPU(), time.Now()
		c := runsc("restore", "--detach", "--image-path", img, "--bundle", bundle, rid)
		c.Stdin, c.Stdout, c.Stderr = stdin, o2, o2
		if err := c.Run(); err != nil {
			b, _ := os.ReadFile(rout)
			t.Fatalf("restore: %v %s", err, b)
		}
		waitFor(rout, "45")
		restore, cpu = append(restore, time.Since(t1)), cpu+busyCPU()-c0
		_ = runsc("delete", "--force", rid).Run()
		if cg, err := OpenCgroups(); err == nil {
			_ = cg.Remove(rid)
		}
		stdin.Close()
		o2.Close()
	}
	t.Logf("checkpoint %v, image %s; restore until the answer: %v (%.2f CPU-s)", took.Round(time.Millisecond),
		strings.Fields(string(du))[0], median(restore), cpu/n)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Microsecond)
}

// busyCPU is the CPU-seconds the whole machine has spent not idle since boot.
func busyCPU() float64 {
	b, _ := os.ReadFile("/proc/stat")
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:]
	var busy float64
	for i, x := range f {
		v, _ := strconv.ParseFloat(x, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / 100 // USER_HZ
}
