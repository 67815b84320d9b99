package plugins

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/internal/pathtrust"
)

// CheckNotWritableByOthers returns an error, saying how to fix it, when
// anyone but root and the user toolhost runs as could change path (the
// rule of pathtrust.Check). what names path in the message, e.g. "the
// plugin folder".
func CheckNotWritableByOthers(path, what string) error {
	return pathtrust.Check(path, what, "replace a plugin that toolhost runs as "+pathtrust.UserName(uint32(os.Geteuid())))
}

// checkOwnerAndMode refuses a plugin file that belongs to another user or
// that group or others can write.
func checkOwnerAndMode(fi fs.FileInfo, subject, path string) error {
	return pathtrust.CheckOwnerAndMode(fi, subject, path, "replace a plugin that toolhost runs as "+pathtrust.UserName(uint32(os.Geteuid())))
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
