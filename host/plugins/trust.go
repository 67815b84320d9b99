package plugins

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// CheckNotWritableByOthers returns an error, saying how to fix it, when
// anyone but root and the user toolhost runs as could change path: when
// it, or a folder it is in, belongs to another user or is writable by
// group or others. A folder above path that others can write but that has
// the sticky bit and belongs to root or this user (like /tmp) is fine:
// others can't rename or remove what they don't own in it. what names
// path in the message, e.g. "the plugin folder".
func CheckNotWritableByOthers(path, what string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %s can't be read: %w", what, path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("%s %s can't be read: %w", what, abs, err)
	}
	if err := checkOwnerAndMode(fi, what+" "+abs, abs); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("%s %s can't be read: %w", what, abs, err)
	}
	// The folders above path as written (whoever can write one can point a
	// link in it elsewhere) and above where it really is.
	seen := map[string]bool{}
	for _, leaf := range []string{abs, real} {
		for dir := filepath.Dir(leaf); !seen[dir]; dir = filepath.Dir(dir) {
			seen[dir] = true
			fi, err := os.Lstat(dir)
			if err != nil {
				return fmt.Errorf("%s %s can't be checked: the folder %s above it can't be read: %w", what, abs, dir, err)
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				continue // a link's own mode means nothing; the folder holding it is checked next
			}
			sticky := fi.Mode()&fs.ModeSticky != 0
			if err := checkOwner(fi, fmt.Sprintf("%s %s is in the folder %s, which", what, abs, dir), dir); err != nil {
				return err
			}
			if !sticky {
				if err := checkMode(fi, fmt.Sprintf("%s %s is in the folder %s, which", what, abs, dir), dir); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkOwnerAndMode refuses a file or folder that belongs to another user
// or that group or others can write. subject starts the message: "the
// plugin folder /x".
func checkOwnerAndMode(fi fs.FileInfo, subject, path string) error {
	if err := checkOwner(fi, subject, path); err != nil {
		return err
	}
	return checkMode(fi, subject, path)
}

func checkOwner(fi fs.FileInfo, subject, path string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s can't be checked: its owner is unknown", subject)
	}
	euid := os.Geteuid()
	if st.Uid == 0 || int(st.Uid) == euid {
		return nil
	}
	allowed := "root"
	if euid != 0 {
		allowed = "root or to " + userName(uint32(euid)) + ", the user toolhost runs as"
	}
	owner := "uid " + strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(st.Uid), 10)); err == nil {
		owner += " (" + u.Username + ")"
	}
	return fmt.Errorf("%s belongs to %s, not to %s, so that user could replace a plugin that toolhost runs as %s; fix it with: chown %s %s",
		subject, owner, allowed, userName(uint32(euid)), chownTo(euid), path)
}

func checkMode(fi fs.FileInfo, subject, path string) error {
	if fi.Mode().Perm()&0o022 == 0 {
		return nil
	}
	return fmt.Errorf("%s is writable by group or others (mode %04o), so anyone on this machine could replace a plugin that toolhost runs as %s; fix it with: chmod go-w %s",
		subject, fi.Mode().Perm(), userName(uint32(os.Geteuid())), path)
}

// userName names a uid for messages: its name, or "uid N".
func userName(uid uint32) string {
	if uid == 0 {
		return "root"
	}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return "uid " + strconv.FormatUint(uint64(uid), 10)
}

// chownTo is what to write after chown for this user.
func chownTo(euid int) string {
	if euid == 0 {
		return "root"
	}
	if u, err := user.LookupId(strconv.Itoa(euid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(euid)
}

// sealedCopy copies src into a new memory file, hashing exactly the bytes
// it copies, and seals the copy so that nothing can change it any more: the
// plugin is then started from the copy, so what runs is what was hashed,
// whatever happens to the file at the path meanwhile. name shows in
// /proc/<pid>/exe as /memfd:<name>. script says the copy starts with "#!".
func sealedCopy(src *os.File, name string) (copy *os.File, sum []byte, script bool, err error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 6.3 know no MFD_EXEC: their memory files are all executable.
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("can't make a sealed copy of it in memory: %w", err)
	}
	copy = os.NewFile(uintptr(fd), "/memfd:"+name)
	h := sha256.New()
	// struct{ io.Reader } keeps io.CopyBuffer from handing the copy to
	// src.WriteTo: both writers must see the same bytes, through one buffer.
	if _, err := io.CopyBuffer(io.MultiWriter(copy, h), struct{ io.Reader }{src}, make([]byte, 1<<20)); err != nil {
		copy.Close()
		return nil, nil, false, fmt.Errorf("can't copy it into memory: %w", err)
	}
	const seals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		copy.Close()
		return nil, nil, false, fmt.Errorf("can't seal its copy in memory: %w", err)
	}
	magic := make([]byte, 2)
	if n, _ := copy.ReadAt(magic, 0); n == 2 && string(magic) == "#!" {
		script = true
	}
	return copy, h.Sum(nil), script, nil
}
