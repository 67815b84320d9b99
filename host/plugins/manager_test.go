package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// The plugins the tests run, built once per test binary: the example echo
// kind, two builds of the "version" kind that say which build they are,
// and the build of plugin protocol 1 kept in sdk/testdata/v1-kind.
var echoBinary, versionPinned, versionSwapped, v1Binary string

func TestMain(m *testing.M) {
	if dir := os.Getenv("TOOLHOST_PLUGINS_TEST_HOST"); dir != "" {
		os.Exit(runTestHost(dir, os.Getenv("TOOLHOST_PLUGINS_TEST_PIN")))
	}
	dir, err := os.MkdirTemp("", "toolhost-plugins-test-")
	if err != nil {
		panic(err)
	}
	echoBinary = filepath.Join(dir, "echo")
	versionPinned = filepath.Join(dir, "version-pinned")
	versionSwapped = filepath.Join(dir, "version-swapped")
	v1Binary = filepath.Join(dir, "v1")
	for _, b := range [][]string{
		{"-o", echoBinary, "../../examples/echo-kind"},
		{"-ldflags", "-X main.version=pinned", "-o", versionPinned, "./testdata/version-kind"},
		{"-ldflags", "-X main.version=swapped", "-o", versionSwapped, "./testdata/version-kind"},
		{"-o", v1Binary, "../../sdk/testdata/v1-kind"},
	} {
		if out, err := exec.Command("go", append([]string{"build"}, b...)...).CombinedOutput(); err != nil {
			panic(string(out))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// install copies a binary into dir as toolhost-plugin-<kind> and returns
// its SHA-256.
func install(t *testing.T, dir, kind, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, BinaryPrefix+kind), b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// pluginDir is a fresh plugin folder only its owner can write, as the
// manager requires (t.TempDir follows the umask).
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newManager(t *testing.T, dir string, pins map[string]string) *Manager {
	m := NewManager(Options{Dir: dir, Pins: pins, StartTimeout: 20 * time.Second, PinsHint: "[plugins.sha256] in test.toml"})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Stop(ctx)
	})
	return m
}

func problemOf(t *testing.T, problems []Problem, kind string) string {
	t.Helper()
	for _, p := range problems {
		if p.Kind == kind {
			return p.Error()
		}
	}
	t.Fatalf("no problem reported for %s: %v", kind, problems)
	return ""
}

func TestPinsAreEnforcedWithTheLineToAdd(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	line := `echo = "` + sum + `"`

	msg := problemOf(t, newManager(t, dir, nil).Start(context.Background()), "echo")
	if !strings.Contains(msg, "is not pinned") || !strings.Contains(msg, "[plugins.sha256] in test.toml") || !strings.Contains(msg, line) {
		t.Errorf("unpinned: %s", msg)
	}
	msg = problemOf(t, newManager(t, dir, map[string]string{"echo": strings.Repeat("0", 64)}).Start(context.Background()), "echo")
	if !strings.Contains(msg, "does not match its pin") || !strings.Contains(msg, line) {
		t.Errorf("mismatch: %s", msg)
	}
	msg = problemOf(t, newManager(t, dir, map[string]string{"echo": "xyz"}).Start(context.Background()), "echo")
	if !strings.Contains(msg, "not a SHA-256 in hex") {
		t.Errorf("bad pin: %s", msg)
	}
	m := newManager(t, dir, map[string]string{"echo": sum})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatalf("a pinned plugin was refused: %v", problems)
	}
	if got := m.Kinds(); len(got) != 1 || got[0] != "echo" {
		t.Fatalf("kinds = %v", got)
	}
}

func TestABinaryThatIsNotAPluginIsRefusedClearly(t *testing.T) {
	dir := pluginDir(t)
	script := filepath.Join(t.TempDir(), "fake")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello, I am not a plugin\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := install(t, dir, "fake", script)
	m := NewManager(Options{Dir: dir, Pins: map[string]string{"fake": sum}, StartTimeout: 2 * time.Second})
	defer m.Stop(context.Background())
	msg := problemOf(t, m.Start(context.Background()), "fake")
	if !strings.Contains(msg, "the fake plugin") || !strings.Contains(msg, "did not start") || !strings.Contains(msg, "something other than the plugin handshake") {
		t.Errorf("got %s", msg)
	}
}

func TestAPluginNamedForAnotherKindIsRefused(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "other", echoBinary)
	msg := problemOf(t, newManager(t, dir, map[string]string{"other": sum}).Start(context.Background()), "other")
	if !strings.Contains(msg, `says it is the "echo" kind, but its file name says "other"`) {
		t.Errorf("got %s", msg)
	}
}

func TestADeadPluginIsRestartedAndItsRunFailsAsCrashed(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	m := newManager(t, dir, map[string]string{"echo": sum})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatal(problems)
	}
	p, _ := m.Kind("echo")
	tool := sdk.Tool{Name: "t", Run: json.RawMessage(`{"type":"echo","delay_ms":5000}`)}
	done := make(chan error, 1)
	go func() {
		_, err := p.Invoke(context.Background(), hostside.Invocation{Tool: tool, Args: json.RawMessage(`{"a":1}`), RunID: "r1"}, nil)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ue *sdk.Error
	if err := <-done; !errors.As(err, &ue) || ue.Code != "plugin_crashed" {
		t.Fatalf("the run ended with %v, want plugin_crashed", err)
	}
	tool.Run = json.RawMessage(`{"type":"echo"}`)
	res, err := p.Invoke(context.Background(), hostside.Invocation{Tool: tool, Args: json.RawMessage(`{"a":1}`), RunID: "r2"}, nil)
	if err != nil || string(res) != `{"echoed":{"a":1}}` {
		t.Fatalf("after the restart: %s, %v", res, err)
	}
	p.mu.Lock()
	newPID := p.cmd.Process.Pid
	p.mu.Unlock()
	if newPID == pid {
		t.Fatal("the plugin was not restarted")
	}
}

func TestStopLeavesNoProcess(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	m := NewManager(Options{Dir: dir, Pins: map[string]string{"echo": sum}})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatal(problems)
	}
	p, _ := m.Kind("echo")
	pid := p.cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Stop(ctx)
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, 0); err == nil {
		if stat, _ := os.ReadFile("/proc/" + itoa(pid) + "/stat"); !strings.Contains(string(stat), ") Z") {
			t.Fatalf("plugin process %d still runs after Stop", pid)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
