package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMakeInstallLaysOutTheTree: `make install DESTDIR=…` puts the binary, the plugins and their
// pins, runsc, the rootfs builder, the unit, the docs, the config, the rootfs and the session
// rootfs where the unit and the config look for them, owned by root and writable by nobody else;
// a second install keeps an edited config; `make uninstall` keeps the config and the state unless PURGE=1.
func TestMakeInstallLaysOutTheTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("make install sets root as the owner and needs root")
	}
	if _, err := os.Stat("../build/rootfs/usr/bin/python3"); err != nil {
		t.Fatal("no rootfs in build/: run `make sandbox` (make test does)")
	}
	dest := t.TempDir()
	make := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("make", append([]string{"-C", "..", "--no-print-directory", "DESTDIR=" + dest}, args...)...)
		cmd.Env = withoutMakeFlags(os.Environ())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	make("install")

	files := []string{
		"usr/local/bin/toolhost", "usr/local/lib/toolhost/runsc", "usr/local/lib/toolhost/toolhost-rootfs",
		"usr/local/lib/toolhost/pins.toml", "usr/local/lib/toolhost/plugins/toolhost-plugin-python",
		"usr/local/lib/toolhost/plugins/toolhost-plugin-http", "etc/systemd/system/toolhost.service",
		"etc/toolhost/toolhost.toml", "usr/local/share/doc/toolhost/operations.md", "var/lib/toolhost/rootfs/usr/bin/python3",
		"var/lib/toolhost/rootfs-sessions/usr/lib/python3/dist-packages/pandas/__init__.py",
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dest, f))
		if err != nil {
			t.Errorf("make install did not write /%s", f)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("/%s: owner %d, mode %s; want root's, writable by nobody else", f, st.Uid, fi.Mode().Perm())
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "etc/systemd/system/toolhost.service"))
	for _, want := range []string{"ExecStart=/usr/local/bin/toolhost serve --config /etc/toolhost/toolhost.toml",
		"ExecReload=/usr/local/bin/toolhost reload --config /etc/toolhost/toolhost.toml", "Type=notify", "WatchdogSec="} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the installed unit lacks %q:\n%s", want, unit)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(dest, "etc/toolhost/toolhost.toml"))
	for _, want := range []string{`dir = "/usr/local/lib/toolhost/plugins"`, `sha256_file = "/usr/local/lib/toolhost/pins.toml"`,
		`runsc = "/usr/local/lib/toolhost/runsc"`, `rootfs = "/var/lib/toolhost/rootfs"`,
		`session_rootfs = "/var/lib/toolhost/rootfs-sessions"`, `format = "json"`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("the installed config lacks %s", want)
		}
	}
	// The installed pins are the installed plugins' hashes.
	pins, _ := os.ReadFile(filepath.Join(dest, "usr/local/lib/toolhost/pins.toml"))
	if sum := fileSHA256(t, filepath.Join(dest, "usr/local/lib/toolhost/plugins/toolhost-plugin-python")); !strings.Contains(string(pins), `python = "`+sum+`"`) {
		t.Errorf("the installed pins do not pin the installed python plugin (%s):\n%s", sum, pins)
	}

	edited := string(cfg) + "\n# an admin's edit\n"
	if err := os.WriteFile(filepath.Join(dest, "etc/toolhost/toolhost.toml"), []byte(edited), 0o640); err != nil {
		t.Fatal(err)
	}
	if out := make("install"); !strings.Contains(out, "kept "+dest+"/etc/toolhost/toolhost.toml") {
		t.Errorf("a second install did not say it kept the config:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "etc/toolhost/toolhost.toml")); string(b) != edited {
		t.Error("a second install overwrote the admin's config")
	}
	if err := os.WriteFile(filepath.Join(dest, "var/lib/toolhost/toolhost.db"), []byte("state"), 0o600); err != nil {
		t.Fatal(err)
	}

	make("uninstall")
	for _, f := range []string{"usr/local/bin/toolhost", "usr/local/lib/toolhost", "etc/systemd/system/toolhost.service", "var/lib/toolhost/rootfs",
		"var/lib/toolhost/rootfs-sessions"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err == nil {
			t.Errorf("make uninstall left /%s", f)
		}
	}
	for _, f := range []string{"etc/toolhost/toolhost.toml", "var/lib/toolhost/toolhost.db"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("make uninstall removed /%s, which it keeps unless PURGE=1", f)
		}
	}
	make("uninstall", "PURGE=1")
	for _, f := range []string{"etc/toolhost", "var/lib/toolhost"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err == nil {
			t.Errorf("make uninstall PURGE=1 left /%s", f)
		}
	}
}

// withoutMakeFlags drops what an outer make passes down, so the make a test runs is its own.
func withoutMakeFlags(env []string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, "MAKEFLAGS=") && !strings.HasPrefix(e, "MFLAGS=") && !strings.HasPrefix(e, "MAKELEVEL=") {
			out = append(out, e)
		}
	}
	return out
}
