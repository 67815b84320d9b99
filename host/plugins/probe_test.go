package plugins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// TestTheManagerRecordsTheNegotiatedProtocol: a plugin of this SDK runs at
// the newest protocol, the build of protocol 1 at 1, side by side.
func TestTheManagerRecordsTheNegotiatedProtocol(t *testing.T) {
	dir := pluginDir(t)
	pins := map[string]string{"echo": install(t, dir, "echo", echoBinary), "v1": install(t, dir, "v1", v1Binary)}
	m := newManager(t, dir, pins)
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatal(problems)
	}
	for kind, want := range map[string]int{"echo": sdk.ProtocolVersion, "v1": 1} {
		p, ok := m.Kind(kind)
		if !ok {
			t.Fatalf("no %s plugin runs", kind)
		}
		if p.Protocol() != want || p.SHA256() != pins[kind] {
			t.Errorf("the %s plugin: protocol %d, sha256 %s; want %d, %s", kind, p.Protocol(), p.SHA256(), want, pins[kind])
		}
	}
}

// TestProbeOneStartsOnlyThePinnedKind: ProbeOne asks one plugin what it
// is, with its negotiated protocol and hash, and stops it; it never runs
// a binary whose hash is not its pin, nor one others could replace.
func TestProbeOneStartsOnlyThePinnedKind(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "v1", v1Binary)
	// A binary beside it that would fail loudly if it were started.
	marker := filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(filepath.Join(dir, BinaryPrefix+"other"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := Options{Dir: dir, Pins: map[string]string{"v1": sum}, StartTimeout: 20 * time.Second}
	pr, err := ProbeOne(ctx, opts, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if pr.Kind != "v1" || pr.Protocol != 1 || pr.SHA256 != sum || pr.Info.Version != "1.0.0" || pr.Path != filepath.Join(dir, BinaryPrefix+"v1") {
		t.Fatalf("probe = %+v", pr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("ProbeOne ran a plugin of another kind")
	}
	// Not pinned, or pinned to another hash: not run.
	if _, err := ProbeOne(ctx, opts, "other"); err == nil || !strings.Contains(err.Error(), "is not pinned") {
		t.Fatalf("probing an unpinned plugin: %v", err)
	}
	opts.Pins["other"] = strings.Repeat("0", 64)
	if _, err := ProbeOne(ctx, opts, "other"); err == nil || !strings.Contains(err.Error(), "does not match its pin") {
		t.Fatalf("probing a plugin pinned to another hash: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("ProbeOne ran a binary that is not pinned")
	}
	// A binary others could replace is refused before it runs.
	if err := os.Chmod(filepath.Join(dir, BinaryPrefix+"v1"), 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := ProbeOne(ctx, opts, "v1"); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("probing a group-writable binary: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := CheckTrust(opts); err == nil || !strings.Contains(err.Error(), "the plugin folder") {
		t.Fatalf("CheckTrust of a folder anyone can write: %v", err)
	}
}
