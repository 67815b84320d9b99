package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPackagesAlwaysHavePip: every rootfs has pip (a conversation sandbox installs packages
// through the egress proxy), with or without a config, and a config's packages follow, once each.
func TestPackagesAlwaysHavePip(t *testing.T) {
	dir := t.TempDir()
	plan, err := PlanFor(filepath.Join(dir, "missing.toml"))
	if err != nil || !slices.Equal(plan.Packages, []string{"python3-pip"}) || plan.Dir != DefaultDir {
		t.Errorf("no config: %+v %v; want [python3-pip] in %s", plan, err, DefaultDir)
	}
	cfg := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(cfg, []byte("[python]\nrootfs = \"../rootfs\"\npackages = [\"python3-numpy\", \"python3-pip\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan, err = PlanFor(cfg)
	if err != nil || !slices.Equal(plan.Packages, []string{"python3-pip", "python3-numpy"}) {
		t.Errorf("with a config: %+v %v; want [python3-pip python3-numpy]", plan, err)
	}
	if want := filepath.Join(filepath.Dir(dir), "rootfs"); plan.Dir != want {
		t.Errorf("rootfs = %q, want %q (relative to the config's folder)", plan.Dir, want)
	}
}
