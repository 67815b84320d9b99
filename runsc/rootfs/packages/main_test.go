package main

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
	got, err := packages(filepath.Join(dir, "missing.toml"))
	if err != nil || !slices.Equal(got, []string{"python3-pip"}) {
		t.Errorf("no config: %v %v; want [python3-pip]", got, err)
	}
	cfg := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(cfg, []byte("[python]\npackages = [\"python3-numpy\", \"python3-pip\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = packages(cfg)
	if err != nil || !slices.Equal(got, []string{"python3-pip", "python3-numpy"}) {
		t.Errorf("with a config: %v %v; want [python3-pip python3-numpy]", got, err)
	}
}
