package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/toolhost/toolhost/internal/cgroupfs"
	"golang.org/x/sys/unix"
)

// mountWork mounts a fresh tmpfs of sizeBytes (and at most inodes files) on dir, owned by uid:gid,
// so a sandbox's /work is empty and capped on the host side.
func mountWork(dir string, sizeBytes int64, inodes int, uid, gid uint32) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the work folder: %w", err)
	}
	data := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", sizeBytes, inodes, uid, gid)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting a %d MiB tmpfs on the work folder: %w", sizeBytes>>20, err)
	}
	return nil
}

// mountLaterWork makes dir the mount point of a prepared sandbox's /work (Manager.Prepare): an
// empty, read-only tmpfs made shared, so that what Resume binds onto it later reaches the
// sandbox's gofer, which bound dir into its own mount namespace as a slave ("rslave" in the
// spec) when the sandbox was created.
func mountLaterWork(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the work folder: %w", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "size=4k,nr_inodes=1,mode=0700"); err != nil {
		return fmt.Errorf("mounting the work folder's mount point: %w", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("sharing the work folder's mount point: %w", err)
	}
	return nil
}

// unmountAll detaches every mount at or below dir, deepest first. Nothing mounted is not an error.
func unmountAll(dir string) error {
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", points[i], err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	dir = strings.TrimSuffix(dir, "/")
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := cgroupfs.UnescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, sc.Err()
}

// workFree returns the bytes still free on the filesystem at dir.
func workFree(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("reading the work folder's free space: %w", err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
