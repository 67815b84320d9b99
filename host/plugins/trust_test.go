package plugins

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// replace puts the file src at path the way someone who can write the
// folder would: a new file renamed over the old one.
func replace(t *testing.T, path, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// setHook sets the manager's test hook, run just before a plugin's
// process is started.
func setHook(m *Manager, hook func(kind string)) {
	m.mu.Lock()
	m.beforeExec = hook
	m.mu.Unlock()
}

func pidOf(p *Plugin) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline (a bound for a broken build, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The attack: the pin is checked, then the file at the path is swapped for
// another program before the process starts. What runs must be what was
// checked.
func TestABinarySwappedAfterItsCheckIsNotWhatRuns(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "version", versionPinned)
	path := filepath.Join(dir, BinaryPrefix+"version")
	m := newManager(t, dir, map[string]string{"version": sum})
	swaps := 0
	setHook(m, func(string) {
		replace(t, path, versionSwapped)
		swaps++
	})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatalf("the pinned plugin was not started: %v", problems)
	}
	if swaps != 1 {
		t.Fatalf("the hook ran %d times, want once", swaps)
	}
	p, _ := m.Kind("version")
	if v := p.Info().Version; v != "pinned" {
		t.Fatalf("the plugin that runs says it is the %q build: the swapped binary ran instead of the pinned one", v)
	}
	res, err := p.Invoke(context.Background(), hostside.Invocation{Tool: sdk.Tool{Name: "v", Run: json.RawMessage(`{"type":"version"}`)}, Args: json.RawMessage(`{}`), RunID: "r1"}, nil)
	if err != nil || string(res) != `{"version":"pinned"}` {
		t.Fatalf("a run answered %s, %v; want the pinned build", res, err)
	}
}

// After the binary was replaced by one that isn't pinned, the plugin dies:
// its restart is refused with the pin message, on every try.
func TestARestartAfterTheBinaryWasReplacedIsRefused(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "version", versionPinned)
	path := filepath.Join(dir, BinaryPrefix+"version")
	m := NewManager(Options{Dir: dir, Pins: map[string]string{"version": sum}, StartTimeout: 10 * time.Second})
	t.Cleanup(func() { m.Stop(context.Background()) })
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatal(problems)
	}
	p, _ := m.Kind("version")
	replace(t, path, versionSwapped)
	if err := syscall.Kill(pidOf(p), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restart was refused", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.downErr != nil && strings.Contains(p.downErr.Error(), "does not match its pin")
	})
	_, err := p.Invoke(context.Background(), hostside.Invocation{Tool: sdk.Tool{Name: "v", Run: json.RawMessage(`{"type":"version"}`)}, Args: json.RawMessage(`{}`), RunID: "r1"}, nil)
	var ue *sdk.Error
	if !errors.As(err, &ue) || ue.Code != "plugin_unavailable" || !strings.Contains(ue.Message, "the version plugin "+path+" does not match its pin") {
		t.Fatalf("a run after the refused restart: %v", err)
	}
	if p.Up() || p.Restarts() != 0 {
		t.Fatalf("the replaced binary runs: up=%v restarts=%d", p.Up(), p.Restarts())
	}
}

// The plugin's process is the sealed copy that was hashed: ps shows the real
// path, it leads its own process group, it has none of the host's
// environment, and the copy's descriptor does not leak into it.
func TestAPluginRunsFromTheCopyThatWasHashed(t *testing.T) {
	t.Setenv("TOOLHOST_TEST_SECRET", "host-only")
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	path := filepath.Join(dir, BinaryPrefix+"echo")
	m := newManager(t, dir, map[string]string{"echo": sum})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatal(problems)
	}
	p, _ := m.Kind("echo")
	pid := pidOf(p)
	proc := fmt.Sprintf("/proc/%d/", pid)
	cmdline, err := os.ReadFile(proc + "cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 != path {
		t.Errorf("argv[0] = %q, want the binary's path %s", argv0, path)
	}
	if exe, _ := os.Readlink(proc + "exe"); !strings.HasPrefix(exe, "/memfd:"+BinaryPrefix+"echo") {
		t.Errorf("the process runs %q, want the sealed copy /memfd:%secho", exe, BinaryPrefix)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("process group %d (%v), want its own (%d)", pgid, err, pid)
	}
	environ, _ := os.ReadFile(proc + "environ")
	if strings.Contains(string(environ), "TOOLHOST_TEST_SECRET") {
		t.Errorf("the plugin got the host's environment: %q", environ)
	}
	fds, _ := os.ReadDir(proc + "fd")
	for _, fd := range fds {
		if target, _ := os.Readlink(proc + "fd/" + fd.Name()); strings.HasPrefix(target, "/memfd:") {
			t.Errorf("the plugin holds descriptor %s to %s", fd.Name(), target)
		}
	}
	// And the host keeps no descriptor of the copy once the plugin runs.
	fds, _ = os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, _ := os.Readlink("/proc/self/fd/" + fd.Name()); strings.HasPrefix(target, "/memfd:"+BinaryPrefix) {
			t.Errorf("the host still holds descriptor %s to %s", fd.Name(), target)
		}
	}
}

// A restart wakes, at once, the callers that were waiting for the plugin:
// the channel they hold is closed when it is up again (there is no poll to
// wake them otherwise).
func TestARestartWakesTheCallersWaitingForIt(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	m := newManager(t, dir, map[string]string{"echo": sum})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatal(problems)
	}
	p, _ := m.Kind("echo")
	held := make(chan chan struct{}, 1)
	waited := make(chan error, 1)
	setHook(m, func(string) {
		// The plugin is down and about to start again: what a caller
		// waiting now holds, and a caller waiting now.
		p.mu.Lock()
		held <- p.up
		p.mu.Unlock()
		go func() {
			_, _, err := p.current(context.Background())
			waited <- err
		}()
	})
	if err := syscall.Kill(pidOf(p), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var up chan struct{}
	select {
	case up = <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the plugin was not restarted")
	}
	waitFor(t, "the plugin was restarted", func() bool { return p.Restarts() == 1 && p.Up() })
	select {
	case <-up:
	default:
		t.Fatal("the plugin is up again, but the channel its waiting callers hold is still open: they would not wake")
	}
	if err := <-waited; err != nil {
		t.Fatalf("a caller waiting through the restart got %v", err)
	}
}

func TestAPluginFolderOthersCanWriteIsRefusedWhole(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, dir, map[string]string{"echo": sum})
	problems := m.Start(context.Background())
	want := fmt.Sprintf("the plugin folder %s is writable by group or others (mode 0777), so anyone on this machine could replace a plugin that toolhost runs as root; fix it with: chmod go-w %s", dir, dir)
	if len(problems) != 1 || problems[0].Kind != "" || problems[0].Error() != want {
		t.Fatalf("problems = %v\nwant one: %s", problems, want)
	}
	if kinds := m.Kinds(); len(kinds) != 0 {
		t.Fatalf("plugins were started from the folder: %v", kinds)
	}

	// The same folder, 0755 and owned by root, is fine.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckNotWritableByOthers(dir, "the plugin folder"); err != nil {
		t.Fatal(err)
	}
	m = newManager(t, dir, map[string]string{"echo": sum})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		t.Fatal(problems)
	}
}

func TestWhatOthersCouldChangeIsRefusedWithTheFix(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	const nobody = 65534
	t.Run("a folder of another user", func(t *testing.T) {
		dir := pluginDir(t)
		sum := install(t, dir, "echo", echoBinary)
		if err := os.Chown(dir, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		msg := problemOf(t, newManager(t, dir, map[string]string{"echo": sum}).Start(context.Background()), "")
		if !strings.Contains(msg, "the plugin folder "+dir+" belongs to uid 65534") || !strings.Contains(msg, "fix it with: chown root "+dir) {
			t.Errorf("got %s", msg)
		}
	})
	t.Run("a folder inside one others can write", func(t *testing.T) {
		parent := pluginDir(t)
		dir := filepath.Join(parent, "plugins")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		sum := install(t, dir, "echo", echoBinary)
		if err := os.Chmod(parent, 0o777); err != nil {
			t.Fatal(err)
		}
		msg := problemOf(t, newManager(t, dir, map[string]string{"echo": sum}).Start(context.Background()), "")
		want := fmt.Sprintf("the plugin folder %s is in the folder %s, which is writable by group or others (mode 0777), so anyone on this machine could replace a plugin that toolhost runs as root; fix it with: chmod go-w %s", dir, parent, parent)
		if msg != want {
			t.Errorf("got  %s\nwant %s", msg, want)
		}
	})
	t.Run("a folder inside a sticky one, like /tmp", func(t *testing.T) {
		parent := pluginDir(t)
		dir := filepath.Join(parent, "plugins")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(parent, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		if err := CheckNotWritableByOthers(dir, "the plugin folder"); err != nil {
			t.Errorf("refused: %v", err)
		}
	})
	t.Run("a pins file others can write", func(t *testing.T) {
		dir := pluginDir(t)
		sum := install(t, dir, "echo", echoBinary)
		pins := filepath.Join(pluginDir(t), "pins.toml")
		if err := os.WriteFile(pins, []byte(`echo = "`+sum+`"`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(pins, 0o666); err != nil {
			t.Fatal(err)
		}
		m := NewManager(Options{Dir: dir, Pins: map[string]string{"echo": sum}, PinsFile: pins})
		t.Cleanup(func() { m.Stop(context.Background()) })
		msg := problemOf(t, m.Start(context.Background()), "")
		want := fmt.Sprintf("the pins file %s is writable by group or others (mode 0666), so anyone on this machine could replace a plugin that toolhost runs as root; fix it with: chmod go-w %s", pins, pins)
		if msg != want {
			t.Errorf("got  %s\nwant %s", msg, want)
		}
		if len(m.Kinds()) != 0 {
			t.Errorf("plugins started: %v", m.Kinds())
		}
		if err := os.Chmod(pins, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(pins, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		if err := CheckNotWritableByOthers(pins, "the pins file"); err == nil || !strings.Contains(err.Error(), "fix it with: chown root "+pins) {
			t.Errorf("a pins file of another user: %v", err)
		}
	})
	t.Run("a binary others can write", func(t *testing.T) {
		dir := pluginDir(t)
		sum := install(t, dir, "echo", echoBinary)
		path := filepath.Join(dir, BinaryPrefix+"echo")
		if err := os.Chmod(path, 0o757); err != nil {
			t.Fatal(err)
		}
		msg := problemOf(t, newManager(t, dir, map[string]string{"echo": sum}).Start(context.Background()), "echo")
		want := fmt.Sprintf("the echo plugin %s is writable by group or others (mode 0757), so anyone on this machine could replace a plugin that toolhost runs as root; fix it with: chmod go-w %s", path, path)
		if msg != want {
			t.Errorf("got  %s\nwant %s", msg, want)
		}
	})
	t.Run("a binary of another user", func(t *testing.T) {
		dir := pluginDir(t)
		sum := install(t, dir, "echo", echoBinary)
		path := filepath.Join(dir, BinaryPrefix+"echo")
		if err := os.Chown(path, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		msg := problemOf(t, newManager(t, dir, map[string]string{"echo": sum}).Start(context.Background()), "echo")
		if !strings.Contains(msg, "belongs to uid 65534") || !strings.Contains(msg, "fix it with: chown root "+path) {
			t.Errorf("got %s", msg)
		}
	})
}

// A binary nobody may execute was never run before the host ran sealed
// copies; it still isn't.
func TestABinaryWithoutExecutePermissionIsNotRun(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	path := filepath.Join(dir, BinaryPrefix+"echo")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	msg := problemOf(t, newManager(t, dir, map[string]string{"echo": sum}).Start(context.Background()), "echo")
	if !strings.Contains(msg, "the echo plugin "+path+" is not executable (mode 0644)") || !strings.Contains(msg, "chmod +x "+path) {
		t.Errorf("got %s", msg)
	}
}

// runTestHost is the test binary run as a host: it starts the echo plugin
// of dir, prints its pid and waits to be killed.
func runTestHost(dir, pin string) int {
	m := NewManager(Options{Dir: dir, Pins: map[string]string{"echo": pin}, StartTimeout: 20 * time.Second})
	if problems := m.Start(context.Background()); len(problems) != 0 {
		fmt.Println(problems)
		return 1
	}
	p, _ := m.Kind("echo")
	fmt.Println(pidOf(p))
	select {}
}

// A host killed with SIGKILL takes its plugins with it (Pdeathsig), though
// they run from a copy in memory.
func TestAPluginDiesWithItsHost(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	host := exec.Command(os.Args[0])
	host.Env = append(os.Environ(), "TOOLHOST_PLUGINS_TEST_HOST="+dir, "TOOLHOST_PLUGINS_TEST_PIN="+sum)
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, convErr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || convErr != nil {
		t.Fatalf("the test host said %q (%v)", line, err)
	}
	t.Cleanup(func() {
		// Should the plugin outlive the test, end it (if that pid is still it).
		if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(cmdline), dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	waitFor(t, "the plugin died with its host", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(stat), ") Z")
	})
}

// Plugins that toolhost check starts are told so in their environment (sdk.CheckOnly), and only
// those: a serving host's plugins keep their pools.
func TestCheckOnlyPluginsAreToldSo(t *testing.T) {
	dir := pluginDir(t)
	sum := install(t, dir, "echo", echoBinary)
	for _, checkOnly := range []bool{false, true} {
		m := NewManager(Options{Dir: dir, Pins: map[string]string{"echo": sum}, StartTimeout: 20 * time.Second, CheckOnly: checkOnly})
		if problems := m.Start(context.Background()); len(problems) != 0 {
			t.Fatal(problems)
		}
		p, _ := m.Kind("echo")
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pidOf(p)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m.Stop(ctx)
		cancel()
		if got := strings.Contains(string(environ), sdk.CheckOnlyEnv+"=1"); got != checkOnly {
			t.Errorf("with CheckOnly %v the plugin's environment has %s=1: %v (%q)", checkOnly, sdk.CheckOnlyEnv, got, environ)
		}
	}
}
