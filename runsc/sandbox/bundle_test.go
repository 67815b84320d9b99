package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestSpecWalls(t *testing.T) {
	s, err := Spec(BundleOptions{
		Rootfs: "/rootfs", Args: []string{"/usr/bin/python3"}, WorkDir: "/state/x/work", TmpBytes: 32 << 20,
		UID: 65534, GID: 65534, CgroupsPath: "/toolhost-0123456789", NetNSPath: "/var/run/netns/toolhost-0123456789",
		Limits: Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1, CPUSeconds: 25, OpenFiles: 1024, FileBytes: 64 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Root.Readonly || s.Root.Path != "/rootfs" {
		t.Errorf("root = %+v; want the rootfs, read-only", s.Root)
	}
	p := s.Process
	if p.User.UID != 65534 || !p.NoNewPrivileges || p.Terminal || p.Cwd != "/work" {
		t.Errorf("process = %+v", p)
	}
	c := p.Capabilities
	if len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("capabilities = %+v; want none", c)
	}
	if strings.Join(p.Env, " ") != "PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/work" {
		t.Errorf("env = %v", p.Env)
	}
	rl := map[string]uint64{}
	for _, r := range p.Rlimits {
		if r.Hard != r.Soft {
			t.Errorf("%s soft %d != hard %d", r.Type, r.Soft, r.Hard)
		}
		rl[r.Type] = r.Hard
	}
	if rl["RLIMIT_CPU"] != 25 || rl["RLIMIT_NOFILE"] != 1024 || rl["RLIMIT_FSIZE"] != 64<<20 {
		t.Errorf("rlimits = %v", rl)
	}
	mounts := map[string]specs.Mount{}
	for _, m := range s.Mounts {
		mounts[m.Destination] = m
	}
	if w := mounts["/work"]; w.Source != "/state/x/work" || w.Type != "bind" || !contains(w.Options, "rw") {
		t.Errorf("/work = %+v", w)
	}
	if tmp := mounts["/tmp"]; tmp.Type != "tmpfs" || !contains(tmp.Options, "size=33554432") {
		t.Errorf("/tmp = %+v", tmp)
	}
	r := s.Linux.Resources
	if *r.Memory.Limit != 256<<20 || *r.Memory.Swap != 256<<20 || r.Pids.Limit == nil || *r.Pids.Limit != 64 || *r.CPU.Quota != 100000 || *r.CPU.Period != 100000 {
		t.Errorf("resources = %+v", r)
	}
	if s.Linux.CgroupsPath != "/toolhost-0123456789" {
		t.Errorf("cgroupsPath = %q", s.Linux.CgroupsPath)
	}
	var netns string
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			netns = ns.Path
		}
	}
	if netns != "/var/run/netns/toolhost-0123456789" {
		t.Errorf("network namespace = %q", netns)
	}

	dir := t.TempDir()
	if err := WriteBundle(dir, s); err != nil {
		t.Fatal(err)
	}
	var back specs.Spec
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if err := json.Unmarshal(b, &back); err != nil || back.Process.Args[0] != "/usr/bin/python3" {
		t.Errorf("config.json doesn't read back: %v", err)
	}
}

func TestSpecRefusesNoLimits(t *testing.T) {
	for _, o := range []BundleOptions{
		{Rootfs: "/r", Args: []string{"x"}, CgroupsPath: "/c", Limits: Limits{Pids: 1}},
		{Rootfs: "/r", Args: []string{"x"}, CgroupsPath: "/c", Limits: Limits{MemoryBytes: 1}},
		{Rootfs: "/r", Args: []string{"x"}, Limits: Limits{MemoryBytes: 1, Pids: 1}},
		{Rootfs: "/r", CgroupsPath: "/c", Limits: Limits{MemoryBytes: 1, Pids: 1}},
	} {
		if _, err := Spec(o); err == nil {
			t.Errorf("Spec(%+v) made a spec", o)
		}
	}
}

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := NewID("toolhost-")
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != len("toolhost-")+idSuffixLen || !ownedBy(id, "toolhost-") || seen[id] {
			t.Fatalf("id %q", id)
		}
		seen[id] = true
	}
	if ownedBy("toolhost-abc", "toolhost-") || ownedBy("toolhost-0123456789a", "toolhost-") || ownedBy("other-0123456789", "toolhost-") {
		t.Error("ownedBy matches ids that aren't ours")
	}
	for _, bad := range []string{"", "Toolhost", "1abc", "with space", strings.Repeat("a", MaxPrefixLen+1)} {
		if CheckPrefix(bad) == nil {
			t.Errorf("CheckPrefix(%q) passed", bad)
		}
	}
	if CheckPrefix("toolhost-") != nil || CheckPrefix("th_test-1") != nil {
		t.Error("CheckPrefix refuses good prefixes")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
