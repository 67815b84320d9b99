package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackagesAlwaysHavePip: every rootfs has pip (a conversation sandbox installs packages
// through the egress proxy), with or without a config, and a config's packages follow, once each;
// the session rootfs has them and the session packages (the scientific stack by default), in a
// folder beside the rootfs unless the config names one.
func TestPackagesAlwaysHavePip(t *testing.T) {
	dir := t.TempDir()
	plans, err := PlanFor(filepath.Join(dir, "missing.toml"))
	if err != nil || !slices.Equal(plans.Rootfs.Packages, []string{"python3-pip"}) || plans.Rootfs.Dir != DefaultDir {
		t.Errorf("no config: %+v %v; want [python3-pip] in %s", plans, err, DefaultDir)
	}
	if want := append([]string{"python3-pip"}, DefaultSessionPackages...); !slices.Equal(plans.Sessions.Packages, want) || plans.Sessions.Dir != DefaultSessionDir {
		t.Errorf("no config: the session rootfs is %+v; want %v in %s", plans.Sessions, want, DefaultSessionDir)
	}
	cfg := filepath.Join(dir, "toolhost.toml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[python]\nrootfs = \"../rootfs\"\npackages = [\"python3-numpy\", \"python3-pip\"]\n")
	plans, err = PlanFor(cfg)
	if err != nil || !slices.Equal(plans.Rootfs.Packages, []string{"python3-pip", "python3-numpy"}) {
		t.Errorf("with a config: %+v %v; want [python3-pip python3-numpy]", plans, err)
	}
	if want := filepath.Join(filepath.Dir(dir), "rootfs"); plans.Rootfs.Dir != want {
		t.Errorf("rootfs = %q, want %q (relative to the config's folder)", plans.Rootfs.Dir, want)
	}
	if want := filepath.Join(filepath.Dir(dir), "rootfs-sessions"); plans.Sessions.Dir != want {
		t.Errorf("session rootfs = %q, want %q (beside the rootfs)", plans.Sessions.Dir, want)
	}
	if want := []string{"python3-pip", "python3-numpy", "python3-pandas", "python3-matplotlib", "python3-munkres"}; !slices.Equal(plans.Sessions.Packages, want) {
		t.Errorf("session packages = %v, want %v", plans.Sessions.Packages, want)
	}

	write("[python]\nsession_rootfs = \"/srv/sessions-rootfs\"\nsession_packages = [\"python3-scipy\"]\n")
	plans, err = PlanFor(cfg)
	if err != nil || plans.Sessions.Dir != "/srv/sessions-rootfs" || !slices.Equal(plans.Sessions.Packages, []string{"python3-pip", "python3-scipy"}) {
		t.Errorf("session_rootfs and session_packages given: %+v %v", plans.Sessions, err)
	}
	plans.AddPackages([]string{"python3-requests"})
	if !slices.Contains(plans.Rootfs.Packages, "python3-requests") || !slices.Contains(plans.Sessions.Packages, "python3-requests") {
		t.Errorf("packages of the command line go into both: %+v", plans)
	}
	write("[python]\nsession_packages = []\n")
	if plans, err = PlanFor(cfg); err != nil || !slices.Equal(plans.Sessions.Packages, []string{"python3-pip"}) {
		t.Errorf("session_packages = []: %+v %v; want the rootfs's packages only", plans.Sessions, err)
	}

	write("[python]\nrootfs = \"/srv/r\"\nsession_rootfs = \"/srv/r\"\n")
	if _, err := PlanFor(cfg); err == nil || !strings.Contains(err.Error(), "/srv/r") {
		t.Errorf("one folder for both: %v; want an error naming it", err)
	}
}
