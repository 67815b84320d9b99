package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// awaitIdleStop waits until session id's sandbox was stopped (its checkpoint, if one is made,
// is made before that, under the session's lock).
func awaitIdleStop(t *testing.T, m *Manager, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		s := m.sessions[id]
		m.mu.Unlock()
		s.mu.Lock()
		stopped := s.box == nil
		s.mu.Unlock()
		if stopped {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("session %s's sandbox wasn't stopped within a minute of being idle", id)
}

// awaitCheckpoint waits until session id's sandbox was stopped with a checkpoint kept.
func awaitCheckpoint(t *testing.T, m *Manager, id string) {
	t.Helper()
	awaitIdleStop(t, m, id)
	if !m.hasCheckpoint(id) {
		t.Fatalf("session %s's sandbox was stopped without a checkpoint", id)
	}
}

// awaitPrepared waits until m has a sandbox prepared for the next resume.
func awaitPrepared(t *testing.T, m *Manager) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); m.PreparedCount() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no sandbox was prepared for the next resume")
		}
	}
}

// resumed says whether the run res resumed its session's sandbox, and fails the test when it
// didn't; but for one case. In the VMs (TOOLHOST_TEST_EMULATED_CPU, QEMU's software CPU), a
// restore was once refused because its checkpoint had a CPU feature (xsave) that the restoring
// process's CPU lacked, in the same VM: that fallback, said plainly, is what the product must do
// when the CPU changes, and it is logged there instead of failing.
func resumed(t *testing.T, res Result) bool {
	t.Helper()
	if res.Resumed {
		return true
	}
	if os.Getenv("TOOLHOST_TEST_EMULATED_CPU") != "" && strings.Contains(res.Message, "on a CPU with features this one lacks") {
		t.Logf("not resumed on this emulated CPU (the fallback): %s", res.Message)
		return false
	}
	t.Errorf("the run wasn't resumed: %+v", res)
	return false
}

// checkPrivate fails unless path has exactly mode perm.
func checkPrivate(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != perm {
		t.Errorf("%s has mode %v; want %v", path, fi.Mode().Perm(), perm)
	}
}

// TestAnIdleStopKeepsTheInterpretersNames: a conversation's sandbox stopped for being idle is
// checkpointed (private files, a manifest of their hashes), and its next run restores it: the
// names of before are there, a file written and fsynced in the last run too, the run says it
// resumed, and the checkpoint is gone. It works again after the restore (the restored agent
// talks over the socket the restore gave it), and bash runs in the resumed sandbox.
func TestAnIdleStopKeepsTheInterpretersNames(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{IdleStop: 500 * time.Millisecond})
	id := testID("resume")

	res, _, _ := cell(t, m, id, "import os\nx = 41\nwith open('/work/last.txt', 'w') as f:\n    f.write('written last')\n    f.flush()\n    os.fsync(f.fileno())\n", Run{})
	if res.ExitCode != 0 || !res.Cold {
		t.Fatalf("the first cell: %+v", res)
	}
	for round := 1; round <= 2; round++ {
		awaitCheckpoint(t, m, id)
		checkPrivate(t, m.checkpointsDir(), 0o700)
		checkPrivate(t, m.checkpointPath(id), 0o700)
		checkPrivate(t, m.manifestPath(id), 0o600)
		entries, err := os.ReadDir(m.checkpointPath(id))
		if err != nil || len(entries) == 0 {
			t.Fatalf("the checkpoint's folder: %v, %d files", err, len(entries))
		}
		for _, e := range entries {
			checkPrivate(t, filepath.Join(m.checkpointPath(id), e.Name()), 0o600)
		}
		var man manifest
		data, _ := os.ReadFile(m.manifestPath(id))
		if err := json.Unmarshal(data, &man); err != nil || man.Session != id || len(man.Files) != len(entries) || man.Bytes <= 0 {
			t.Fatalf("the manifest: %v, %+v", err, man)
		}
		t.Logf("round %d: the checkpoint holds %d files, %d KiB", round, len(entries), man.Bytes>>10)

		// A sandbox is prepared for the resume once a checkpoint is there.
		awaitPrepared(t, m)
		quick := m.opts.Counters.ResumedPrepared.Load()
		t0 := time.Now()
		res, out, errOut := cell(t, m, id, "x += 1\nprint(open('/work/last.txt').read())\nx", Run{})
		took := time.Since(t0)
		if !resumed(t, res) {
			return
		}
		if got := m.opts.Counters.ResumedPrepared.Load(); got != quick+1 {
			// On QEMU's software CPU a sandbox's process is, now and then, given fewer CPU
			// features than the checkpoint's: the prepared sandbox refuses it, and a whole
			// restore (another process) takes it. The log says so (see resumed).
			if os.Getenv("TOOLHOST_TEST_EMULATED_CPU") != "" {
				t.Logf("round %d: resumed the whole way on this emulated CPU, not into the prepared sandbox", round)
			} else {
				t.Errorf("round %d: %d resumes into the prepared sandbox, want %d", round, got, quick+1)
			}
		}
		if want := fmt.Sprint(41 + round); res.Value != want || out != "written last\n" || errOut != "" {
			t.Errorf("round %d, the cell after the idle stop: %+v, %q, %q; want the names and the file of before", round, res, out, errOut)
		}
		if res.Cold || res.Message != "" {
			t.Errorf("round %d: %+v; want a resumed sandbox, not a cold one, and nothing said", round, res)
		}
		if m.hasCheckpoint(id) {
			t.Errorf("round %d: the checkpoint is still there after the restore", round)
		}
		t.Logf("round %d: the cell that resumed took %v", round, took.Round(time.Millisecond))
	}
	if res, out, _ := runOK(t, m, id, "bash", "cat /work/last.txt; echo; id -u"); res.ExitCode != 0 || out != "written last\n65534\n" {
		t.Errorf("bash in the resumed sandbox: %+v, %q", res, out)
	}
	// The sandbox prepared for a resume is gone when its resume comes (removed meanwhile): the
	// resume restores the whole way.
	awaitCheckpoint(t, m, id)
	awaitPrepared(t, m)
	m.prep.mu.Lock()
	gone := m.prep.sb
	m.prep.mu.Unlock()
	if err := gone.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	quick, all := m.opts.Counters.ResumedPrepared.Load(), m.opts.Counters.Resumed.Load()
	if res, _, _ := cell(t, m, id, "x", Run{}); resumed(t, res) {
		if res.Value != "43" {
			t.Errorf("the cell resumed the whole way: %+v", res)
		}
		if m.opts.Counters.ResumedPrepared.Load() != quick || m.opts.Counters.Resumed.Load() != all+1 {
			t.Errorf("resumes: %d into a prepared sandbox (want %d), %d in all (want %d)", m.opts.Counters.ResumedPrepared.Load(), quick,
				m.opts.Counters.Resumed.Load(), all+1)
		}
	}
	// Stop (POST …/stop) ends the interpreter: a checkpoint made before it goes too.
	awaitCheckpoint(t, m, id)
	if err := m.Stop(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if m.hasCheckpoint(id) {
		t.Error("the checkpoint is still there after Stop")
	}
	if res, _, _ := cell(t, m, id, "'x' in globals()", Run{}); res.Resumed || res.Value != "False" {
		t.Errorf("the cell after Stop: %+v; want a new interpreter", res)
	}
}

// TestACheckpointThatCantBeRestoredStartsAfresh: a checkpoint whose file was changed, one made
// by another runsc or on another rootfs or memory (a rootfs rebuilt and runsc upgraded while the host runs too),
// one runsc can't restore, and one whose manifest is damaged are not restored: the run starts a new interpreter on the same files,
// says why the names are gone, and the checkpoint is removed.
func TestACheckpointThatCantBeRestoredStartsAfresh(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{IdleStop: 500 * time.Millisecond})
	// The rootfs's identity is read from a stand-in folder with a stamp of its own, which a case
	// rewrites as toolhost rootfs would (the sandboxes use the real rootfs).
	stampDir := t.TempDir()
	stamp := filepath.Join(stampDir, ".toolhost-rootfs")
	if err := os.WriteFile(stamp, []byte("build 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.ids.dir = stampDir
	// So is runsc's, from a stand-in file that a case replaces as an upgrade would.
	runscFile := filepath.Join(stampDir, "runsc")
	if err := os.WriteFile(runscFile, []byte("runsc 1"), 0o755); err != nil {
		t.Fatal(err)
	}
	m.ids.runscPath = runscFile
	editManifest := func(id string, edit func(*manifest)) {
		var man manifest
		data, err := os.ReadFile(m.manifestPath(id))
		if err == nil {
			err = json.Unmarshal(data, &man)
		}
		if err != nil {
			t.Fatal(err)
		}
		edit(&man)
		data, _ = json.Marshal(man)
		if err := os.WriteFile(m.manifestPath(id), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// appendTo changes one of the checkpoint's files: a byte more at its end.
	appendTo := func(id, name string) {
		f, err := os.OpenFile(filepath.Join(m.checkpointPath(id), name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte{0})
		f.Close()
	}
	cases := []struct {
		name, said string
		spoil      func(id string)
	}{
		{"a changed file", "is not what was written", func(id string) { appendTo(id, "checkpoint.img") }},
		// The guest's memory is checked beside the restore (into the sandbox prepared for it):
		// the restored sandbox goes before the run is given to it.
		{"a changed memory file", "pages.img is not what was written", func(id string) {
			awaitPrepared(t, m)
			appendTo(id, "pages.img")
		}},
		{"another runsc", "another version of runsc", func(id string) { editManifest(id, func(m *manifest) { m.Runsc = "0" + m.Runsc[1:] }) }},
		{"another rootfs", "another root filesystem", func(id string) { editManifest(id, func(m *manifest) { m.Rootfs = "0" + m.Rootfs[1:] }) }},
		{"the rootfs rebuilt while the host runs", "another root filesystem, which was rebuilt since", func(string) {
			if err := os.WriteFile(stamp, []byte("build 2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"runsc upgraded while the host runs", "another version of runsc", func(string) {
			if err := os.WriteFile(runscFile+".new", []byte("runsc 2"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(runscFile+".new", runscFile); err != nil {
				t.Fatal(err)
			}
		}},
		{"another memory limit", "of memory", func(id string) { editManifest(id, func(m *manifest) { m.MemoryBytes *= 2 }) }},
		{"another session's", "another session's", func(id string) { editManifest(id, func(m *manifest) { m.Session = testID("other") }) }},
		{"a damaged manifest", "manifest is damaged", func(id string) { os.WriteFile(m.manifestPath(id), []byte("{"), 0o600) }},
		{"a file missing", "not the ones it was made with", func(id string) { os.Remove(filepath.Join(m.checkpointPath(id), "pages_meta.img")) }},
		{"a state runsc can't read", "runsc couldn't restore", func(id string) {
			// Its hash made to match: what runsc itself says is what the run says.
			name := filepath.Join(m.checkpointPath(id), "checkpoint.img")
			if err := os.WriteFile(name, []byte("not a checkpoint"), 0o600); err != nil {
				t.Fatal(err)
			}
			sum, _, err := hashFile(name)
			if err != nil {
				t.Fatal(err)
			}
			editManifest(id, func(m *manifest) { m.Files["checkpoint.img"] = sum })
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := testID("spoilt" + string(rune('a'+i)))
			cell(t, m, id, "x = 1\nopen('/work/kept.txt', 'w').write('kept')", Run{})
			awaitCheckpoint(t, m, id)
			c.spoil(id)
			res, out, _ := cell(t, m, id, "print(open('/work/kept.txt').read())\n'x' in globals()", Run{})
			if res.Resumed || !res.Cold || res.Value != "False" || out != "kept\n" {
				t.Errorf("the run after a spoilt checkpoint: %+v, %q; want a new interpreter (x gone) on the same files", res, out)
			}
			if !strings.Contains(res.Message, "couldn't be resumed") || !strings.Contains(res.Message, c.said) ||
				!strings.Contains(res.Message, "files in /work are kept") {
				t.Errorf("the run's message %q; want it to say the sandbox couldn't be resumed, and why (%q)", res.Message, c.said)
			}
			if m.hasCheckpoint(id) {
				t.Error("the spoilt checkpoint is still there")
			}
		})
	}
}

// TestTheNamesOutliveTheManager: closing the manager (the plugin, or the host, stopping)
// checkpoints the sessions' sandboxes, and the next manager on the same folder — after its
// Reconcile — resumes them with their names; a session it doesn't keep loses its checkpoint
// with its files.
func TestTheNamesOutliveTheManager(t *testing.T) {
	ts := newSetup(t)
	sm := ts.sandboxes(t)
	first, err := New(Options{Sandboxes: sm, Dir: ts.dir, DiskMB: 16, Limits: testLimits(), KeepFreeMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	kept, dropped := testID("kept"), testID("dropped")
	cell(t, first, kept, "answer = 6 * 7", Run{})
	cell(t, first, dropped, "answer = 0", Run{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sm.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !first.hasCheckpoint(kept) || !first.hasCheckpoint(dropped) {
		t.Fatal("closing the manager left no checkpoints")
	}

	second := ts.manager(t, Options{})
	removed, err := second.Reconcile(ctx, map[string]bool{kept: true})
	if err != nil || len(removed) != 1 || removed[0] != dropped {
		t.Fatalf("Reconcile: %v, removed %v; want %s removed", err, removed, dropped)
	}
	if second.hasCheckpoint(dropped) {
		t.Error("the checkpoint of a session not kept is still there")
	}
	res, _, _ := cell(t, second, kept, "answer", Run{})
	if resumed(t, res) && res.Value != "42" {
		t.Errorf("the kept session's cell after the restart: %+v; want its names back", res)
	}
}

// TestAFileOpenAtTheCheckpoint: the interpreter holds files of /work open across the stop. One
// still there, and one the code itself removed, resume; one removed from the host while the
// sandbox was stopped can't be reopened (gVisor reopens by path, its issue 11425): the run
// starts afresh and says which file, and the other files stay.
func TestAFileOpenAtTheCheckpoint(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{IdleStop: 500 * time.Millisecond})
	for _, c := range []struct {
		name, code, hostRemoves string
		resumes                 bool
	}{
		{"kept", "f = open('/work/open.txt', 'w')\nf.write('x')\nf.flush()", "", true},
		{"removed by the code", "import os\nf = open('/work/open.txt', 'w')\nf.write('x')\nf.flush()\nos.remove('/work/open.txt')", "", true},
		{"removed meanwhile", "f = open('/work/open.txt', 'w')\nf.write('x')\nf.flush()", "open.txt", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := testID("open" + c.name)
			cell(t, m, id, "open('/work/other.txt', 'w').write('other')\nn = 5\n"+c.code, Run{})
			awaitCheckpoint(t, m, id)
			if c.hostRemoves != "" {
				if err := m.RemoveFile(context.Background(), id, c.hostRemoves); err != nil {
					t.Fatal(err)
				}
			}
			res, out, _ := cell(t, m, id, "print(open('/work/other.txt').read())\n'n' in globals()", Run{})
			if out != "other\n" || res.ExitCode != 0 {
				t.Fatalf("the run after the stop: %+v, %q", res, out)
			}
			if c.resumes && (!res.Resumed || res.Value != "True" || res.Message != "") {
				t.Errorf("the run after the stop: %+v; want the names resumed", res)
			}
			if !c.resumes && (res.Resumed || res.Value != "False" ||
				!strings.Contains(res.Message, "couldn't be resumed where it stopped (/work/open.txt, which its code had open when it stopped, is gone)")) {
				t.Errorf("the run after the stop: %+v; want a new interpreter that says which open file is gone", res)
			}
		})
	}
}

// TestNoCheckpointsStopsIdleSandboxes: with NoCheckpoints ([python] session_checkpoints =
// false), an idle stop keeps nothing of the interpreter: the next run starts a new one on the
// same files and says the names are gone.
func TestNoCheckpointsStopsIdleSandboxes(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{IdleStop: 300 * time.Millisecond, NoCheckpoints: true})
	id := testID("nocheckpoints")
	cell(t, m, id, "x = 1\nopen('/work/f.txt', 'w').write('f')", Run{})
	awaitIdleStop(t, m, id)
	if m.hasCheckpoint(id) {
		t.Error("a checkpoint was made with NoCheckpoints")
	}
	res, out, _ := cell(t, m, id, "print(open('/work/f.txt').read())\n'x' in globals()", Run{})
	if res.Resumed || !res.Cold || res.Value != "False" || out != "f\n" || !strings.Contains(res.Message, "names defined in earlier runs are gone") {
		t.Errorf("the run after the idle stop: %+v, %q; want a new interpreter on the same files, saying so", res, out)
	}
}

// TestRestoreRefusalsAreSaidPlainly: what runsc says when a restore fails (its words, as the
// pinned runsc writes them) becomes a reason the user can act on.
func TestRestoreRefusalsAreSaidPlainly(t *testing.T) {
	for _, c := range []struct{ runsc, want string }{
		{`runsc restore failed (exit status 128): starting container: restoring container "x": failed to load kernel: vfs.CompleteRestore() failed: failed to complete restore for filesystem type "9p": failed to walk "data/open.txt" of type 0100000 in mount "__no_name_0:/work": no such file or directory`,
			"/work/data/open.txt, which its code had open when it stopped, is gone"},
		{`runsc restore failed (exit status 128): starting container: restoring container "x": failed to load kernel: incompatible FeatureSet: missing features: map[avx2:{} xsave:{}]`,
			"it was checkpointed on a CPU with features this one lacks (avx2, xsave): the machine changed, or its virtual CPU did"},
		{`runsc restore failed (exit status 128): something else`,
			"runsc couldn't restore its checkpoint: runsc restore failed (exit status 128): something else"},
	} {
		if got := restoreRefused(errors.New(c.runsc)).Error(); got != c.want {
			t.Errorf("runsc said %q\ngot  %q\nwant %q", c.runsc, got, c.want)
		}
	}
}
