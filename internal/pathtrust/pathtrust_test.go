package pathtrust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes a private folder to build cases in: mode 0700, owned by the
// user the test runs as, under a temporary folder of the same kind.
func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asRoot skips a case that needs to give files away to another user.
func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
}

func mkdir(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

// TestCheck: each way another user could change a path is refused with a
// message naming the path (or the folder above it), what could happen
// and the command that fixes it; a private path, and one in a sticky
// folder like /tmp, are trusted.
func TestCheck(t *testing.T) {
	base := tree(t)
	ok := mkdir(t, filepath.Join(base, "ok"), 0o755)
	if err := Check(ok, "the plugin folder", "replace a plugin"); err != nil {
		t.Errorf("a folder of ours, mode 0755, in private folders: %v", err)
	}

	sticky := mkdir(t, filepath.Join(base, "tmp"), 0o777|os.ModeSticky)
	inSticky := mkdir(t, filepath.Join(sticky, "state"), 0o700)
	if err := Check(inSticky, "the state folder", "read the store"); err != nil {
		t.Errorf("a folder of ours in a sticky world-writable folder: %v", err)
	}

	open := mkdir(t, filepath.Join(base, "open"), 0o777)
	open2 := mkdir(t, filepath.Join(base, "group"), 0o775)
	inOpen := mkdir(t, filepath.Join(open, "plugins"), 0o755)

	for _, c := range []struct {
		name, path string
		want       []string
	}{
		{"writable by others", open, []string{"the plugin folder " + open, "writable by group or others (mode 0777)", "replace a plugin", "chmod go-w " + open}},
		{"writable by group", open2, []string{"mode 0775", "chmod go-w " + open2}},
		{"in a folder others can write", inOpen, []string{"the plugin folder " + inOpen + " is in the folder " + open, "mode 0777", "chmod go-w " + open}},
		{"missing", filepath.Join(base, "nothing"), []string{"the plugin folder " + filepath.Join(base, "nothing") + " can't be read"}},
	} {
		err := Check(c.path, "the plugin folder", "replace a plugin")
		if err == nil {
			t.Errorf("%s: trusted; want it refused", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to say %q", c.name, err, w)
			}
		}
	}
}

// TestCheckOwners: a path, or a folder above it, that belongs to another
// user is refused with the chown that fixes it; a link is judged by the
// folders both where it is and where it points.
func TestCheckOwners(t *testing.T) {
	asRoot(t)
	base := tree(t)
	theirs := mkdir(t, filepath.Join(base, "theirs"), 0o755)
	if err := os.Chown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	err := Check(theirs, "the sessions folder", "swap a session's image")
	if err == nil || !strings.Contains(err.Error(), "belongs to uid 4242") || !strings.Contains(err.Error(), "not to root") ||
		!strings.Contains(err.Error(), "chown root "+theirs) || !strings.Contains(err.Error(), "swap a session's image") {
		t.Errorf("a folder of another user: %v", err)
	}

	below := mkdir(t, filepath.Join(theirs, "sessions"), 0o700)
	if err := Check(below, "the sessions folder", "swap a session's image"); err == nil || !strings.Contains(err.Error(), "is in the folder "+theirs) {
		t.Errorf("a folder of ours in a folder of another user: %v", err)
	}

	// A link of ours, in our folder, pointing into their folder: what it
	// points at is checked too.
	link := filepath.Join(base, "link")
	if err := os.Symlink(below, link); err != nil {
		t.Fatal(err)
	}
	if err := Check(link, "the sessions folder", "swap a session's image"); err == nil || !strings.Contains(err.Error(), theirs) {
		t.Errorf("a link into a folder of another user: %v", err)
	}
	// And a link in their folder pointing at a folder of ours: the folder
	// holding the link is checked.
	ours := mkdir(t, filepath.Join(base, "ours"), 0o700)
	theirLink := filepath.Join(theirs, "to-ours")
	if err := os.Symlink(ours, theirLink); err != nil {
		t.Fatal(err)
	}
	if err := Check(theirLink, "the sessions folder", "swap a session's image"); err == nil || !strings.Contains(err.Error(), theirs) {
		t.Errorf("a link in a folder of another user: %v", err)
	}
}

// TestUserName: root by name, a known user by name, an unknown uid by number.
func TestUserName(t *testing.T) {
	if got := UserName(0); got != "root" {
		t.Errorf("UserName(0) = %q", got)
	}
	if got := UserName(4242); got != "uid 4242" {
		t.Errorf("UserName(4242) = %q; want uid 4242 (no such user here)", got)
	}
}
