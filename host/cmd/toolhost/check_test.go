package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefusesSessionsMemoryTooSmall: check applies [sessions]' ranges as serve does, the
// python kind's included (they are config's): memory_mb = 32 is refused with file:line, the
// field and its range, and check exits 1.
func TestCheckRefusesSessionsMemoryTooSmall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(path, []byte("[sessions]\nenabled = true\nmemory_mb = 32\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "--config", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("check of memory_mb = 32 exited %d, want 1\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	want := "toolhost.toml:3: sessions.memory_mb: must be from 64 to 65536, not 32"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("check said:\n%s\nwant it to say %q", stderr.String(), want)
	}
}
