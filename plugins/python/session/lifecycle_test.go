package session

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// live reports whether the session has a sandbox, and whether its workspace is mounted.
func (m *Manager) live(id string) (box, mounted bool) {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s == nil {
		return false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.box != nil, s.mounted
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIdleStopKeepsFiles: a sandbox unused for IdleStop is stopped and its workspace unmounted;
// the files stay, and the next run starts a new sandbox on them.
func TestIdleStopKeepsFiles(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{IdleStop: time.Second})
	id := testID("idle")
	runOK(t, m, id, "bash", "echo before-idle > f")
	waitFor(t, "the idle stop", func() bool { box, mounted := m.live(id); return !box && !mounted })
	if ok, _ := isMountPoint(m.mountPath(id)); ok {
		t.Errorf("the workspace is still mounted after the idle stop")
	}
	res, out, _ := runOK(t, m, id, "bash", "cat f")
	if !res.Cold || out != "before-idle\n" {
		t.Errorf("the run after an idle stop: %+v, %q; want a cold start on the same files", res, out)
	}
	// Files work on a stopped session too, mounting the workspace for the while.
	waitFor(t, "the idle stop", func() bool { box, mounted := m.live(id); return !box && !mounted })
	if b, err := m.ReadFile(context.Background(), id, "f", 100); err != nil || string(b) != "before-idle\n" {
		t.Errorf("ReadFile of a stopped session: %q, %v", b, err)
	}
}

// TestRestartFindsFilesAndReconcileRemoves: a new manager over the same folder (a host that
// restarted) finds a kept session's files; Reconcile without the id removes its image, mount
// and sandbox.
func TestRestartFindsFilesAndReconcileRemoves(t *testing.T) {
	ts := newSetup(t)
	ctx := context.Background()
	kept, dropped := testID("kept"), testID("dropped")
	first := ts.manager(t, Options{})
	runOK(t, first, kept, "bash", "echo survived > f")
	runOK(t, first, dropped, "bash", "echo gone > f")
	if _, err := New(Options{Sandboxes: first.opts.Sandboxes, Dir: ts.dir}); err == nil || !strings.Contains(err.Error(), "in use by another toolhost process") {
		t.Errorf("a second manager on the same folder: %v; want it refused", err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := isMountPoint(first.mountPath(kept)); ok {
		t.Errorf("Close left the workspace mounted")
	}

	second := ts.manager(t, Options{})
	runOK(t, second, dropped, "bash", "true") // live in the new manager: Reconcile must stop it too
	removed, err := second.Reconcile(ctx, map[string]bool{kept: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != dropped {
		t.Errorf("Reconcile removed %v; want [%s]", removed, dropped)
	}
	if b, err := second.ReadFile(ctx, kept, "f", 100); err != nil || string(b) != "survived\n" {
		t.Errorf("the kept session's file after a restart: %q, %v", b, err)
	}
	if res, out, _ := runOK(t, second, kept, "bash", "cat f"); !res.Cold || out != "survived\n" {
		t.Errorf("the kept session's first run after a restart: %+v, %q", res, out)
	}
	if _, err := os.Stat(second.imagePath(dropped)); err == nil {
		t.Errorf("the dropped session's image is still there")
	}
	if _, err := os.Stat(second.mountPath(dropped)); err == nil {
		t.Errorf("the dropped session's mount point is still there")
	}
	if box, mounted := second.live(dropped); box || mounted {
		t.Errorf("the dropped session still has a sandbox (%v) or a mount (%v)", box, mounted)
	}
	if _, err := second.ReadFile(ctx, dropped, "f", 100); errcode.Code(err) != errcode.NotFound {
		t.Errorf("a file of the dropped session: %v; want not_found", err)
	}
	for _, l := range loopDevices() {
		if l.file == second.imagePath(dropped) {
			t.Errorf("loop device %s is left on the dropped session's image", l.dev)
		}
	}
}

// TestKilledHostLeavesNoOrphan: a host killed with SIGKILL in the middle of a run leaves its
// sandbox running and its workspace mounted; the next host's Reconcile removes the sandbox,
// the mount and the loop device (none of the prefix is left), and keeps the files.
func TestKilledHostLeavesNoOrphan(t *testing.T) {
	ts := newSetup(t)
	ctx := context.Background()
	id := testID("killed")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "STATE="+ts.state, "DIR="+ts.dir, "RUNSC="+testEnv.Runsc,
		"ROOTFS="+testEnv.SessionRootfs, "PREFIX="+testEnv.Prefix, "SESSION="+id)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "mid-run\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child host said %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(ts.state, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	sweep := sandbox.SweepOptions{Runtime: rt, Prefix: testEnv.Prefix, StateDir: ts.state}
	if left, _ := sandbox.Leftovers(ctx, sweep); len(left) == 0 {
		t.Fatalf("the killed host left no sandbox: the test kills too late")
	}
	if ok, _ := isMountPoint(filepath.Join(ts.dir, "mnt", id)); !ok {
		t.Fatalf("the killed host left no mount: the test kills too late")
	}

	m := ts.manager(t, Options{})
	if _, err := m.Reconcile(ctx, map[string]bool{id: true}); err != nil {
		t.Fatal(err)
	}
	if left, err := sandbox.Leftovers(ctx, sweep); err != nil || len(left) > 0 {
		t.Errorf("after Reconcile: %v left (%v)", left, err)
	}
	if left := hostLeftovers(ts.dir); len(left) > 0 {
		t.Errorf("after Reconcile: %v left", left)
	}
	if b, err := m.ReadFile(ctx, id, "before", 100); err != nil || string(b) != "kept\n" {
		t.Errorf("the file written before the kill: %q, %v", b, err)
	}
	if res, out, _ := runOK(t, m, id, "bash", "cat before"); !res.Cold || out != "kept\n" {
		t.Errorf("the first run after the kill: %+v, %q", res, out)
	}
}

// TestDeleteDuringARunKillsIt: deleting a session kills its running code at once, and leaves
// nothing of it — no sandbox, mount, loop device, image or files — while another session's
// sandbox runs on.
func TestDeleteDuringARunKillsIt(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("delete")
	runOK(t, m, testID("other"), "bash", "true") // a sandbox of another session stays up meanwhile
	runOK(t, m, id, "bash", "echo x > f")
	started := make(chan struct{})
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		res, err = m.Run(context.Background(), id, Run{Language: "bash", Code: "echo go; sleep 300", Timeout: 10 * time.Minute,
			Stdout: func([]byte) { once.Do(func() { close(started) }) }})
	}()
	<-started
	if err := m.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run went on after its session was deleted")
	}
	if err == nil || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("the run of a deleted session: %+v, %v; want an error saying so", res, err)
	}
	if _, err := os.Stat(m.imagePath(id)); err == nil {
		t.Errorf("the image is still there")
	}
	if ok, _ := isMountPoint(m.mountPath(id)); ok {
		t.Errorf("the workspace is still mounted")
	}
	for _, l := range loopDevices() {
		if l.file == m.imagePath(id) {
			t.Errorf("loop device %s is left on the deleted session's image", l.dev)
		}
	}
	if files, err := m.Files(context.Background(), id); err != nil || len(files) != 0 {
		t.Errorf("files of a deleted session: %v, %v", files, err)
	}
}

// TestRunsOfOneSessionOverlap: runs of one session started at once share one sandbox, started
// once, and run side by side.
func TestRunsOfOneSessionOverlap(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("overlap")
	var wg sync.WaitGroup
	results := make([]Result, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each waits for all four to be there: they must run at once.
			results[i], errs[i] = m.Run(context.Background(), id, Run{Language: "bash", Timeout: time.Minute,
				Code: "touch here-$RANDOM$RANDOM; while [ $(ls here-* | wc -l) -lt 4 ]; do sleep 0.1; done"})
		}()
	}
	wg.Wait()
	cold := 0
	for i, r := range results {
		if errs[i] != nil || r.ExitCode != 0 {
			t.Errorf("run %d: %+v, %v", i, r, errs[i])
		}
		if r.Cold {
			cold++
		}
	}
	if cold != 1 {
		t.Errorf("%d of the runs started a sandbox; want 1", cold)
	}
}

// TestNetworkChangeGivesANewSandbox: a run asking for another network mode gets a new sandbox on
// the same files; packages mode without the egress proxy is refused, saying why.
func TestNetworkChangeGivesANewSandbox(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("network")
	runOK(t, m, id, "bash", "echo here > f")
	ctx := context.Background()
	var o output
	res, err := m.Run(ctx, id, o.run(Run{Language: "bash", Network: NetworkWeb, Code: "cat f; grep -c : /proc/net/dev", Timeout: time.Minute}))
	if err != nil || !res.Cold || o.stdout() != "here\n2\n" {
		t.Errorf("a run in web mode after one off: %+v, %v, %q; want a new sandbox with a network on the same files", res, err, o.stdout())
	}
	res, out, _ := runOK(t, m, id, "bash", "cat f; grep -c : /proc/net/dev")
	if !res.Cold || out != "here\n1\n" {
		t.Errorf("back to off: %+v, %q; want a new sandbox with loopback only", res, out)
	}
	if _, err := m.Run(ctx, id, Run{Language: "bash", Network: NetworkPackages, Code: "true"}); errcode.Code(err) != errcode.Unsupported {
		t.Errorf("packages mode: %v", err)
	}
}
