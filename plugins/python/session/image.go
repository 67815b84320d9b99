package session

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// tools are the programs of e2fsprogs and util-linux that make and mount workspace images.
type tools struct {
	mkfs, fsck, resize, mount string
}

// findTools looks for them where Debian installs them (a plugin's PATH may be short).
func findTools() (tools, error) {
	find := func(name, pkg string) (string, error) {
		for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("conversation sandboxes need %s to make their disks: install %s (apt-get install %s)", name, pkg, pkg)
	}
	var t tools
	var err error
	if t.mkfs, err = find("mkfs.ext4", "e2fsprogs"); err != nil {
		return t, err
	}
	if t.fsck, err = find("e2fsck", "e2fsprogs"); err != nil {
		return t, err
	}
	if t.resize, err = find("resize2fs", "e2fsprogs"); err != nil {
		return t, err
	}
	if t.mount, err = find("mount", "mount"); err != nil {
		return t, err
	}
	return t, nil
}

func (m *Manager) imagePath(id string) string { return filepath.Join(m.opts.Dir, id+".img") }
func (m *Manager) mountPath(id string) string { return filepath.Join(m.opts.Dir, "mnt", id) }

// runCommand runs a program of this machine (mkfs, mount) and returns its error with what it printed.
func runCommand(ctx context.Context, name string, args ...string) error {
	return runOn(ctx, nil, name, args...)
}

// imageArg is how a tool given the image by runOn names it: the descriptor it inherits as 3.
const imageArg = "/proc/self/fd/3"

// runOn runs a tool with img (when not nil) as its descriptor 3, which args name as imageArg, so
// the tool works on the file toolhost opened and not on whatever the path names by then.
func runOn(ctx context.Context, img *os.File, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	if img != nil {
		cmd.ExtraFiles = []*os.File{img}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// imageExists reports whether the session id has a workspace image, or something in its place
// (a symbolic link) that openImage will refuse.
func (m *Manager) imageExists(id string) bool {
	fi, err := os.Lstat(m.imagePath(id))
	return err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0)
}

// openImage opens the session's image for reading and writing without following a symbolic
// link, and checks that it is a plain file: everything done to the image then goes through
// this descriptor, never through its path.
func (m *Manager) openImage(id string) (*os.File, error) {
	img := m.imagePath(id)
	fd, err := unix.Open(img, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("the session's disk %s is a symbolic link, which toolhost doesn't follow: remove it", img)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the session's disk: %w", err)
	}
	f := os.NewFile(uintptr(fd), img)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("reading the session's disk: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("the session's disk %s is not a plain file: remove it", img)
	}
	return f, nil
}

// createImage makes the session's image: a file of DiskMB whose blocks are reserved on Dir's
// filesystem (reserve), formatted ext4 with no journal and no blocks reserved for root, its root
// folder the sandbox user's. It is made beside its place and renamed into it, so an image is
// either whole or not there.
func (m *Manager) createImage(ctx context.Context, id string) error {
	img := m.imagePath(id)
	tmp := img + ".new"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("making the session's disk: %w", err)
	}
	// O_EXCL made the file (a link in its place fails it); mkfs works on this descriptor, and
	// doesn't discard (that would punch the reserved blocks out again).
	err = m.reserve(f, int64(m.opts.DiskMB)<<20)
	if err == nil {
		err = runOn(ctx, f, m.tools.mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal",
			"-E", fmt.Sprintf("root_owner=%d:%d,nodiscard", sandboxUID, sandboxUID), imageArg)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, img)
	}
	if err != nil {
		_ = os.Remove(tmp)
		if errcode.Code(err) != "" {
			return err
		}
		return fmt.Errorf("making the session's disk: %w", err)
	}
	syncDir(m.opts.Dir)
	return nil
}

// reserve makes img size bytes long (never shorter) with every block of it allocated on Dir's
// filesystem (fallocate), so that the session filling its disk never fills the host's: the
// room is taken when the disk is made, or grown, or mounted again (a trim may have given blocks
// back), not when the code writes. It refuses, with errcode.DiskFull, when the filesystem would
// keep less than KeepFreeMB free after it. A filesystem without fallocate gets the check alone.
func (m *Manager) reserve(img *os.File, size int64) error {
	m.diskMu.Lock()
	defer m.diskMu.Unlock()
	var st unix.Stat_t
	if err := unix.Fstat(int(img.Fd()), &st); err != nil {
		return fmt.Errorf("reading the session's disk: %w", err)
	}
	size = max(size, st.Size)
	need := max(size-st.Blocks*512, 0)
	free, _, _, err := diskFree(m.opts.Dir)
	if err != nil {
		return fmt.Errorf("reading the free space of the session folder: %w", err)
	}
	keep := int64(m.opts.KeepFreeMB) << 20
	if need > 0 && int64(free)-need < keep {
		return m.noRoom(need, int64(free))
	}
	err = unix.Fallocate(int(img.Fd()), 0, 0, size)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
		return img.Truncate(size)
	case errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT):
		return m.noRoom(need, int64(free))
	}
	return fmt.Errorf("reserving room for the session's disk: %w", err)
}

// noRoom is the error of a disk the session folder has no room for.
func (m *Manager) noRoom(need, free int64) error {
	m.opts.Counters.NoRoom.Add(1)
	return errcode.Errorf(errcode.DiskFull,
		"the host has no room for this session's disk: it needs %s more, and the session folder %s has %s free of which %d MiB stay free for the host ([python] sessions_keep_free_mb); an admin frees space there or lowers [sessions] disk_mb",
		mib(need), m.opts.Dir, mib(max(free, 0)), m.opts.KeepFreeMB)
}

// mib writes a size in MiB, rounded up.
func mib(n int64) string { return fmt.Sprintf("%d MiB", (n+1<<20-1)>>20) }

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// mount mounts the session's image at its mount point, checking it first (a host that went down
// with it mounted leaves it unclean) and growing it to DiskMB if it was made smaller. A mount
// already there (an earlier process's) is taken as it is.
func (m *Manager) mount(ctx context.Context, id string) error {
	mnt := m.mountPath(id)
	if mounted, err := isMountPoint(mnt); err != nil {
		return err
	} else if mounted {
		return nil
	}
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return fmt.Errorf("making the session's mount point: %w", err)
	}
	f, err := m.openImage(id)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := m.check(ctx, f, false); err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() < int64(m.opts.DiskMB)<<20 {
		if err := m.grow(ctx, f); err != nil {
			m.log.Warn("growing a session's disk", "session", id, "error", err)
		}
	}
	// Its blocks reserved again (the growth's, or those a trim gave back): a session that can't
	// have them is refused, rather than writing into room the host doesn't have.
	if err := m.reserve(f, 0); err != nil {
		return err
	}
	if err := runOn(ctx, f, m.tools.mount, "-t", "ext4", "-o", "loop,nosuid,nodev,noatime", imageArg, mnt); err != nil {
		return fmt.Errorf("mounting the session's disk: %w", err)
	}
	// mkfs leaves lost+found, root's: the code can't use it and the files list needn't show it.
	_ = unix.Rmdir(filepath.Join(mnt, "lost+found"))
	return nil
}

// check runs e2fsck on an image that is not mounted: a quick look when it is clean, a repair of
// what can be repaired without asking when it is not (-p); force checks it whole.
func (m *Manager) check(ctx context.Context, img *os.File, force bool) error {
	args := []string{"-p", imageArg}
	if force {
		args = []string{"-f", "-p", imageArg}
	}
	cmd := exec.CommandContext(ctx, m.tools.fsck, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.ExtraFiles = []*os.File{img}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	// 1: errors were corrected; 2: corrected, and a reboot was advised (for a root filesystem).
	if err == nil || errors.As(err, &exitErr) && exitErr.ExitCode() <= 2 && exitErr.ExitCode() > 0 {
		return nil
	}
	return fmt.Errorf("the session's disk %s is damaged and e2fsck -p can't repair it: %w: %s", img.Name(), err, strings.TrimSpace(string(out)))
}

// grow makes an unmounted image DiskMB large, its filesystem with it, when Dir has room for it.
func (m *Manager) grow(ctx context.Context, img *os.File) error {
	if err := m.reserve(img, int64(m.opts.DiskMB)<<20); err != nil {
		return err
	}
	if err := m.check(ctx, img, true); err != nil {
		return err
	}
	return runOn(ctx, img, m.tools.resize, imageArg)
}

// unmount unmounts the session's workspace if it is mounted (its loop device goes with it) and
// removes the mount point. A mount still busy a second later is detached lazily.
func (m *Manager) unmount(id string) error {
	mnt := m.mountPath(id)
	for i := 0; ; i++ {
		err := unix.Unmount(mnt, unix.UMOUNT_NOFOLLOW)
		if err == nil {
			continue // mounted twice over: unmount again until nothing is
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // not mounted
		}
		if errors.Is(err, unix.EBUSY) && i < 50 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if errors.Is(err, unix.EBUSY) {
			if err := unix.Unmount(mnt, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
				return fmt.Errorf("unmounting the session's disk: %w", err)
			}
			m.log.Warn("a session's disk was busy: detached it", "session", id)
			break
		}
		return fmt.Errorf("unmounting the session's disk: %w", err)
	}
	if err := os.Remove(mnt); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the session's mount point: %w", err)
	}
	return nil
}

// removeImage removes the session's image (unmounted), and any loop device left on it.
func (m *Manager) removeImage(id string) error {
	img := m.imagePath(id)
	err := m.detachLoops(func(file string) bool { return file == img })
	for _, p := range []string{img, img + ".new", m.cellsMarker(id)} {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("removing the session's disk: %w", rerr))
		}
	}
	syncDir(m.opts.Dir)
	return err
}

// loopDevice is a loop device and the file behind it.
type loopDevice struct {
	dev, file string
	deleted   bool
}

// loopDevices lists the loop devices with a file behind them (/sys/block/loop*/loop).
func loopDevices() []loopDevice {
	dirs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []loopDevice
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		file := strings.TrimSpace(string(b))
		file, deleted := strings.CutSuffix(file, " (deleted)")
		out = append(out, loopDevice{dev: "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(p))), file: file, deleted: deleted})
	}
	return out
}

// detachLoops detaches the loop devices on images of this folder that match and that no mount
// of this mount namespace uses. The kernel defers the detach of one still in use elsewhere.
func (m *Manager) detachLoops(match func(image string) bool) error {
	inUse, err := mountSources()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range loopDevices() {
		if filepath.Dir(l.file) != m.opts.Dir || !strings.HasSuffix(l.file, ".img") || !match(l.file) || inUse[l.dev] {
			continue
		}
		f, err := os.OpenFile(l.dev, os.O_RDONLY, 0)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("detaching %s: %w", l.dev, err))
			}
			continue
		}
		if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
			errs = append(errs, fmt.Errorf("detaching %s from %s: %w", l.dev, l.file, err))
		}
		f.Close()
	}
	return errors.Join(errs...)
}

// mountInfo is one line of /proc/self/mountinfo: where, what, and from where.
type mountInfo struct {
	point, fstype, source string
}

func readMounts() ([]mountInfo, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	var out []mountInfo
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		out = append(out, mountInfo{point: unescapeMount(f[4]), fstype: f[sep+1], source: unescapeMount(f[sep+2])})
	}
	return out, sc.Err()
}

// isMountPoint reports whether something is mounted at dir.
func isMountPoint(dir string) (bool, error) {
	ms, err := readMounts()
	if err != nil {
		return false, err
	}
	for _, mi := range ms {
		if mi.point == dir {
			return true, nil
		}
	}
	return false, nil
}

// mountSources is the set of mounted sources (devices) of this mount namespace.
func mountSources() (map[string]bool, error) {
	ms, err := readMounts()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, mi := range ms {
		out[mi.source] = true
	}
	return out, nil
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// diskFree returns the bytes and files still free on the filesystem at dir, and its size.
func diskFree(dir string) (free, files, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Ffree, st.Blocks * uint64(st.Bsize), nil
}

// isFull says whether a filesystem with these figures is full for practical purposes: less free
// than 2 MiB and 1% of it (what ext4 keeps back for writes under way when one fails), or no file left.
func isFull(free, files, size uint64) bool {
	return free < 2<<20+size/100 || files == 0
}
