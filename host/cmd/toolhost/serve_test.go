package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeExitsWithEXCONFIGOnABadConfig: a config with problems ends serve with 78 (the unit's
// RestartPreventExitStatus), not 2, the status of a Go panic and of the watchdog's SIGABRT,
// after which systemd must restart the host.
func TestServeExitsWithEXCONFIGOnABadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(path, []byte("[server]\nlisten = 8080\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"serve", "--config", path}, &stdout, &stderr); code != 78 {
		t.Fatalf("serve with a bad config exited %d, want 78\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "toolhost.toml:2") {
		t.Errorf("serve did not say where the config is wrong: %s", stderr.String())
	}
	unit, err := os.ReadFile("../../../examples/systemd/toolhost.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "RestartPreventExitStatus=78\n") {
		t.Error("the unit does not keep from restarting a host whose config has problems (RestartPreventExitStatus=78)")
	}
}
