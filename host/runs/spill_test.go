package runs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// spillSome makes a run write its older events to its file.
func spillSome(t *testing.T, r *Run) {
	t.Helper()
	for range 50 {
		r.append(Event{Type: "stdout", Data: strings.Repeat("x", 100)})
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

func TestSpillFilesAndFoldersAreTheHostsOnly(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	state := filepath.Join(t.TempDir(), "state")
	sd, err := OpenSpillDir(state)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	r := testRun(t, sd, 1<<10)
	spillSome(t, r)
	if n, err := r.Spilled(); n == 0 || err != nil {
		t.Fatalf("nothing spilled: %d, %v", n, err)
	}
	for path, want := range map[string]os.FileMode{
		state:                                   os.ModeDir | 0o700,
		filepath.Join(state, RunsFolder):        os.ModeDir | 0o700,
		sd.Path():                               os.ModeDir | 0o700,
		filepath.Join(sd.Path(), "rtest.jsonl"): 0o600,
	} {
		if got := mode(t, path); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
	if filepath.Dir(sd.Path()) != filepath.Join(state, RunsFolder) {
		t.Errorf("the process's folder %s is not in %s/runs", sd.Path(), state)
	}
}

// TestASymlinkPlantedAtTheSpillFileIsNotFollowed: the file is made with
// O_EXCL|O_NOFOLLOW, so a name planted beforehand fails the create, and
// the run keeps its output in memory.
func TestASymlinkPlantedAtTheSpillFileIsNotFollowed(t *testing.T) {
	sd := testSpillDir(t)
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(sd.Path(), "rtest.jsonl")); err != nil {
		t.Fatal(err)
	}
	r := testRun(t, sd, 1<<10)
	spillSome(t, r)
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Fatalf("the run's output went through the planted symlink: the target holds %q", b)
	}
	if _, err := r.Spilled(); err == nil || !strings.Contains(err.Error(), "file exists") {
		t.Errorf("spilling over a planted name: %v; want it refused", err)
	}
	if evs, err := r.Events(0); err != nil || len(evs) != 51 {
		t.Errorf("the run's events after the refused spill: %d, %v; want all 51 from memory", len(evs), err)
	}
}

func TestARunsFolderOfSomeoneElseIsRefused(t *testing.T) {
	for name, plant := range map[string]func(t *testing.T, runs string){
		"a symbolic link": func(t *testing.T, runs string) {
			elsewhere := t.TempDir()
			if err := os.Symlink(elsewhere, runs); err != nil {
				t.Fatal(err)
			}
		},
		"a folder others may write to": func(t *testing.T, runs string) {
			if err := os.Mkdir(runs, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(runs, 0o777); err != nil {
				t.Fatal(err)
			}
		},
		"a folder of another user": func(t *testing.T, runs string) {
			if err := os.Mkdir(runs, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(runs, 65534, 65534); err != nil {
				t.Skipf("can't give a folder to another user here: %v", err)
			}
		},
		"a file": func(t *testing.T, runs string) {
			if err := os.WriteFile(runs, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			state := t.TempDir()
			runs := filepath.Join(state, RunsFolder)
			plant(t, runs)
			sd, err := OpenSpillDir(state)
			if err == nil {
				sd.Close()
				t.Fatalf("a runs folder that is %s was taken", name)
			}
			if !strings.Contains(err.Error(), runs) {
				t.Errorf("the error does not name the folder: %v", err)
			}
			t.Log(err)
		})
	}
	t.Run("a state folder others may write to", func(t *testing.T) {
		state := t.TempDir()
		if err := os.Chmod(state, 0o777); err != nil {
			t.Fatal(err)
		}
		if sd, err := OpenSpillDir(state); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
			if sd != nil {
				sd.Close()
			}
			t.Fatalf("a world-writable state folder: %v", err)
		}
	})
}

// TestOpeningRemovesLeftoversButNotTheFoldersOfLiveHosts: the folders of
// processes that are gone (after a crash) go; that of a host still
// running (here, one opened by this process) stays.
func TestOpeningRemovesLeftoversButNotTheFoldersOfLiveHosts(t *testing.T) {
	state := t.TempDir()
	live, err := OpenSpillDir(state)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	runs := filepath.Join(state, RunsFolder)
	dead := filepath.Join(runs, "999999999-0123456789ab")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "rold.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(runs, "stray")
	if err := os.Symlink("/etc", stray); err != nil {
		t.Fatal(err)
	}
	second, err := OpenSpillDir(state)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	for path, want := range map[string]bool{dead: false, stray: false, live.Path(): true, second.Path(): true} {
		if _, err := os.Lstat(path); (err == nil) != want {
			t.Errorf("%s: there %v, want %v", path, err == nil, want)
		}
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("removing a stray symlink removed what it points to: %v", err)
	}
	second.Close()
	if _, err := os.Stat(second.Path()); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", second.Path(), err)
	}
}
