package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// TestSessionSandboxesShareThePlaces: session sandboxes take places of the same sandbox.Places
// as the pool's runs. With every place taken, a run stops the idle session sandbox unused
// longest (its files kept, its next run cold); with none idle (the others taken by runs in
// progress), it fails with too_many_sandboxes naming the limit and its setting, and works again
// once a place is given back. Every place is given back when the manager closes.
func TestSessionSandboxesShareThePlaces(t *testing.T) {
	ts := newSetup(t)
	places := sandbox.NewPlaces(2)
	m := ts.manager(t, Options{Places: places, PlaceWait: 300 * time.Millisecond})
	a, b, c, d := testID("place-a"), testID("place-b"), testID("place-c"), testID("place-d")
	runOK(t, m, a, "bash", "echo a > f")
	runOK(t, m, b, "bash", "echo b > f")
	if n := places.InUse(); n != 2 {
		t.Fatalf("two sessions with a sandbox hold %d places; want 2", n)
	}
	// c needs a place: a, unused longest, gives its own.
	if res, _, _ := runOK(t, m, c, "bash", "true"); !res.Cold {
		t.Errorf("c's first run: %+v; want a cold start", res)
	}
	if n := places.InUse(); n != 2 {
		t.Errorf("after c started: %d places in use; want 2 (a's sandbox stopped)", n)
	}
	// a's files stayed; its sandbox is new (and b's, now unused longest, made room for it).
	if res, out, _ := runOK(t, m, a, "bash", "cat f"); !res.Cold || out != "a\n" {
		t.Errorf("a after its sandbox was stopped to make room: %+v, %q; want a cold run and its file", res, out)
	}
	if res, out, _ := runOK(t, m, b, "bash", "cat f"); !res.Cold || out != "b\n" {
		t.Errorf("b after its sandbox was stopped to make room: %+v, %q; want a cold run and its file", res, out)
	}

	// None idle: one place a pool's run holds, the other b's run in progress.
	for _, id := range []string{a, b, c} {
		if err := m.Stop(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if n := places.InUse(); n != 0 {
		t.Fatalf("with every session sandbox stopped, %d places in use; want 0", n)
	}
	if !places.TryTake("") {
		t.Fatal("no place free")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := make(chan struct{})
	busyDone := make(chan error, 1)
	busyCtx, stopBusy := context.WithCancel(ctx)
	go func() {
		_, err := m.Run(busyCtx, b, Run{Language: "bash", Timeout: time.Minute, Code: "echo go; sleep 120",
			Stdout: func([]byte) {
				select {
				case <-started:
				default:
					close(started)
				}
			}})
		busyDone <- err
	}()
	select {
	case <-started:
	case err := <-busyDone:
		t.Fatalf("b's long run: %v", err)
	}
	_, err := m.Run(ctx, d, Run{Language: "bash", Code: "true"})
	if errcode.Code(err) != errcode.TooManySandboxes || !strings.Contains(err.Error(), "at most 2 sandboxes at once") || !strings.Contains(err.Error(), "[python.pool] max") {
		t.Errorf("a run with every place busy: %v; want too_many_sandboxes naming 2 and [python.pool] max", err)
	}
	stopBusy()
	if err := <-busyDone; !errors.Is(err, context.Canceled) {
		t.Errorf("b's long run, cancelled: %v", err)
	}
	// b is idle again: its place goes to d.
	if res, _, _ := runOK(t, m, d, "bash", "true"); !res.Cold {
		t.Errorf("d once b was idle: %+v; want a cold start", res)
	}
	places.Give("")
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := places.InUse(); n != 0 {
		t.Errorf("after Close, %d places in use; want 0", n)
	}
}

// TestAPoolRunStopsAnIdleSessionSandbox: a pool's run that finds every place taken by idle
// session sandboxes gets one at once (the idle sandbox stopped), rather than waiting for the
// sessions' idle stop.
func TestAPoolRunStopsAnIdleSessionSandbox(t *testing.T) {
	ts := newSetup(t)
	places := sandbox.NewPlaces(1)
	m := ts.manager(t, Options{Places: places})
	id := testID("pool-reclaim")
	runOK(t, m, id, "bash", "echo kept > f")
	sm := ts.sandboxes(t)
	pool, err := sandbox.NewPool(sandbox.PoolOptions{Manager: sm, Places: places})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		_ = pool.Close(ctx)
		_ = sm.Close(ctx)
	})
	sb, err := pool.Get(ctx, sandbox.Options{Args: []string{"/usr/bin/python3", "-I", "-S", "-c",
		`import os, time; os.write(3, b"ready\n"); time.sleep(600)`}, Limits: testLimits(), Ready: "ready"})
	if err != nil {
		t.Fatalf("a pool run with the one place held by an idle session sandbox: %v", err)
	}
	pool.Destroy(sb)
	if res, out, _ := runOK(t, m, id, "bash", "cat f"); !res.Cold || out != "kept\n" {
		t.Errorf("the session after: %+v, %q; want a cold run and its file", res, out)
	}
}

// smallFS makes a filesystem of mb MiB of the test's own (ext4 on a file, loop-mounted) for its
// session folder, so that filling it fills nothing else; it is unmounted when the test ends.
func smallFS(t *testing.T, ts testSetup, mb int) string {
	t.Helper()
	base := filepath.Dir(ts.dir)
	img, mnt := filepath.Join(base, "fs.img"), filepath.Join(base, "fs")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(int64(mb) << 20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() {
		for i := 0; ; i++ {
			err := unix.Unmount(mnt, 0)
			if err == nil || errors.Is(err, unix.EINVAL) {
				break
			}
			if i == 100 {
				t.Errorf("unmounting the test's filesystem: %v", err)
				_ = unix.Unmount(mnt, unix.MNT_DETACH)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = os.Remove(img)
	})
	return mnt
}

// freeMB is the free MiB of the filesystem at dir.
func freeMB(t *testing.T, dir string) int64 {
	t.Helper()
	free, _, _, err := diskFree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return int64(free >> 20)
}

// TestDiskIsReservedAndRefusedPastTheRoom: on a session folder of a small filesystem of its
// own, each session's disk reserves its DiskMB whole when made; once the next one would leave
// less than KeepFreeMB free, making it (by an upload, or by a run) fails with disk_full naming
// the settings, and the sessions made before keep working. Filling every disk then leaves the
// folder's KeepFreeMB free: a full disk is its session's error (disk_full, or the run stopped
// for "disk"), never the host's. Deleting a session gives its room back.
func TestDiskIsReservedAndRefusedPastTheRoom(t *testing.T) {
	ts := newSetup(t)
	fs := smallFS(t, ts, 96)
	ts.dir = filepath.Join(fs, "sessions")
	const diskMB, keepMB = 16, 16
	m := ts.manager(t, Options{DiskMB: diskMB, KeepFreeMB: keepMB})
	ctx := context.Background()
	var made []string
	var refused error
	for i := range 10 {
		id := testID(fmt.Sprintf("room%d", i))
		_, err := m.WriteFile(ctx, id, "first", strings.NewReader("kept\n"))
		if err != nil {
			refused = err
			break
		}
		made = append(made, id)
		fi, err := os.Stat(m.imagePath(id))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Blocks*512 < int64(diskMB)<<20 {
			t.Errorf("session %d's disk has %d bytes allocated; want its %d MiB reserved", i, st.Blocks*512, diskMB)
		}
	}
	t.Logf("%d sessions made, then: %v", len(made), refused)
	if len(made) < 2 || len(made) == 10 {
		t.Fatalf("%d sessions of %d MiB made on a 96 MiB filesystem keeping %d MiB; want a few, then a refusal", len(made), diskMB, keepMB)
	}
	if errcode.Code(refused) != errcode.DiskFull || !strings.Contains(refused.Error(), "sessions_keep_free_mb") ||
		!strings.Contains(refused.Error(), "disk_mb") || !strings.Contains(refused.Error(), "no room for this session's disk") {
		t.Errorf("the session past the room: %v; want disk_full naming sessions_keep_free_mb and disk_mb", refused)
	}
	if free := freeMB(t, fs); free < keepMB {
		t.Errorf("the folder has %d MiB free after the sessions were made; want at least %d", free, keepMB)
	}
	// A run in a new session is refused the same way, and leaves nothing behind.
	extra := testID("room-run")
	if _, err := m.Run(ctx, extra, Run{Language: "bash", Code: "true"}); errcode.Code(err) != errcode.DiskFull {
		t.Errorf("a run in a session past the room: %v; want disk_full", err)
	}
	if m.imageExists(extra) {
		t.Error("a refused session left a disk behind")
	}
	if n := m.opts.Counters.NoRoom.Load(); n != 2 {
		t.Errorf("%d disks counted as refused for lack of room; want 2", n)
	}
	// Every disk filled: by code in the first, by uploads in the others.
	res, _, _ := runOK(t, m, made[0], "bash", "dd if=/dev/zero of=/work/fill bs=1M 2>/dev/null")
	if res.Stopped != "disk" {
		t.Errorf("code filling its disk: %+v; want stopped for disk", res)
	}
	for _, id := range made[1:] {
		if _, err := m.WriteFile(ctx, id, "fill", strings.NewReader(strings.Repeat("z", (diskMB+4)<<20))); errcode.Code(err) != errcode.DiskFull {
			t.Errorf("an upload larger than the disk: %v; want disk_full", err)
		}
	}
	if free := freeMB(t, fs); free < keepMB {
		t.Errorf("with every session's disk full, the folder has %d MiB free; want at least %d", free, keepMB)
	}
	// The full sessions go on.
	for _, id := range made {
		if _, err := m.ReadFile(ctx, id, "first", 1<<10); err != nil {
			t.Errorf("reading a file of a full session: %v", err)
		}
	}
	if _, out, _ := runOK(t, m, made[0], "bash", "rm fill && echo room > more && cat more"); out != "room\n" {
		t.Errorf("the full session once it freed room: %q", out)
	}
	// Deleting a session gives its room to the next.
	if err := m.Delete(ctx, made[len(made)-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteFile(ctx, extra, "first", strings.NewReader("now\n")); err != nil {
		t.Errorf("a session made after one was deleted: %v", err)
	}
}
