package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRootfsRunsOnlyABuilderNobodyElseCanChange: toolhost rootfs runs as root the builder beside
// the plugins' folder, so a builder, or a folder above it, that a group or others may change is
// refused, saying how to fix it, and nothing runs.
func TestRootfsRunsOnlyABuilderNobodyElseCanChange(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(root, "lib")
	if err := os.MkdirAll(filepath.Join(lib, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(root, "ran")
	builder := filepath.Join(lib, rootfsBuilder)
	if err := os.WriteFile(builder, []byte("#!/bin/sh\necho \"$@\" > "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "toolhost.toml")
	if err := os.WriteFile(config, []byte("[plugins]\ndir = \"lib/plugins\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rootfs := func() (int, string) {
		var out, errs bytes.Buffer
		code := run([]string{"rootfs", "--config", config, "python3-numpy"}, &out, &errs)
		return code, errs.String()
	}

	for _, tt := range []struct {
		name, path string
		mode       os.FileMode
		want       string
	}{
		{"a group-writable builder", builder, 0o775, "chmod go-w " + builder},
		{"a folder others may write", lib, 0o777, "chmod go-w " + lib},
	} {
		if err := os.Chmod(tt.path, tt.mode); err != nil {
			t.Fatal(err)
		}
		code, msg := rootfs()
		if code == 0 || !strings.Contains(msg, tt.want) {
			t.Errorf("%s: exit %d, %q; want a refusal saying %q", tt.name, code, msg, tt.want)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%s: the builder ran", tt.name)
		}
		if err := os.Chmod(tt.path, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	if code, msg := rootfs(); code != 0 {
		t.Fatalf("a builder only root can change: exit %d: %s", code, msg)
	}
	b, err := os.ReadFile(ran)
	if err != nil || strings.TrimSpace(string(b)) != "--config "+config+" python3-numpy" {
		t.Errorf("the builder was run with %q (%v); want the config and the packages", b, err)
	}
}
