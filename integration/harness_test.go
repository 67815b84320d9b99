// Package integration holds toolhost's end-to-end tests: the real toolhost
// binary with real plugin processes, over real sockets and websockets.
package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// bins holds the binaries built once for the whole package.
var bins struct {
	dir      string // bin folder: toolhost and plugins/
	toolhost string
	plugins  string // the folder of plugin binaries
}

func TestMain(m *testing.M) {
	// Where Go isn't (the VMs run this package's abuse test), the binaries
	// were built beforehand: TOOLHOST_TEST_BINS holds toolhost and plugins/.
	if dir := os.Getenv("TOOLHOST_TEST_BINS"); dir != "" {
		bins.dir, bins.toolhost, bins.plugins = dir, filepath.Join(dir, "toolhost"), filepath.Join(dir, "plugins")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "toolhost-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bins.dir = dir
	bins.toolhost = filepath.Join(dir, "toolhost")
	bins.plugins = filepath.Join(dir, "plugins")
	builds := [][2]string{
		{bins.toolhost, "../host/cmd/toolhost"},
		{filepath.Join(bins.plugins, "toolhost-plugin-echo"), "../examples/echo-kind"},
	}
	// Every test-only kind in testdata/<kind>-kind is built as toolhost-plugin-<kind>.
	testKinds, _ := filepath.Glob("./testdata/*-kind/main.go")
	for _, k := range testKinds {
		kind := strings.TrimSuffix(filepath.Base(filepath.Dir(k)), "-kind")
		builds = append(builds, [2]string{filepath.Join(bins.plugins, "toolhost-plugin-"+kind), "./" + filepath.Dir(k)})
	}
	kinds, _ := filepath.Glob("../plugins/*/main.go")
	for _, k := range kinds {
		kind := filepath.Base(filepath.Dir(k))
		builds = append(builds, [2]string{filepath.Join(bins.plugins, "toolhost-plugin-"+kind), "../plugins/" + kind})
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-o", b[0], b[1])
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b[1], err, out)
			os.Exit(2)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pin returns the SHA-256 of a built plugin.
func pin(t testing.TB, kind string) string {
	t.Helper()
	return fileSHA256(t, filepath.Join(bins.plugins, "toolhost-plugin-"+kind))
}

// fileSHA256 is the SHA-256 of a file, in lowercase hex.
func fileSHA256(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hostSpec describes a host to start.
type hostSpec struct {
	// Config is added to the generated toolhost.toml (after [server] and
	// [plugins] lines the harness writes).
	Config string
	// Pins, by kind; nil pins every built plugin correctly.
	Pins map[string]string
	// Tools are tool files (name -> TOML) written into tools_dir.
	Tools map[string]string
	// PluginDir overrides the plugin folder.
	PluginDir string
	// DrainSeconds is [server] drain_seconds. The harness's hosts don't
	// drain by default (0), so that stopping one is quick; a test of the
	// drain sets it.
	DrainSeconds int
}

// Host is a running toolhost process.
type Host struct {
	Addr   string
	Dir    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
}

type lockedWriter struct{ h *Host }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.h.stderr.Write(p)
}

// Stderr is what the host has logged so far.
func (h *Host) Stderr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// WaitLog waits until the host has logged want: the log is copied from
// the process by a goroutine, so it may lag behind what the host did.
func (h *Host) WaitLog(t testing.TB, want string, timeout time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(h.Stderr(), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// writeConfig writes the config of a spec into dir and returns its path.
func writeConfig(t testing.TB, dir, listen string, spec hostSpec) string {
	t.Helper()
	toolsDir := filepath.Join(dir, "tools")
	if err := os.MkdirAll(toolsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range spec.Tools {
		if err := os.WriteFile(filepath.Join(toolsDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pluginDir := spec.PluginDir
	if pluginDir == "" {
		pluginDir = bins.plugins
	}
	pins := spec.Pins
	if pins == nil {
		pins = map[string]string{}
		entries, _ := os.ReadDir(pluginDir)
		for _, e := range entries {
			if k, ok := strings.CutPrefix(e.Name(), "toolhost-plugin-"); ok {
				b, _ := os.ReadFile(filepath.Join(pluginDir, e.Name()))
				sum := sha256.Sum256(b)
				pins[k] = hex.EncodeToString(sum[:])
			}
		}
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "tools_dir = %q\n\n[server]\nlisten = %q\nstate_dir = %q\ndrain_seconds = %d\n\n[plugins]\ndir = %q\nstart_timeout_seconds = %d\n\n[plugins.sha256]\n",
		toolsDir, listen, filepath.Join(dir, "state"), spec.DrainSeconds, pluginDir, int(slow(30*time.Second).Seconds()))
	for k, v := range pins {
		fmt.Fprintf(&cfg, "%s = %q\n", k, v)
	}
	cfg.WriteString("\n" + spec.Config + "\n")
	path := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startHost starts `toolhost serve` and waits until /healthz answers.
func startHost(t testing.TB, spec hostSpec) *Host {
	t.Helper()
	return startHostIn(t, t.TempDir(), freePort(t), spec)
}

// startHostIn is startHost with the host's folder and address given: a
// second host started in the folder of one that stopped (or was killed)
// is that host restarted, with its state.
func startHostIn(t testing.TB, dir, addr string, spec hostSpec) *Host {
	t.Helper()
	return serveConfig(t, dir, addr, writeConfig(t, dir, addr, spec), slow(60*time.Second))
}

// serveConfig starts `toolhost serve` with the config file at path, which listens on addr, and
// waits up to wait for /healthz to answer. The host is stopped when the test ends.
func serveConfig(t testing.TB, dir, addr, path string, wait time.Duration) *Host {
	t.Helper()
	h := &Host{Addr: addr, Dir: dir, done: make(chan struct{})}
	h.cmd = exec.Command(bins.toolhost, "serve", "--config", path)
	h.cmd.Stdout = lockedWriter{h}
	h.cmd.Stderr = lockedWriter{h}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { h.Stop(t) })
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case <-h.done:
			t.Fatalf("the host exited at start:\n%s", h.Stderr())
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return h
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the host did not answer /healthz in time:\n%s", h.Stderr())
	return nil
}

// Stop stops the host with SIGTERM and waits for it.
func (h *Host) Stop(t testing.TB) {
	select {
	case <-h.done:
		return
	default:
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		t.Errorf("the host did not stop within 30 s of SIGTERM:\n%s", h.Stderr())
	}
}

// URL is a URL on the host.
// killHard kills the host and its plugins at once, as a crash of the
// service does (systemd then kills what is left of its control group).
func (h *Host) killHard(t testing.TB) {
	t.Helper()
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the host did not die")
	}
}

func (h *Host) URL(path string) string { return "http://" + h.Addr + path }

// postJSON posts a body and decodes the JSON answer.
func postJSON(t testing.TB, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("the answer of %s isn't JSON: %v\n%s", url, err, b)
	}
	return resp.StatusCode, m
}

// WS is a websocket client of the host.
type WS struct {
	t    testing.TB
	conn *websocket.Conn
}

func (h *Host) Dial(t testing.TB) *WS {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+h.Addr+"/api/v1/ws", nil)
	if err != nil {
		t.Fatalf("dialling the websocket: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &WS{t: t, conn: conn}
}

// Send writes a frame (a string as-is, anything else as JSON).
func (w *WS) Send(v any) {
	w.t.Helper()
	var err error
	if s, ok := v.(string); ok {
		err = w.conn.WriteMessage(websocket.TextMessage, []byte(s))
	} else {
		err = w.conn.WriteJSON(v)
	}
	if err != nil {
		w.t.Fatalf("sending: %v", err)
	}
}

// Frame is a decoded frame from the host.
type Frame map[string]any

func (f Frame) Str(k string) string { s, _ := f[k].(string); return s }

func (f Frame) Seq() int { n, _ := f["seq"].(float64); return int(n) }

func (f Frame) ErrorCode() string {
	e, _ := f["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (f Frame) ErrorMessage() string {
	e, _ := f["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

// Read reads one frame, failing the test after timeout.
func (w *WS) Read(timeout time.Duration) Frame {
	w.t.Helper()
	_ = w.conn.SetReadDeadline(time.Now().Add(timeout))
	_, data, err := w.conn.ReadMessage()
	if err != nil {
		w.t.Fatalf("reading a frame: %v", err)
	}
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		w.t.Fatalf("a frame isn't JSON: %v: %s", err, data)
	}
	return f
}

// UntilEnd reads the frames of call id until its result or error.
func (w *WS) UntilEnd(id string, timeout time.Duration) []Frame {
	w.t.Helper()
	var out []Frame
	for {
		f := w.Read(timeout)
		if f.Str("id") != id {
			continue
		}
		out = append(out, f)
		if f.Str("type") == "result" || f.Str("type") == "error" {
			return out
		}
	}
}
