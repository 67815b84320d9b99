package cgroupfs

import (
	"strings"
	"testing"
)

// The mount tables of the three kinds of machine: this project's VMs (hybrid), a stock Debian 13
// (v2), and an old v1-only machine.
const (
	hybridMounts = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	v2Mounts = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	v1Mounts = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`
)

func TestParseMountinfoTellsTheThreeTrees(t *testing.T) {
	for _, c := range []struct {
		name, table string
		want        Version
		unified     string
		v1          []string
	}{
		{"hybrid", hybridMounts, Hybrid, "/sys/fs/cgroup/unified", []string{"cpu,cpuacct", "memory", "pids", "systemd"}},
		{"v2", v2Mounts, V2, "/sys/fs/cgroup", nil},
		{"v1", v1Mounts, V1, "", []string{"memory"}},
		{"none", "22 1 254:0 / / rw - ext4 /dev/vda rw\n", None, "", nil},
	} {
		tree, err := ParseMountinfo(strings.NewReader(c.table))
		if err != nil {
			t.Fatal(err)
		}
		if tree.Version != c.want || tree.Unified != c.unified || len(tree.V1) != len(c.v1) {
			t.Errorf("%s: got %v, unified %q, v1 %v; want %v, %q, %v", c.name, tree.Version, tree.Unified, tree.V1, c.want, c.unified, c.v1)
		}
		for _, h := range c.v1 {
			if tree.V1[h] != Root+"/"+h {
				t.Errorf("%s: hierarchy %s is at %q", c.name, h, tree.V1[h])
			}
		}
	}
}

func TestParseOwnPathReadsTheV2Line(t *testing.T) {
	p, err := ParseOwnPath("12:pids:/x\n0::/system.slice/toolhost.service/host\n")
	if err != nil || p != "/system.slice/toolhost.service/host" {
		t.Errorf("got %q, %v", p, err)
	}
	if _, err := ParseOwnPath("4:memory:/x\n"); err == nil {
		t.Error("a v1-only /proc/self/cgroup gave a v2 path")
	}
}

// TestTheMachinesRootIsNeverDelegated: walking up from a cgroup with no trusted.delegate anywhere
// (a folder that isn't a cgroup at all) ends at the root, which is refused outside a cgroup
// namespace of one's own.
func TestTheMachinesRootIsNeverDelegated(t *testing.T) {
	if OwnCgroupNamespace() {
		t.Skip("this process has a cgroup namespace of its own, whose root is delegated")
	}
	if d, err := Delegated(t.TempDir(), "/user.slice/session-1.scope"); err == nil {
		t.Errorf("an undelegated cgroup gave %q", d)
	} else if !strings.Contains(err.Error(), "not delegated") {
		t.Errorf("the error does not say why: %v", err)
	}
}
