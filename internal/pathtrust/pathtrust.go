// Package pathtrust owns the rule of which files and folders toolhost may trust: those that
// nobody but root and the user toolhost runs as could change, nor swap through a folder above.
package pathtrust

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Check returns an error, saying how to fix it, when anyone but root and the user toolhost runs
// as could change path: when it, or a folder it is in, belongs to another user or is writable by
// group or others. A folder above path that others can write but that has the sticky bit and
// belongs to root or this user (like /tmp) is fine: others can't rename or remove what they don't
// own in it. what names path in the message ("the plugin folder"); risk says what such a user
// could then do ("replace a plugin that toolhost runs as root").
func Check(path, what, risk string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %s can't be read: %w", what, path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("%s %s can't be read: %w", what, abs, err)
	}
	if err := CheckOwnerAndMode(fi, what+" "+abs, abs, risk); err != nil {
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
			subject := fmt.Sprintf("%s %s is in the folder %s, which", what, abs, dir)
			if err := checkOwner(fi, subject, dir, risk); err != nil {
				return err
			}
			if !sticky {
				if err := checkMode(fi, subject, dir, risk); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// CheckOwnerAndMode refuses a file or folder that belongs to another user or that group or
// others can write (Check without the folders above). subject starts the message: "the plugin folder /x".
func CheckOwnerAndMode(fi fs.FileInfo, subject, path, risk string) error {
	if err := checkOwner(fi, subject, path, risk); err != nil {
		return err
	}
	return checkMode(fi, subject, path, risk)
}

func checkOwner(fi fs.FileInfo, subject, path, risk string) error {
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
		allowed = "root or to " + UserName(uint32(euid)) + ", the user toolhost runs as"
	}
	owner := "uid " + strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(st.Uid), 10)); err == nil {
		owner += " (" + u.Username + ")"
	}
	return fmt.Errorf("%s belongs to %s, not to %s, so that user could %s; fix it with: chown %s %s",
		subject, owner, allowed, risk, chownTo(euid), path)
}

func checkMode(fi fs.FileInfo, subject, path, risk string) error {
	if fi.Mode().Perm()&0o022 == 0 {
		return nil
	}
	return fmt.Errorf("%s is writable by group or others (mode %04o), so anyone on this machine could %s; fix it with: chmod go-w %s",
		subject, fi.Mode().Perm(), risk, path)
}

// UserName names a uid for messages: its name, or "uid N".
func UserName(uid uint32) string {
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
