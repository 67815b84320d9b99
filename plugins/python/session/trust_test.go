package session

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A link planted where a session's image goes, pointing at a file outside (here a smaller ext4
// image of the test's own, which the manager would otherwise check, grow and mount), is refused
// with a clear error, and the file it points at is left as it was.
func TestPlantedImageLinkIsRefused(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{DiskMB: 16})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	outside := filepath.Join(t.TempDir(), "outside.img")
	f, err := os.Create(outside)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := runCommand(ctx, m.tools.mkfs, "-q", "-F", "-O", "^has_journal", outside); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(outside)
	if err != nil {
		t.Fatal(err)
	}
	id := testID("planted")
	if err := os.Symlink(outside, m.imagePath(id)); err != nil {
		t.Fatal(err)
	}

	_, err = m.WriteFile(ctx, id, "x.txt", strings.NewReader("hello"))
	if err == nil || !strings.Contains(err.Error(), "is a symbolic link, which toolhost doesn't follow") {
		t.Fatalf("writing a file into a session whose image is a planted link: got %v, want the link refused", err)
	}
	after, err := os.ReadFile(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || sha256.Sum256(after) != sha256.Sum256(before) {
		t.Fatalf("the file the planted link points at was changed: %d bytes before, %d after", len(before), len(after))
	}
	if mounted, err := isMountPoint(m.mountPath(id)); err != nil || mounted {
		t.Fatalf("the planted image was mounted (%v)", err)
	}
	for _, l := range loopDevices() {
		if l.file == outside {
			t.Fatalf("a loop device (%s) was set up on the file the planted link points at", l.dev)
		}
	}
	if fi, err := os.Lstat(m.imagePath(id)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the planted link should be left for the operator to look at: %v, %v", fi, err)
	}
}

// The session folder is trusted as the host's other folders are: not a link, not writable by
// others, and in no folder that others could change.
func TestSessionsDirIsTrustChecked(t *testing.T) {
	ts := newSetup(t)
	base := filepath.Dir(ts.dir)
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(base, "shared", "sessions")
	if err := os.MkdirAll(under, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(under), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{link, "is a symbolic link"},
		{open, "is writable by group or others (mode 0777)"},
		{under, "is in the folder " + filepath.Dir(under) + ", which is writable by group or others"},
	} {
		sm := ts.sandboxes(t)
		m, err := New(Options{Sandboxes: sm, Dir: c.dir, DiskMB: 16})
		if m != nil {
			_ = m.Close(context.Background())
		}
		_ = sm.Close(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a session folder %s: got %v, want an error saying it %s", c.dir, err, c.want)
		}
	}
}
