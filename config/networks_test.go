package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSessionNetworksAreDeclaredOnce: the names of a session's networks ("off", "web",
// "packages") are declared here only; the sdk, plugins/python/session and the host take them from
// config, so that no copy can drift from the wire names docs/protocol.md gives.
func TestSessionNetworksAreDeclaredOnce(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^[ \t]*\w+([ \t]+\w+)?[ \t]*=[ \t]*"(off|web|packages)"[ \t]*(//.*)?$`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.Join("..", "config", "sessions.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAll(b, -1) {
			t.Errorf("%s declares a session network again: %s (use config.SessionNetwork*)", path, strings.TrimSpace(string(m)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile("sessions.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(decl.FindAll(own, -1)); n != len(SessionNetworks) {
		t.Errorf("the guard finds %d declarations of the %d networks in config/sessions.go: it would miss a copy", n, len(SessionNetworks))
	}
}
