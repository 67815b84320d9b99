// Package cgroupfs says which cgroup hierarchy this machine has — v1, hybrid (v1 controllers beside
// an empty cgroup2 mount) or v2 only — and, on v2, which cgroup a process may manage as its own:
// the nearest of its cgroup and their parents that systemd delegated (trusted.delegate), or the
// root of a cgroup namespace of its own (a container). It is the one owner of those two facts: the
// sandbox code (runsc/sandbox) places sandboxes by them, and the toolhost binary decides by them
// whether to run itself in a delegated scope. It imports nothing of toolhost's.
package cgroupfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is where the machine's cgroups are mounted.
const Root = "/sys/fs/cgroup"

// Version is the kind of cgroup tree a machine has.
type Version int

const (
	// None: no cgroup file system is mounted under Root.
	None Version = iota
	// V1: cgroup v1 hierarchies only, one folder per controller under Root.
	V1
	// Hybrid: the v1 controllers under Root/<controller> and a cgroup2 mount (Root/unified) that
	// holds no controller toolhost uses. Limits are v1's.
	Hybrid
	// V2: one cgroup2 mount at Root with every controller (Debian 12 and later, Ubuntu 22.04 and
	// later, RHEL 9, Fedora; systemd 258 knows no other).
	V2
)

func (v Version) String() string {
	switch v {
	case V1:
		return "cgroup v1"
	case Hybrid:
		return "cgroup v1 (hybrid: v1 controllers beside an empty cgroup2 mount)"
	case V2:
		return "cgroup v2"
	}
	return "no cgroups"
}

// Tree is what /proc/self/mountinfo says of the cgroups under Root.
type Tree struct {
	Version Version
	// Unified is the mount point of the cgroup2 file system ("" when there is none).
	Unified string
	// V1 are the mount points of the cgroup v1 hierarchies (named ones such as name=systemd
	// too), keyed by their folder's name under Root ("memory", "cpu,cpuacct", "systemd").
	V1 map[string]string
}

// Detect reads this process's mount table.
func Detect() (Tree, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Tree{}, fmt.Errorf("reading the mount table to find the cgroups: %w", err)
	}
	defer f.Close()
	return ParseMountinfo(f)
}

// ParseMountinfo reads a mount table in the format of /proc/self/mountinfo.
func ParseMountinfo(r io.Reader) (Tree, error) {
	t := Tree{V1: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 0:30 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
		left, right, ok := strings.Cut(sc.Text(), " - ")
		lf, rf := strings.Fields(left), strings.Fields(right)
		if !ok || len(lf) < 5 || len(rf) < 1 {
			continue
		}
		mnt := UnescapeMountinfo(lf[4])
		if mnt != Root && !strings.HasPrefix(mnt, Root+"/") {
			continue
		}
		switch rf[0] {
		case "cgroup2":
			t.Unified = mnt
		case "cgroup":
			t.V1[strings.TrimPrefix(mnt, Root+"/")] = mnt
		}
	}
	if err := sc.Err(); err != nil {
		return t, fmt.Errorf("reading the mount table: %w", err)
	}
	switch {
	case len(t.V1) > 0 && t.Unified != "":
		t.Version = Hybrid
	case len(t.V1) > 0:
		t.Version = V1
	case t.Unified == Root:
		t.Version = V2
	}
	return t, nil
}

// UnescapeMountinfo undoes the octal escapes of a path in /proc/self/mountinfo (\040 for a
// space, …). The sandbox code reads its mounts with it too.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// OwnPath is the cgroup v2 path of process pid (0: this process), e.g.
// "/system.slice/toolhost.service/host", read from /proc/<pid>/cgroup.
func OwnPath(pid int) (string, error) {
	p := "/proc/self/cgroup"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/cgroup", pid)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading which cgroup the process is in: %w", err)
	}
	return ParseOwnPath(string(b))
}

// ParseOwnPath reads the cgroup v2 line ("0::/path") of a /proc/<pid>/cgroup.
func ParseOwnPath(content string) (string, error) {
	for _, line := range strings.Split(content, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return path.Clean(p), nil
		}
	}
	return "", errors.New("the process is in no cgroup v2 (its /proc/<pid>/cgroup has no 0:: line)")
}

// DelegateXattr is the extended attribute systemd sets on a cgroup it delegated (Delegate=yes),
// to "1".
const DelegateXattr = "trusted.delegate"

// Delegated finds the cgroup (a path below the cgroup2 mount at mount) that a process in cgroup
// own may manage: the nearest of own and its parents that systemd marked delegated, or "/" when
// the process has a cgroup namespace of its own (a container: its root is the container's). The
// machine's own root cgroup, outside any namespace, is never taken: it belongs to the machine. It
// returns why when there is none.
func Delegated(mount, own string) (string, error) {
	for p := path.Clean(own); ; p = path.Dir(p) {
		if p == "/" {
			if OwnCgroupNamespace() {
				return "/", nil
			}
			return "", fmt.Errorf("the cgroup %s is not delegated to toolhost (no %s=1 on it or a cgroup above it), so the sandboxes' limits can't be set below it", own, DelegateXattr)
		}
		if delegated(filepath.Join(mount, p)) {
			return p, nil
		}
	}
}

func delegated(dir string) bool {
	buf := make([]byte, 8)
	n, err := unix.Getxattr(dir, DelegateXattr, buf)
	return err == nil && strings.TrimSpace(string(buf[:n])) == "1"
}

// initCgroupNamespace is the inode of the machine's first cgroup namespace (the kernel's
// PROC_CGROUP_INIT_INO).
const initCgroupNamespace = 0xEFFFFFFB

// OwnCgroupNamespace says whether this process has a cgroup namespace other than the machine's
// first: a container's, whose root cgroup is the container's own.
func OwnCgroupNamespace() bool {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/cgroup", &st); err != nil {
		return false
	}
	return st.Ino != initCgroupNamespace
}
