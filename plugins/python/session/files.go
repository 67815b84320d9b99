package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/internal/closethen"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// resolve confines every path of a file operation to the workspace: no step out of it (..,
// absolute paths, a symbolic link pointing out, /proc's magic links), no symbolic link at all,
// no other mount.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// uploadPrefix starts the names of the files WriteFile writes before it renames them in place.
const uploadPrefix = ".toolhost-upload-"

// cleanPath checks a path the user gave, relative to /work ("/work/…" is taken as relative
// too), and returns it cleaned; "" is the workspace itself.
func cleanPath(p string) (string, error) {
	orig := p
	if strings.ContainsRune(p, 0) {
		return "", errcode.New(errcode.BadPath, "a path can't hold a NUL character")
	}
	if p == "/work" || strings.HasPrefix(p, "/work/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "/work"), "/")
	}
	if strings.HasPrefix(p, "/") {
		return "", errcode.Errorf(errcode.BadPath, "%q is an absolute path: give a path in /work, relative to it (like data/input.csv)", orig)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", errcode.Errorf(errcode.BadPath, "%q steps out of its folder (..): give a path in /work, relative to it", orig)
		}
	}
	c := path.Clean(p)
	if c == "." {
		return "", nil
	}
	return c, nil
}

// fileError turns an error of a file operation on p into the error the user reads.
func fileError(p string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return errcode.Errorf(errcode.NotFound, "there is no file %q in the session's /work", p)
	case errors.Is(err, unix.ELOOP):
		return errcode.Errorf(errcode.BadPath, "%q goes through a symbolic link: give the path of the file itself", p)
	case errors.Is(err, unix.EXDEV):
		return errcode.Errorf(errcode.BadPath, "%q leads out of the session's /work", p)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return errcode.Errorf(errcode.DiskFull, "the session's disk is full: remove files to make room")
	case errors.Is(err, unix.EISDIR):
		return errcode.Errorf(errcode.BadPath, "%q is a folder", p)
	case errors.Is(err, unix.ENAMETOOLONG):
		return errcode.Errorf(errcode.BadPath, "%q is too long a path", p)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// openFiles readies the session's workspace for a file operation (making it when create is
// set) and returns its root, open, and the func that ends the operation.
func (m *Manager) openFiles(ctx context.Context, id string, create bool) (*os.File, func(), error) {
	if err := checkID(id); err != nil {
		return nil, nil, err
	}
	s, err := m.lockSession(id)
	if err != nil {
		return nil, nil, err
	}
	if err := m.ready(ctx, s, create); err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	s.active++
	s.lastUsed = time.Now()
	s.mu.Unlock()
	root, err := m.openRoot(id)
	if err != nil {
		m.release(s)
		return nil, nil, err
	}
	return root, func() { root.Close(); m.release(s) }, nil
}

// openRoot opens the workspace's root folder, after checking that it is the mounted image, not
// the folder under it.
func (m *Manager) openRoot(id string) (*os.File, error) {
	mnt := m.mountPath(id)
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the session's workspace: %w", err)
	}
	var st, parent unix.Stat_t
	err = unix.Fstat(fd, &st)
	if err == nil {
		err = unix.Stat(filepath.Dir(mnt), &parent)
	}
	if err == nil && st.Dev == parent.Dev {
		err = errors.New("it is not mounted")
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening the session's workspace: %w", err)
	}
	return os.NewFile(uintptr(fd), mnt), nil
}

// openBeneath opens p below root, confined.
func openBeneath(root *os.File, p string, flags int, mode uint32) (int, error) {
	if p == "" {
		p = "."
	}
	for {
		fd, err := unix.Openat2(int(root.Fd()), p, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve})
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue // a rename raced the lookup: RESOLVE_BENEATH asks to try again
		}
		return fd, err
	}
}

// Files lists the session's /work: every folder and regular file, by path relative to it, in
// order. A session with no files yet has an empty list.
func (m *Manager) Files(ctx context.Context, id string) ([]File, error) {
	root, done, err := m.openFiles(ctx, id, false)
	if errors.Is(err, errNoWorkspace) {
		return []File{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer done()
	out := []File{}
	queue := []string{""}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dir := queue[0]
		queue = queue[1:]
		fd, err := openBeneath(root, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			continue // gone or replaced meanwhile: the code may change its files as we list them
		}
		f := os.NewFile(uintptr(fd), dir)
		names, _ := f.Readdirnames(-1)
		slices.Sort(names)
		for _, name := range names {
			if dir == "" && name == "lost+found" || strings.HasPrefix(name, uploadPrefix) {
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue
			}
			p := path.Join(dir, name)
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				out = append(out, File{Path: p, ModTime: time.Unix(st.Mtim.Unix()), Dir: true})
				queue = append(queue, p)
			case unix.S_IFREG:
				out = append(out, File{Path: p, Size: st.Size, ModTime: time.Unix(st.Mtim.Unix())})
			}
		}
		f.Close()
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// ReadFile reads a regular file of the session's /work, of at most max bytes (no limit when max
// is 0 or less).
func (m *Manager) ReadFile(ctx context.Context, id, p string, max int64) ([]byte, error) {
	f, _, err := m.OpenFile(ctx, id, p, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fileError(p, err)
	}
	return b, nil
}

// OpenFile opens a regular file of the session's /work to read, refusing it (too_large) when it
// is larger than max bytes (no limit when max is 0 or less). The reader gives the size bytes the
// file had when opened (fewer if it shrank meanwhile), never more, read from the disk as it is
// read; until it is closed, the session counts as in use and its workspace stays mounted.
func (m *Manager) OpenFile(ctx context.Context, id, p string, max int64) (io.ReadCloser, int64, error) {
	rel, err := cleanPath(p)
	if err != nil {
		return nil, 0, err
	}
	if rel == "" {
		return nil, 0, errcode.New(errcode.BadPath, "/work is a folder: give the path of a file in it")
	}
	root, done, err := m.openFiles(ctx, id, false)
	if errors.Is(err, errNoWorkspace) {
		return nil, 0, fileError(p, unix.ENOENT)
	}
	if err != nil {
		return nil, 0, err
	}
	// O_NONBLOCK: a FIFO opens at once (and is then refused) instead of waiting for a writer.
	fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		done()
		return nil, 0, fileError(p, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	fail := func(err error) (io.ReadCloser, int64, error) {
		f.Close()
		done()
		return nil, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(fileError(p, err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return fail(fileError(p, unix.EISDIR))
		}
		return fail(errcode.Errorf(errcode.BadPath, "%q is not a regular file", p))
	}
	if max > 0 && st.Size > max {
		return fail(errcode.Errorf(errcode.TooLarge, "%q is %s, more than the %s that may be read at once", p, sizeText(st.Size), sizeText(max)))
	}
	return closethen.Reader(struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, st.Size), f}, done), st.Size, nil
}

// WriteFile writes r to a file of the session's /work, making the folders on its way (0755) and
// the session's workspace if it has none; the file (0644) replaces any there at once, whole.
// Both belong to the sandbox's user.
func (m *Manager) WriteFile(ctx context.Context, id, p string, r io.Reader) (File, error) {
	rel, err := cleanPath(p)
	if err != nil {
		return File{}, err
	}
	if rel == "" {
		return File{}, errcode.New(errcode.BadPath, "/work is a folder: give the path of a file in it")
	}
	if strings.HasPrefix(path.Base(rel), uploadPrefix) {
		return File{}, errcode.Errorf(errcode.BadPath, "%q starts with %s, which toolhost keeps for files being written", p, uploadPrefix)
	}
	root, done, err := m.openFiles(ctx, id, true)
	if err != nil {
		return File{}, err
	}
	defer done()
	dirfd, err := makeDirs(root, path.Dir(rel))
	if err != nil {
		return File{}, fileError(p, err)
	}
	defer unix.Close(dirfd)
	name := path.Base(rel)
	tmp := uploadPrefix + newToken()
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return File{}, fileError(p, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	ok := false
	defer func() {
		if !ok {
			_ = unix.Unlinkat(dirfd, tmp, 0)
		}
	}()
	err = errors.Join(unix.Fchown(fd, sandboxUID, sandboxUID), unix.Fchmod(fd, 0o644))
	if err == nil {
		_, err = io.Copy(f, contextReader{ctx, r})
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errcode.Code(err) != "" || ctx.Err() != nil {
			return File{}, err
		}
		return File{}, fileError(p, err)
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		return File{}, fileError(p, err)
	}
	ok = true
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return File{}, fileError(p, err)
	}
	return File{Path: rel, Size: st.Size, ModTime: time.Unix(st.Mtim.Unix())}, nil
}

// contextReader stops a copy once ctx is done.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// makeDirs opens the folder dir below root, making the folders on its way that aren't there,
// each confined and owned by the sandbox's user.
func makeDirs(root *os.File, dir string) (int, error) {
	cur, err := unix.Dup(int(root.Fd()))
	if err != nil {
		return -1, err
	}
	if dir == "." || dir == "" {
		return cur, nil
	}
	for _, part := range strings.Split(dir, "/") {
		next, err := openDir(cur, part)
		if errors.Is(err, unix.ENOENT) {
			merr := unix.Mkdirat(cur, part, 0o755)
			if merr != nil && !errors.Is(merr, unix.EEXIST) {
				err = merr
			} else if next, err = openDir(cur, part); err == nil && merr == nil {
				// Through the folder opened (never by name: it may have been replaced by a
				// symbolic link meanwhile).
				err = errors.Join(unix.Fchown(next, sandboxUID, sandboxUID), unix.Fchmod(next, 0o755))
			}
		}
		unix.Close(cur)
		if err != nil {
			if next >= 0 {
				unix.Close(next)
			}
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// openDir opens the folder name in the folder dirfd, confined.
func openDir(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolve})
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// RemoveFile removes a file of the session's /work, or a folder with everything in it (a
// symbolic link is removed itself, never what it points to).
func (m *Manager) RemoveFile(ctx context.Context, id, p string) error {
	rel, err := cleanPath(p)
	if err != nil {
		return err
	}
	if rel == "" {
		return errcode.New(errcode.BadPath, "/work itself can't be removed: give the path of a file or folder in it")
	}
	root, done, err := m.openFiles(ctx, id, false)
	if errors.Is(err, errNoWorkspace) {
		return fileError(p, unix.ENOENT)
	}
	if err != nil {
		return err
	}
	defer done()
	dirfd, err := openBeneath(root, path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return fileError(p, err)
	}
	defer unix.Close(dirfd)
	if err := removeAt(ctx, dirfd, path.Base(rel), 0); err != nil {
		return fileError(p, err)
	}
	return nil
}

// removeAt removes name in dirfd, a folder with what it holds; nothing it does follows a
// symbolic link.
func removeAt(ctx context.Context, dirfd int, name string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dirfd, name, 0)
	}
	if depth > 256 {
		return unix.ENAMETOOLONG
	}
	var err error
	for range 3 { // the code may add files as they go
		fd, oerr := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if oerr != nil {
			return oerr
		}
		f := os.NewFile(uintptr(fd), name)
		names, _ := f.Readdirnames(-1)
		for _, n := range names {
			if err := ctx.Err(); err != nil {
				f.Close()
				return err
			}
			if rerr := removeAt(ctx, fd, n, depth+1); rerr != nil && !errors.Is(rerr, unix.ENOENT) {
				f.Close()
				return rerr
			}
		}
		f.Close()
		if err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); !errors.Is(err, unix.ENOTEMPTY) {
			return err
		}
	}
	return err
}

// sizeText writes a byte count the way people read it: "1 MiB", "512 KiB", "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
