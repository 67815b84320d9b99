package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/runsc/sandbox"
)

// readySpares waits until m has n ready sandboxes and returns their names.
func readySpares(t *testing.T, m *Manager, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		m.spare.mu.Lock()
		var names []string
		for _, sp := range m.spare.ready {
			names = append(names, sp.name)
		}
		m.spare.mu.Unlock()
		if len(names) == n {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ready sandboxes after 2 minutes; want %d", len(names), n)
		}
	}
}

// spareFiles lists the ready sandboxes' disks and mount points in m's folder.
func spareFiles(t *testing.T, m *Manager) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{m.opts.Dir, filepath.Join(m.opts.Dir, "mnt")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), sparePrefix) {
				out = append(out, filepath.Join(filepath.Base(dir), e.Name()))
			}
		}
	}
	return out
}

// TestANewSessionTakesAReadySandbox: with Options.Ready, a sandbox waits started on a blank disk
// with its interpreter; a new session's first run takes it (no cold start), and its files,
// names and cell numbers are the session's own from there: the disk is the session's after an
// idle stop and a delete, another is made ready for the next session, and two sessions never
// share one. A session of another network starts its own. Ready sandboxes take a place only once
// handed out, and none is started while no place is free.
func TestANewSessionTakesAReadySandbox(t *testing.T) {
	ts := newSetup(t)
	places := sandbox.NewPlaces(4)
	m := ts.manager(t, Options{Ready: 1, Places: places})
	first := readySpares(t, m, 1)
	if places.InUse() != 0 {
		t.Errorf("a ready sandbox holds %d places; want none until it is handed out", places.InUse())
	}

	a := testID("ready-a")
	started := time.Now()
	res, out, errOut := cell(t, m, a, "import os\nprint(os.getcwd(), os.listdir('.'))\nopen('mine.txt', 'w').write('a')\nx = 41\n1/0", Run{Owner: "alice"})
	t.Logf("the first run of a new session with a ready sandbox took %s (the code %s)", time.Since(started).Round(time.Millisecond), res.Took.Round(time.Millisecond))
	if res.Cold || out != "/work []\n" || !strings.Contains(errOut, `"<cell 1>"`) {
		t.Errorf("the first run of a new session: %+v, %q, %q; want a ready sandbox (not cold) on an empty /work, its cell the first", res, out, errOut)
	}
	if places.Held("alice") != 1 {
		t.Errorf("the session's owner holds %d places; want the ready sandbox's one", places.Held("alice"))
	}
	if b, err := os.ReadFile(filepath.Join(m.mountPath(a), "mine.txt")); err != nil || string(b) != "a" {
		t.Errorf("the session's file on its own mount: %q %v", b, err)
	}
	if _, err := os.Stat(m.imagePath(a)); err != nil {
		t.Errorf("the session's disk: %v", err)
	}
	if res, _, _ := cell(t, m, a, "x + 1", Run{Owner: "alice"}); res.Value != "42" {
		t.Errorf("a name of the session's first cell: %+v; want 42", res)
	}

	// Another is made ready for the next session: a sandbox and a disk of their own.
	second := readySpares(t, m, 1)
	if second[0] == first[0] {
		t.Fatalf("the ready sandbox after one was taken is still %s", first[0])
	}
	if got := spareFiles(t, m); len(got) != 2 {
		t.Errorf("ready sandboxes' disks and mounts: %v; want the one ready sandbox's", got)
	}
	b := testID("ready-b")
	res, out, _ = cell(t, m, b, "import os\nprint(os.listdir('.'))\n'x' in globals()", Run{Owner: "bob"})
	if res.Cold || out != "[]\n" || res.Value != "False" {
		t.Errorf("the second new session: %+v, %q; want the next ready sandbox, with none of the first's files or names", res, out)
	}
	if n := m.opts.Counters.ReadyTaken.Load(); n != 2 {
		t.Errorf("ready sandboxes taken, counted: %d; want 2", n)
	}

	// A session whose first run has the network on starts its own; the ready one stays.
	third := readySpares(t, m, 1)
	if n := m.ReadyCount(); n != 1 {
		t.Errorf("ReadyCount: %d; want 1", n)
	}
	w := testID("ready-web")
	if res, _, _ := cell(t, m, w, "print(1)", Run{Owner: "carol", Network: NetworkWeb}); !res.Cold {
		t.Errorf("a new session with the network on: %+v; want a sandbox of its own", res)
	}
	if got := readySpares(t, m, 1); got[0] != third[0] {
		t.Errorf("the ready sandbox after a new web session: %v; want %s still", got, third[0])
	}

	// The disk is the session's: after a stop, its files are there and its names are gone.
	ctx := context.Background()
	if err := m.Stop(ctx, a); err != nil {
		t.Fatal(err)
	}
	res, out, _ = cell(t, m, a, "print(open('mine.txt').read())\n'x' in globals()", Run{Owner: "alice"})
	if !res.Cold || out != "a\n" || res.Value != "False" || !strings.Contains(res.Message, "names defined in earlier runs are gone") {
		t.Errorf("the session's run after a stop: %+v, %q; want a new sandbox on its files", res, out)
	}
	if err := m.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.imagePath(a)); !os.IsNotExist(err) {
		t.Errorf("the deleted session's disk: %v; want it gone", err)
	}

	// No place free: no ready sandbox is started, and one is once a place is given back.
	if err := m.Stop(ctx, b); err != nil {
		t.Fatal(err)
	}
	places.SetMax(2) // web and the ready one's next owner
	c := testID("ready-c")
	cell(t, m, c, "print(1)", Run{Owner: "dave"})
	if places.Free() != 0 || m.needSpare() {
		t.Errorf("%d places free, a ready sandbox wanted: %v; want none free, none wanted", places.Free(), m.needSpare())
	}
	time.Sleep(2 * spareLook)
	if got := spareFiles(t, m); len(got) != 0 {
		t.Errorf("ready sandboxes with every place taken: %v; want none", got)
	}
	if err := m.Stop(ctx, w); err != nil {
		t.Fatal(err)
	}
	readySpares(t, m, 1)
	// A ready sandbox goes once the places fill up.
	places.SetMax(1)
	for deadline := time.Now().Add(time.Minute); len(spareFiles(t, m)) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a ready sandbox with no place free, a minute on: %v; want it gone", spareFiles(t, m))
		}
	}
}

// TestReadySandboxesLeaveNothing: closing the manager removes its ready sandboxes (disks, mounts,
// sandboxes), and Reconcile removes those of a process that is gone, not the live ones.
func TestReadySandboxesLeaveNothing(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{Ready: 2})
	live := readySpares(t, m, 2)
	// What a killed process left: a ready sandbox's disk, mounted.
	ctx := context.Background()
	dead := sparePrefix + "0123456789abcdef"
	if err := m.createImage(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if err := m.mount(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reconcile(ctx, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	got := spareFiles(t, m)
	for _, f := range got {
		if strings.Contains(f, dead) {
			t.Errorf("a dead process's ready sandbox after Reconcile: %s is still there", f)
		}
	}
	if len(got) != 4 || !strings.Contains(strings.Join(got, " "), live[0]) || !strings.Contains(strings.Join(got, " "), live[1]) {
		t.Errorf("the live ready sandboxes after Reconcile: %v; want %v's disks and mounts", got, live)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := spareFiles(t, m); len(got) != 0 {
		t.Errorf("after Close: %v; want no ready sandbox's disk or mount", got)
	}
	if left := hostLeftovers(m.opts.Dir); len(left) != 0 {
		t.Errorf("after Close: %v", left)
	}
}

// TestANewSessionWaitsForTheReadySandboxUnderWay: a new session that finds none ready while one
// is being made takes that one rather than starting a sandbox of its own beside it.
func TestANewSessionWaitsForTheReadySandboxUnderWay(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{Ready: 1})
	readySpares(t, m, 1)
	if res, _, _ := cell(t, m, testID("under-way-1"), "1", Run{}); res.Cold {
		t.Fatalf("the first new session: %+v; want the ready sandbox", res)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		m.spare.mu.Lock()
		making := m.spare.making
		m.spare.mu.Unlock()
		if making > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no ready sandbox was being made after one was taken")
		}
	}
	res, out, _ := cell(t, m, testID("under-way-2"), "print(1)", Run{})
	if res.Cold || out != "1\n" {
		t.Errorf("a new session while the next ready sandbox was being made: %+v, %q; want that one, not a cold start", res, out)
	}
}

// TestAReadySandboxUnderASharedMount: on a machine whose mounts are shared (systemd makes every
// mount shared), a ready sandbox is still handed over: its disk is bound at the session's mount
// point, not moved (a move is refused under a shared parent).
func TestAReadySandboxUnderASharedMount(t *testing.T) {
	ts := newSetup(t)
	if err := os.MkdirAll(ts.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(ts.dir, ts.dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(ts.dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's shared mount: %v", err)
		}
	})
	if err := unix.Mount("", ts.dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	m := ts.manager(t, Options{Ready: 1})
	readySpares(t, m, 1)
	id := testID("shared")
	res, out, _ := cell(t, m, id, "open('f', 'w').write('x')\nimport os\nprint(os.listdir('.'))", Run{})
	if res.Cold || out != "['f']\n" {
		t.Errorf("a new session under a shared mount: %+v, %q; want the ready sandbox", res, out)
	}
	if b, err := os.ReadFile(filepath.Join(m.mountPath(id), "f")); err != nil || string(b) != "x" {
		t.Errorf("the file on the session's mount point: %q %v", b, err)
	}
	if got := spareFiles(t, m); len(got) > 2 {
		t.Errorf("ready sandboxes' disks and mount points: %v; want the next one's alone", got)
	}
	if err := m.Stop(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if res, out, _ := cell(t, m, id, "print(open('f').read())", Run{}); !res.Cold || out != "x\n" {
		t.Errorf("after a stop: %+v, %q; want a new sandbox on the session's disk", res, out)
	}
}
