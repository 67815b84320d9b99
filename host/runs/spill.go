package runs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SpillDir is one host process's private folder for the output runs move
// out of memory: <state_dir>/runs/<pid>-<random>. The runs folder is made
// 0700 and refused when it is a symbolic link, belongs to another user, or
// others may write to it; each process makes its own folder in it, 0700,
// and holds a lock on it while it lives, so the folders of processes that
// are gone are known and removed, and those of hosts still running (a
// `toolhost check` beside the service, two hosts on one state folder) are
// left alone. Files are made only inside the folder held open, with
// O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600: a name planted beforehand, a
// symbolic link above all, makes the create fail instead of being
// followed.
type SpillDir struct {
	path string
	dir  *os.File // the process's folder, open and locked
}

// RunsFolder is the name of the folder under the state folder where the
// output of runs is kept.
const RunsFolder = "runs"

// OpenSpillDir prepares <stateDir>/runs and a folder of this process in it,
// after removing the folders of processes that are gone.
func OpenSpillDir(stateDir string) (*SpillDir, error) {
	if err := checkStateDir(stateDir); err != nil {
		return nil, err
	}
	parentPath := filepath.Join(stateDir, RunsFolder)
	if err := unix.Mkdir(parentPath, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("the folder for the output of runs, %s, can't be made: %w", parentPath, err)
	}
	parent, err := openDir(unix.AT_FDCWD, parentPath)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	if err := checkPrivate(parent, parentPath); err != nil {
		return nil, err
	}
	// Hold the runs folder while sweeping and making ours: another host
	// starting at the same time neither removes our folder before we lock
	// it nor sweeps beside us.
	if err := flock(parent, unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("the folder for the output of runs, %s, can't be locked: %w", parentPath, err)
	}
	defer func() { _ = flock(parent, unix.LOCK_UN) }()
	removeLeftovers(parent, parentPath)

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("no random name for the folder of run output: %w", err)
	}
	name := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	path := filepath.Join(parentPath, name)
	if err := unix.Mkdirat(int(parent.Fd()), name, 0o700); err != nil {
		return nil, fmt.Errorf("the folder for the output of runs, %s, can't be made: %w", path, err)
	}
	dir, err := openDir(int(parent.Fd()), name)
	if err == nil {
		if err = flock(dir, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			dir.Close()
			err = fmt.Errorf("the folder for the output of runs, %s, can't be locked: %w", path, err)
		}
	}
	if err != nil {
		_ = unix.Unlinkat(int(parent.Fd()), name, unix.AT_REMOVEDIR)
		return nil, err
	}
	return &SpillDir{path: path, dir: dir}, nil
}

// Path is the process's folder.
func (s *SpillDir) Path() string { return s.path }

// create makes a new file of the folder, for this process only.
func (s *SpillDir) create(name string) (*os.File, error) {
	if strings.ContainsRune(name, '/') || name == "" || name == "." || name == ".." {
		return nil, fmt.Errorf("%q is not a file name", name)
	}
	fd, err := unix.Openat(int(s.dir.Fd()), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: filepath.Join(s.path, name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(s.path, name)), nil
}

// remove removes a file of the folder.
func (s *SpillDir) remove(name string) {
	_ = unix.Unlinkat(int(s.dir.Fd()), name, 0)
}

// Close removes the folder and all in it; the lock goes with it.
func (s *SpillDir) Close() error {
	err := os.RemoveAll(s.path)
	_ = s.dir.Close()
	return err
}

// checkStateDir makes the state folder if it is missing and refuses one
// that others than its owner may write to, or that belongs to someone
// other than this user or root: whoever can write there can swap the runs
// folder.
func checkStateDir(stateDir string) error {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("the state folder %s can't be made: %w ([server] state_dir names it)", stateDir, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(stateDir, &st); err != nil {
		return fmt.Errorf("the state folder %s can't be read: %w", stateDir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("the state folder %s is not a folder ([server] state_dir names it)", stateDir)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		return fmt.Errorf("the state folder %s belongs to user %d, not to the host's user (%d) or root; give it to the host's user (chown) or name another with [server] state_dir", stateDir, st.Uid, uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("others than its owner may write to the state folder %s (mode %04o); make it writable by its owner only: chmod go-w %s", stateDir, st.Mode&0o7777, stateDir)
	}
	return nil
}

// openDir opens a folder without following a symbolic link at its last
// step.
func openDir(at int, name string) (*os.File, error) {
	fd, err := unix.Openat(at, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s is not a folder but a symbolic link or a file; the host makes that folder itself: remove what is there", name)
		}
		return nil, fmt.Errorf("the folder %s can't be opened: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// checkPrivate refuses a folder that is not this user's or that others
// may write to, and closes it to others if they may read it.
func checkPrivate(f *os.File, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("the folder %s can't be read: %w", path, err)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("the folder for the output of runs, %s, belongs to user %d, not to the host's user (%d): someone else made it; remove it and the host makes its own", path, st.Uid, uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("others may write to the folder for the output of runs, %s (mode %04o): someone else may have made it; remove it and the host makes its own", path, st.Mode&0o7777)
	}
	if st.Mode&0o7777 != 0o700 {
		if err := unix.Fchmod(int(f.Fd()), 0o700); err != nil {
			return fmt.Errorf("the folder for the output of runs, %s, can't be closed to others: %w", path, err)
		}
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// removeLeftovers removes what is in the runs folder but the folders of
// processes that still hold them. Called with the runs folder locked.
func removeLeftovers(parent *os.File, parentPath string) {
	names, err := parent.Readdirnames(-1)
	if err != nil && !errors.Is(err, io.EOF) {
		return
	}
	for _, name := range names {
		dir, err := openDir(int(parent.Fd()), name)
		if err != nil {
			// Not a folder (or not one we can open): nothing of ours.
			_ = unix.Unlinkat(int(parent.Fd()), name, 0)
			continue
		}
		err = flock(dir, unix.LOCK_EX|unix.LOCK_NB)
		dir.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue // a live host's
		}
		_ = os.RemoveAll(filepath.Join(parentPath, name))
	}
}
