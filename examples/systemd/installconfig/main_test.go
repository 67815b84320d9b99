package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
)

// TestTheInstalledConfigPointsAtTheInstalledFiles: the example, rewritten, loads as a toolhost
// config whose every path is the installed layout's, with JSON logs for journald and the
// example's comments kept.
func TestTheInstalledConfigPointsAtTheInstalledFiles(t *testing.T) {
	example, err := os.ReadFile("../../toolhost.toml")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	lib, conf, state := filepath.Join(root, "lib"), filepath.Join(root, "etc"), filepath.Join(root, "state")
	var out bytes.Buffer
	if err := rewrite(bytes.NewReader(example), &out, settings(lib, conf, state)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(lib, "plugins"), filepath.Join(conf, "tools")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lib, "pins.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(conf, "toolhost.toml")
	if err := os.WriteFile(path, out.Bytes(), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the installed config does not load: %v", err)
	}
	checks := []struct{ name, got, want string }{
		{"tools_dir", cfg.ToolsDir, filepath.Join(conf, "tools")},
		{"state_dir", cfg.Server.StateDir, state},
		{"plugins dir", cfg.Plugins.Dir, filepath.Join(lib, "plugins")},
		{"pins file", cfg.Plugins.SHA256File, filepath.Join(lib, "pins.toml")},
		{"log format", cfg.Log.Format, "json"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	for _, want := range []string{`runsc = "` + lib + `/runsc"`, `rootfs = "` + state + `/rootfs"`, `session_rootfs = "` + state + `/rootfs-sessions"`, `state_dir = "/run/toolhost"`, `sessions_dir = "` + state + `/sessions"`, "# max_memory_mb: the memory a sandbox may use"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the installed config lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "../") {
		t.Errorf("the installed config still names a path of the source tree:\n%s", out.String())
	}
}

// TestAKeyMissingFromTheExampleIsAnError: a key the example stops setting fails the rewrite,
// naming it, instead of installing a config that points into the source tree.
func TestAKeyMissingFromTheExampleIsAnError(t *testing.T) {
	var out bytes.Buffer
	err := rewrite(strings.NewReader("# c\n[plugins]\ndir = \"x\"\n"), &out, settings("/l", "/e", "/s"))
	if err == nil || !strings.Contains(err.Error(), "plugins.sha256_file") || !strings.Contains(err.Error(), "python.runsc") {
		t.Fatalf("err = %v; want one naming the keys the example lacks", err)
	}
}
