package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
)

// testPlugins are real plugin binaries, built once: the example echo kind
// (this SDK, protocol 3) and the build of protocol 1 kept as a fixture.
var testPlugins struct {
	once     sync.Once
	dir, err string
	echo, v1 string
}

func buildTestPlugins(t *testing.T) (echo, v1 string) {
	t.Helper()
	testPlugins.once.Do(func() {
		dir, err := os.MkdirTemp("", "toolhost-cmd-plugins-")
		if err != nil {
			testPlugins.err = err.Error()
			return
		}
		testPlugins.dir = dir
		testPlugins.echo = filepath.Join(dir, "echo")
		testPlugins.v1 = filepath.Join(dir, "v1")
		for _, b := range [][2]string{{testPlugins.echo, "../../../examples/echo-kind"}, {testPlugins.v1, "../../../sdk/testdata/v1-kind"}} {
			if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
				testPlugins.err = fmt.Sprintf("building %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if testPlugins.err != "" {
		t.Fatal(testPlugins.err)
	}
	return testPlugins.echo, testPlugins.v1
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testPlugins.dir != "" {
		os.RemoveAll(testPlugins.dir)
	}
	os.Exit(code)
}

// site is a config with a plugin folder and a pins file, as an operator
// has them.
type site struct {
	dir, config, plugins, pins string
}

const pinsHeader = "# Pins of the plugins, one `kind = \"sha256\"` a line.\n# weather = \"0000\" is how a line looks.\n\n"

// newSite writes toolhost.toml (with extra appended) and a pins file
// holding a comment and one other pin; pinsFile false leaves
// sha256_file out.
func newSite(t *testing.T, pinsFile bool, extra string) site {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := site{dir: dir, config: filepath.Join(dir, "toolhost.toml"), plugins: filepath.Join(dir, "plugins"), pins: filepath.Join(dir, "pins.toml")}
	if err := os.Mkdir(s.plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("[server]\nstate_dir = %q\n\n[plugins]\ndir = %q\nstart_timeout_seconds = 30\n", filepath.Join(dir, "state"), s.plugins)
	if pinsFile {
		body += fmt.Sprintf("sha256_file = %q\n", s.pins)
		if err := os.WriteFile(s.pins, []byte(pinsHeader+"other = \""+strings.Repeat("a", 64)+"\" # kept\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.config, []byte(body+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// install copies a plugin binary into the site as toolhost-plugin-KIND
// and returns its SHA-256.
func (s site) install(t *testing.T, kind, src string, mode os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.plugins, "toolhost-plugin-"+kind)
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s site) readConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s site) readPins(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.pins)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// toolhost runs the command in-process, as the binary would.
func toolhost(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// serveProblems starts a host on the site's config as serve does and
// returns what it says of the plugin of kind ("" when it runs).
func serveProblems(t *testing.T, s site, kind string) string {
	t.Helper()
	cfg, err := config.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	h := host.New(cfg, hclog.NewNullLogger())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	problems := h.Start(ctx)
	defer h.Stop()
	for _, p := range problems.Plugins {
		if p.Kind == kind {
			return p.Err.Error()
		}
	}
	return ""
}

// TestPinThenServeAcceptsThePlugin: serve refuses a plugin nobody pinned;
// `plugins pin` shows its kind, version, negotiated protocol and hash and
// writes its line into the pins file, keeping the file's comments and
// other pins; serve then starts it. The v1 build is pinned the same way
// and shows protocol 1; `plugins list` shows both pinned with their
// protocols.
func TestPinThenServeAcceptsThePlugin(t *testing.T) {
	echo, v1 := buildTestPlugins(t)
	s := newSite(t, true, "")
	sum := s.install(t, "echo", echo, 0o755)
	v1sum := s.install(t, "v1", v1, 0o755)
	if msg := serveProblems(t, s, "echo"); !strings.Contains(msg, "is not pinned") {
		t.Fatalf("serve before the pin: %q", msg)
	}

	// echo is no kind of the pins file: its pin goes into the config,
	// in a [plugins.sha256] added at its end.
	configBefore := s.readConfig(t)
	code, out, errOut := toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 0 {
		t.Fatalf("pin: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"kind      echo", "version   1.0.0", "protocol  3 (this host speaks 1 to 3)", "sha256    " + sum,
		`pinned: echo = "` + sum + `" in ` + s.config + ":10, the config's [plugins.sha256], kept by upgrades"} {
		if !strings.Contains(out, want) {
			t.Errorf("pin's output lacks %q:\n%s", want, out)
		}
	}
	want := configBefore + "\n[plugins.sha256]\necho = \"" + sum + "\"\n"
	if got := s.readConfig(t); got != want {
		t.Fatalf("config:\n%s\nwant\n%s", got, want)
	}
	pinsBefore := pinsHeader + "other = \"" + strings.Repeat("a", 64) + "\" # kept\n"
	if got := s.readPins(t); got != pinsBefore {
		t.Fatalf("the pins file changed:\n%s", got)
	}
	if msg := serveProblems(t, s, "echo"); msg != "" {
		t.Fatalf("serve after the pin: %s", msg)
	}

	// Flags before the name work too.
	code, out, errOut = toolhost("plugins", "pin", "--config", s.config, "v1")
	if code != 0 || !strings.Contains(out, "protocol  1 (this host speaks 1 to 3)") || !strings.Contains(out, "version   1.0.0") {
		t.Fatalf("pin v1: exit %d\n%s%s", code, out, errOut)
	}
	if got := s.readConfig(t); got != want+"v1 = \""+v1sum+"\"\n" {
		t.Fatalf("config after v1:\n%s", got)
	}
	// Pinning again changes nothing.
	if code, out, _ := toolhost("plugins", "pin", "v1", "--config", s.config); code != 0 || !strings.Contains(out, "already pinned to this hash") {
		t.Fatalf("pin again: exit %d\n%s", code, out)
	}

	code, out, errOut = toolhost("plugins", "list", "--config", s.config)
	if code != 1 { // "other" is pinned but has no binary
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"echo   pinned              1.0.0    3",
		"other  pinned but missing  -        -",
		"v1     pinned              1.0.0    1",
		"other: pinned, but there is no toolhost-plugin-other in " + s.plugins,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
}

// TestPinRefusesWhatServeWouldRefuse: a binary others may write, a
// folder others may write, a binary that is not a toolhost plugin: each
// is refused in words saying why, before anything is written.
func TestPinRefusesWhatServeWouldRefuse(t *testing.T) {
	echo, _ := buildTestPlugins(t)
	s := newSite(t, true, "")
	before := s.readPins(t)

	s.install(t, "echo", echo, 0o775)
	code, out, errOut := toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 1 || !strings.Contains(errOut, "writable by group or others") || !strings.Contains(errOut, "chmod go-w") || !strings.Contains(errOut, "nothing was written") {
		t.Fatalf("group-writable binary: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "sha256") {
		t.Fatalf("a refused binary's pin was shown as if it were fine:\n%s", out)
	}

	s.install(t, "echo", echo, 0o755)
	if err := os.Chmod(s.plugins, 0o777); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 1 || !strings.Contains(errOut, "the plugin folder") || !strings.Contains(errOut, "writable by group or others") {
		t.Fatalf("folder anyone can write: exit %d\n%s", code, errOut)
	}
	if err := os.Chmod(s.plugins, 0o755); err != nil {
		t.Fatal(err)
	}

	marker := filepath.Join(t.TempDir(), "said-hello")
	script := filepath.Join(t.TempDir(), "fake")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello, I am not a plugin\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.install(t, "fake", script, 0o755)
	code, _, errOut = toolhost("plugins", "pin", "fake", "--config", s.config)
	if code != 1 || !strings.Contains(errOut, "did not start") || !strings.Contains(errOut, "is it a toolhost plugin") || !strings.Contains(errOut, "fake was not pinned") {
		t.Fatalf("not a plugin: exit %d\n%s", code, errOut)
	}
	if got := s.readPins(t); got != before {
		t.Fatalf("the pins file changed after refusals:\n%s", got)
	}
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".new-") {
			t.Fatalf("a temporary file was left: %s", e.Name())
		}
	}
}

// TestPinSaysWhatToDo: a binary missing, a name that is not a kind (a
// path out of the folder, say), no command: each says what is wrong and
// what to do, with exit 1 (2 for usage), and writes nothing.
func TestPinSaysWhatToDo(t *testing.T) {
	echo, _ := buildTestPlugins(t)
	s := newSite(t, true, "")
	s.install(t, "echo", echo, 0o755)
	before, configBefore := s.readPins(t), s.readConfig(t)

	code, _, errOut := toolhost("plugins", "pin", "weather", "--config", s.config)
	if code != 1 || !strings.Contains(errOut, "there is no toolhost-plugin-weather in "+s.plugins) || !strings.Contains(errOut, "it holds toolhost-plugin-echo (kinds echo)") {
		t.Fatalf("missing binary: exit %d\n%s", code, errOut)
	}

	for _, args := range [][]string{
		{"plugins", "pin", "../../bin/sh", "--config", s.config},
		{"plugins", "pin", "--config", s.config},
		{"plugins", "pin", "a", "b", "--config", s.config},
		{"plugins"},
		{"plugins", "frob"},
		{"plugins", "list", "extra"},
	} {
		if code, _, errOut := toolhost(args...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, %q; want 2 and why", args, code, errOut)
		}
	}
	if s.readPins(t) != before || s.readConfig(t) != configBefore {
		t.Fatal("the pins file or the config changed")
	}
}

// TestPinWithoutAPinsFile: with no sha256_file named, or one named but
// not made yet (a fresh machine), a kind's pin goes into the config; the
// pins file is not made.
func TestPinWithoutAPinsFile(t *testing.T) {
	echo, _ := buildTestPlugins(t)
	for _, named := range []bool{false, true} {
		s := newSite(t, named, "")
		if named {
			if err := os.Remove(s.pins); err != nil {
				t.Fatal(err)
			}
		}
		sum := s.install(t, "echo", echo, 0o755)
		before := s.readConfig(t)
		if code, out, errOut := toolhost("plugins", "pin", "echo", "--config", s.config); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		if got := s.readConfig(t); got != before+"\n[plugins.sha256]\necho = \""+sum+"\"\n" {
			t.Fatalf("config: %q", got)
		}
		if _, err := os.Lstat(s.pins); err == nil {
			t.Fatal("the pins file was made")
		}
	}
}

// TestListNeverStartsAnUnpinnedOrChangedBinary: a binary replaced after
// its pin shows "hash differs", an unpinned one "not pinned"; neither is
// run (each would leave a mark), and list exits 1 saying what to do.
func TestListNeverStartsAnUnpinnedOrChangedBinary(t *testing.T) {
	echo, _ := buildTestPlugins(t)
	s := newSite(t, true, "")
	if err := os.WriteFile(s.pins, []byte(pinsHeader), 0o644); err != nil {
		t.Fatal(err)
	}
	s.install(t, "echo", echo, 0o755)
	if code, out, errOut := toolhost("plugins", "pin", "echo", "--config", s.config); code != 0 {
		t.Fatalf("pin: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := toolhost("plugins", "list", "--config", s.config); code != 0 || !strings.Contains(out, "echo  pinned  1.0.0    3") {
		t.Fatalf("list of a pinned plugin: exit %d\n%s%s", code, out, errOut)
	}

	marks := t.TempDir()
	for _, kind := range []string{"echo", "stray"} {
		script := filepath.Join(t.TempDir(), kind)
		if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+filepath.Join(marks, kind)+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		s.install(t, kind, script, 0o755)
	}
	code, out, errOut := toolhost("plugins", "list", "--config", s.config)
	if code != 1 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"echo   hash differs  not started: hash differs  -",
		"stray  not pinned    not started: not pinned    -",
		"echo: " + filepath.Join(s.plugins, "toolhost-plugin-echo") + " has SHA-256",
		"toolhost plugins pin stray --config " + s.config,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if entries, _ := os.ReadDir(marks); len(entries) != 0 {
		t.Fatalf("list ran a binary that does not match a pin: %v", entries)
	}
}

// exampleSite is examples/toolhost.toml as installed: copied into
// dir/etc (mode 0640), so its paths (../bin/plugins, ../bin/pins.toml,
// ../build/...) point into dir, with the package's pins file in dir/bin.
func exampleSite(t *testing.T, pins string) site {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := site{dir: dir, config: filepath.Join(dir, "etc", "toolhost.toml"), plugins: filepath.Join(dir, "bin", "plugins"), pins: filepath.Join(dir, "bin", "pins.toml")}
	for _, d := range []string{"etc", "etc/tools", "bin/plugins"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("../../../examples/toolhost.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.config, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.pins, []byte(pins), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPinOfAThirdPartyKindSurvivesAnUpgrade: in the installed config
// (the example's), `plugins pin` writes a third-party kind's pin into the
// config's [plugins.sha256], under its commented example line, keeping
// every other line, the mode 0640 and the owner, and says where; the pins
// file, which the package owns, is untouched. An upgrade then replaces the
// pins file wholesale, and the kind is still pinned and served.
func TestPinOfAThirdPartyKindSurvivesAnUpgrade(t *testing.T) {
	echo, _ := buildTestPlugins(t)
	pkgPins := "# Written by `make build`.\nhttp = \"" + strings.Repeat("a", 64) + "\"\n"
	s := exampleSite(t, pkgPins)
	sum := s.install(t, "echo", echo, 0o755)
	before := s.readConfig(t)

	code, out, errOut := toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 0 {
		t.Fatalf("pin: exit %d\n%s%s", code, out, errOut)
	}
	comment := "[plugins.sha256]\n# weather = \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"\n"
	pin := "echo = \"" + sum + "\"\n"
	if !strings.Contains(before, comment) {
		t.Fatal("the example config has no commented example pin under [plugins.sha256]")
	}
	want := strings.Replace(before, comment, comment+pin, 1)
	if got := s.readConfig(t); got != want {
		t.Fatalf("config:\n%s", got)
	}
	line := strings.Count(before[:strings.Index(before, comment)+len(comment)], "\n") + 1
	if !strings.Contains(out, fmt.Sprintf("pinned: echo = %q in %s:%d", sum, s.config, line)) {
		t.Fatalf("pin does not say the file and line %d:\n%s", line, out)
	}
	if fi, _ := os.Stat(s.config); fi.Mode().Perm() != 0o640 {
		t.Fatalf("the config is now mode %04o, not 0640", fi.Mode().Perm())
	}
	if got := s.readPins(t); got != pkgPins {
		t.Fatalf("the package's pins file changed:\n%s", got)
	}

	// The upgrade: the package's new pins file replaces the old.
	if err := os.Remove(s.pins); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.pins, []byte("# Written by `make build`.\nhttp = \""+strings.Repeat("b", 64)+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Plugins.SHA256["echo"] != sum {
		t.Fatalf("after the upgrade echo is not pinned: %v", cfg.Plugins.SHA256)
	}
	if msg := serveProblems(t, s, "echo"); msg != "" {
		t.Fatalf("serve after the upgrade: %s", msg)
	}
	code, out, errOut = toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("already pinned to this hash in %s:%d", s.config, line)) {
		t.Fatalf("pin again: exit %d\n%s%s", code, out, errOut)
	}
}

// TestRepinStaysWhereTheKindIsPinned: a kind the pins file pins (a
// built-in one, as `make build` pins it) is re-pinned there, the config
// untouched; a kind the config pins has its line there replaced, its
// comment kept; a kind pinned in both is refused, naming both lines.
func TestRepinStaysWhereTheKindIsPinned(t *testing.T) {
	echo, _ := buildTestPlugins(t)
	old := strings.Repeat("c", 64)
	s := newSite(t, true, "")
	if err := os.WriteFile(s.pins, []byte(pinsHeader+"echo = \""+old+"\" # built in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := s.install(t, "echo", echo, 0o755)
	configBefore := s.readConfig(t)
	code, out, errOut := toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("pinned: echo = %q in %s:4, the pins file, where the kind was pinned (it was cccccccccccc…)", sum, s.pins)) {
		t.Fatalf("re-pin of a built-in kind: exit %d\n%s%s", code, out, errOut)
	}
	if got := s.readPins(t); got != pinsHeader+"echo = \""+sum+"\" # built in\n" {
		t.Fatalf("pins file:\n%s", got)
	}
	if s.readConfig(t) != configBefore {
		t.Fatal("the config changed")
	}

	s = newSite(t, true, "\n[plugins.sha256]\n# pinned by hand\necho = \""+old+"\" # mine\n")
	sum = s.install(t, "echo", echo, 0o755)
	pinsBefore, configBefore := s.readPins(t), s.readConfig(t)
	code, out, errOut = toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("in %s:11, the config's [plugins.sha256], kept by upgrades (it was cccccccccccc…)", s.config)) {
		t.Fatalf("re-pin of a kind the config pins: exit %d\n%s%s", code, out, errOut)
	}
	if got := s.readConfig(t); got != strings.Replace(configBefore, old, sum, 1) {
		t.Fatalf("config:\n%s", got)
	}
	if s.readPins(t) != pinsBefore {
		t.Fatal("the pins file changed")
	}

	if err := os.WriteFile(s.pins, []byte("echo = \""+sum+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	configBefore = s.readConfig(t)
	code, _, errOut = toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("echo is pinned twice, in %s:11 ([plugins.sha256]) and in %s:1", s.config, s.pins)) || !strings.Contains(errOut, "nothing was written") {
		t.Fatalf("pinned twice: exit %d\n%s", code, errOut)
	}
	if s.readConfig(t) != configBefore {
		t.Fatal("the config changed")
	}
}

// TestPinRefusesPinsWrittenInline: pins written as an inline table under
// [plugins] are not edited: pin says to add the line by hand and shows
// it, exits 1, and the config is as it was, with no file left beside it.
func TestPinRefusesPinsWrittenInline(t *testing.T) {
	echo, _ := buildTestPlugins(t)
	s := newSite(t, false, "sha256 = { other = \""+strings.Repeat("a", 64)+"\" } # by hand\n")
	sum := s.install(t, "echo", echo, 0o755)
	before := s.readConfig(t)
	code, _, errOut := toolhost("plugins", "pin", "echo", "--config", s.config)
	if code != 1 || !strings.Contains(errOut, s.config+":7 pins plugins with dotted keys or an inline table (sha256 = …)") ||
		!strings.Contains(errOut, "add it by hand") || !strings.Contains(errOut, "\n    echo = \""+sum+"\"\n") {
		t.Fatalf("inline table: exit %d\n%s", code, errOut)
	}
	if s.readConfig(t) != before {
		t.Fatal("the config changed")
	}
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".new-") {
			t.Fatalf("a temporary file was left: %s", e.Name())
		}
	}
}
