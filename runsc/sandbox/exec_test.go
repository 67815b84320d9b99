package sandbox

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecIntoALongLivedSandbox: a long-lived sandbox runs one process after another (Exec), as
// the sandbox's user and in its /work, which here is a workspace of the caller's that outlives
// the sandbox; a one-run sandbox refuses Exec.
func TestExecIntoALongLivedSandbox(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, NetworkOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	workspace := filepath.Join(t.TempDir(), "workspace")
	if err := os.Mkdir(workspace, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(workspace, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	sb, err := m.Start(ctx, Options{Args: []string{"/bin/sleep", "600"}, Limits: testLimits(),
		Lifetime: LongLived, Workspace: workspace})
	if err != nil {
		t.Fatal(err)
	}
	python := func(code string) (int, string) {
		t.Helper()
		out, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		status, err := sb.Exec(ctx, []string{"/usr/bin/python3", "-I", "-c", code}, &ExecOpts{Stdout: out, Stderr: out})
		if err != nil {
			t.Fatalf("exec %q: %v", code, err)
		}
		b, _ := io.ReadAll(io.NewSectionReader(out, 0, 1<<20))
		return status, strings.TrimSpace(string(b))
	}
	if status, out := python(`import os; open("note", "w").write("kept"); print(os.getuid(), os.getcwd())`); status != 0 || out != "65534 /work" {
		t.Errorf("first process: status %d, %q; want 0, \"65534 /work\"", status, out)
	}
	if status, out := python(`print(open("/work/note").read())`); status != 0 || out != "kept" {
		t.Errorf("second process: status %d, %q; want what the first wrote", status, out)
	}
	if status, _ := python(`raise SystemExit(7)`); status != 7 {
		t.Errorf("a process's exit status = %d; want 7", status)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(workspace, "note")); err != nil || string(b) != "kept" {
		t.Errorf("the workspace after the sandbox went: %q, %v", b, err)
	}

	once, err := m.Start(ctx, Options{Args: []string{"/bin/sleep", "600"}, Limits: testLimits()})
	if err != nil {
		t.Fatal(err)
	}
	defer once.Destroy(ctx)
	if _, err := once.Exec(ctx, []string{"/bin/true"}, nil); err == nil {
		t.Error("a one-run sandbox ran a second process")
	}
}
