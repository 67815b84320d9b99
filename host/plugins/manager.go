// Package plugins finds, verifies, starts, watches and stops the host's
// tool-kind plugin processes. Each kind is one process: pinned by SHA-256
// and started from a sealed in-memory copy of the bytes that were hashed,
// with a small explicit environment in a process group of its own,
// restarted with backoff when it dies, and stopped with the host. A plugin
// folder, binary or pins file that anyone but root and the host's user
// could change is refused.
package plugins

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// BinaryPrefix starts the file name of every plugin binary.
const BinaryPrefix = "toolhost-plugin-"

// The flow-control windows of the connection to a plugin: a stream may
// have streamWindow bytes sent and not yet read, all of them connWindow.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// pluginEnv is the whole environment a plugin gets: nothing of the host's.
var pluginEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent"}

// Options configure a Manager.
type Options struct {
	// Dir holds the plugin binaries, toolhost-plugin-<kind>.
	Dir string
	// Pins maps a kind to the hex SHA-256 its binary must have.
	Pins map[string]string
	// StartTimeout bounds a plugin's handshake.
	StartTimeout time.Duration
	// KindConfig gives the config table handed to a kind's Configure,
	// given what the kind said of itself (its config schema).
	KindConfig func(kind string, info sdk.Info) json.RawMessage
	// NoConfigure starts plugins without configuring them, only to ask
	// them questions that need no config (toolhost doctor).
	NoConfigure bool
	// CheckOnly tells the plugins that the host only checks the config
	// and its tools (toolhost check): sdk.CheckOnlyEnv in their
	// environment.
	CheckOnly bool
	// Host gives the Host served to the plugin of a kind for its nested
	// calls (runs.Dispatcher.ForKind, which takes only calls under runs
	// of that kind); nil serves none.
	Host func(kind string) sdk.Host
	// Logger receives the manager's and the plugins' logs.
	Logger hclog.Logger
	// PinsHint names where a missing pin line should be added, for messages.
	PinsHint string
	// PinsFile is the file the pins were read from, if any: like Dir, it
	// is refused when others could change it.
	PinsFile string
}

// Manager runs every plugin found in Options.Dir.
type Manager struct {
	opts    Options
	mu      sync.Mutex
	plugins map[string]*Plugin
	// beforeExec, for tests, runs once a plugin's binary is checked and
	// just before its process starts.
	beforeExec func(kind string)
}

// NewManager returns a Manager; Start finds and starts the plugins.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.PinsHint == "" {
		opts.PinsHint = "[plugins.sha256] in toolhost.toml"
	}
	return &Manager{opts: opts, plugins: map[string]*Plugin{}}
}

// hostFor is the Host served to the plugin of kind, or nil.
func (m *Manager) hostFor(kind string) sdk.Host {
	if m.opts.Host == nil {
		return nil
	}
	return m.opts.Host(kind)
}

// Problem is a plugin that could not be started, and why.
type Problem struct {
	Kind string
	Err  error
}

func (p Problem) Error() string { return p.Err.Error() }

// Start finds every plugin binary in the folder and starts it. Plugins that
// can't be used are returned as problems; the others are running. A plugin
// folder or pins file that others could change is one problem (with no
// Kind), and then no plugin is started.
func (m *Manager) Start(ctx context.Context) []Problem {
	if err := m.checkTrust(); err != nil {
		return []Problem{{Err: err}}
	}
	entries, err := os.ReadDir(m.opts.Dir)
	if err != nil {
		return []Problem{{Err: fmt.Errorf("the plugin folder %s can't be read: %w", m.opts.Dir, err)}}
	}
	var problems []Problem
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, BinaryPrefix) {
			continue
		}
		kind := strings.TrimPrefix(name, BinaryPrefix)
		p := &Plugin{kind: kind, path: filepath.Join(m.opts.Dir, name), m: m, up: make(chan struct{})}
		if err := p.start(ctx); err != nil {
			problems = append(problems, Problem{Kind: kind, Err: err})
			continue
		}
		go p.watch()
		m.mu.Lock()
		m.plugins[kind] = p
		m.mu.Unlock()
	}
	return problems
}

// checkTrust refuses a plugin folder or pins file that others could change.
func (m *Manager) checkTrust() error {
	if err := CheckNotWritableByOthers(m.opts.Dir, "the plugin folder"); err != nil {
		return err
	}
	if m.opts.PinsFile != "" {
		return CheckNotWritableByOthers(m.opts.PinsFile, "the pins file")
	}
	return nil
}

func (m *Manager) hookBeforeExec(kind string) {
	m.mu.Lock()
	hook := m.beforeExec
	m.mu.Unlock()
	if hook != nil {
		hook(kind)
	}
}

// Kind returns the running plugin of a kind.
func (m *Manager) Kind(kind string) (*Plugin, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.plugins[kind]
	return p, ok
}

// Kinds lists the kinds that have a running plugin.
func (m *Manager) Kinds() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.plugins))
	for k := range m.plugins {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Stop asks every plugin to stop, and kills what is still running when
// ctx ends. Nothing the plugins started outlives this call.
func (m *Manager) Stop(ctx context.Context) {
	m.mu.Lock()
	ps := make([]*Plugin, 0, len(m.plugins))
	for _, p := range m.plugins {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(ctx)
		}()
	}
	wg.Wait()
}

// Plugin is one kind's plugin process, restarted when it dies.
type Plugin struct {
	kind string
	path string
	m    *Manager

	mu     sync.Mutex
	client *plugin.Client
	kc     *hostside.KindClient
	cmd    *exec.Cmd
	info   sdk.Info
	// protocol is the plugin protocol version negotiated with the
	// running process (go-plugin picks the highest both speak), and
	// sha256 the hash of the bytes it runs.
	protocol int
	sha256   string
	stopping bool
	// up is closed when the plugin comes up, waking every caller waiting
	// on it; a fresh one is made when it goes down.
	up       chan struct{}
	downErr  error
	restarts int
}

// Path is the plugin's binary.
func (p *Plugin) Path() string { return p.path }

// Info is what the plugin said of itself.
func (p *Plugin) Info() sdk.Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// Protocol is the plugin protocol version the host and the plugin
// negotiated at its last start (0 before the first): the highest both
// speak, 1 for a plugin built before version 2.
func (p *Plugin) Protocol() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.protocol
}

// SHA256 is the hex SHA-256 of the bytes the plugin's process runs, as
// checked against its pin at its last start ("" before the first).
func (p *Plugin) SHA256() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sha256
}

// load reads the binary once into a sealed copy in memory, hashing what it
// copies, and checks the hash against the pin, saying the exact line to add
// when it has none or the wrong one. The plugin is started from that copy.
func (p *Plugin) load() (*os.File, bool, string, error) {
	f, err := os.Open(p.path)
	if err != nil {
		return nil, false, "", fmt.Errorf("the %s plugin %s can't be read: %w", p.kind, p.path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, "", fmt.Errorf("the %s plugin %s can't be read: %w", p.kind, p.path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, "", fmt.Errorf("the %s plugin %s is not a file, so it was not started", p.kind, p.path)
	}
	if err := checkOwnerAndMode(fi, fmt.Sprintf("the %s plugin %s", p.kind, p.path), p.path); err != nil {
		return nil, false, "", err
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return nil, false, "", fmt.Errorf("the %s plugin %s is not executable (mode %04o), so it was not started: if it should run, fix it with: chmod +x %s",
			p.kind, p.path, fi.Mode().Perm(), p.path)
	}
	image, sum, script, err := sealedCopy(f, BinaryPrefix+p.kind)
	if err != nil {
		return nil, false, "", fmt.Errorf("the %s plugin %s %w", p.kind, p.path, err)
	}
	if err := p.checkPin(sum); err != nil {
		image.Close()
		return nil, false, "", err
	}
	return image, script, hex.EncodeToString(sum), nil
}

// checkPin compares a binary's hash with its pin.
func (p *Plugin) checkPin(sum []byte) error {
	line := fmt.Sprintf("%s = %q", p.kind, hex.EncodeToString(sum))
	pin, ok := p.m.opts.Pins[p.kind]
	if !ok {
		return fmt.Errorf("the %s plugin %s is not pinned, so it was not started: if you trust this binary, add this line under %s:\n    %s",
			p.kind, p.path, p.m.opts.PinsHint, line)
	}
	want, err := hex.DecodeString(pin)
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("the pin of the %s plugin is not a SHA-256 in hex (64 characters 0-9a-f): %q", p.kind, pin)
	}
	if subtle.ConstantTimeCompare(want, sum) != 1 {
		return fmt.Errorf("the %s plugin %s does not match its pin (SHA-256 %s…, the pin says %s…), so it was not started: if you trust this binary, change its line under %s to:\n    %s",
			p.kind, p.path, hex.EncodeToString(sum)[:12], pin[:12], p.m.opts.PinsHint, line)
	}
	return nil
}

// start checks the binary against its pin, launches the process from the
// copy that was checked, checks it speaks our protocol and is the kind its
// name says, and configures it.
func (p *Plugin) start(ctx context.Context) error {
	image, script, sum, err := p.load()
	if err != nil {
		return err
	}
	// The parent's descriptor of the copy is not needed once the process
	// runs: the process holds the copy itself.
	defer image.Close()
	cmd := p.command(image, script)
	logger := p.m.opts.Logger.Named(p.kind)
	client := p.newClient(cmd, logger)
	// kill ends the process and everything it started, at once: a plugin
	// that failed its start gets no grace period.
	kill := func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		client.Kill()
	}
	p.m.hookBeforeExec(p.kind)
	kc, info, err := p.handshake(ctx, client)
	if err != nil {
		kill()
		return err
	}
	if err := p.configure(ctx, kc, info); err != nil {
		kill()
		return err
	}
	if err := p.publish(client, kc, cmd, info, sum, logger); err != nil {
		kill()
		return err
	}
	return nil
}

// command is the command that runs the plugin from image, its checked
// and sealed copy (a script's interpreter reads it as descriptor 3).
func (p *Plugin) command(image *os.File, script bool) *exec.Cmd {
	// The kernel executes the sealed copy; argv[0] stays the real path, for
	// ps and logs. The copy is close-on-exec, so no other program the host
	// starts gets it, and neither does the plugin: its exec opened the copy
	// before closing the descriptor. A script is read by its interpreter
	// after the exec, so it gets the copy as descriptor 3.
	cmd := &exec.Cmd{Path: fmt.Sprintf("/proc/self/fd/%d", image.Fd()), Args: []string{p.path}}
	if script {
		cmd.ExtraFiles = []*os.File{image}
		cmd.Path = "/proc/self/fd/3"
	}
	cmd.Env = append([]string(nil), pluginEnv...)
	if p.m.opts.CheckOnly {
		cmd.Env = append(cmd.Env, sdk.CheckOnlyEnv+"=1")
	}
	cmd.Dir = "/"
	// A process group of its own, so stop can kill whatever it started;
	// and killed if the host dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// newClient is the go-plugin client that will run cmd and speak gRPC with
// it; nothing is started yet.
func (p *Plugin) newClient(cmd *exec.Cmd, logger hclog.Logger) *plugin.Client {
	return plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: hostside.PluginSets(p.m.hostFor(p.kind)),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// No SecureConfig: load hashed the very bytes the process runs,
		// and the copy is sealed. SecureConfig would only hash the same
		// copy again (Cmd.Path names it), and checking by path is the race
		// this replaces.
		StartTimeout: p.m.opts.StartTimeout,
		SkipHostEnv:  true,
		Logger:       logger,
		Stderr:       io.Discard,
		SyncStdout:   io.Discard,
		SyncStderr:   io.Discard,
		// The connection to the plugin never goes idle: gRPC's default
		// (30 minutes) would close it and re-dial go-plugin's socket in
		// a temporary folder, which a /tmp cleaner may have removed by
		// then. A host sits idle for hours.
		//
		// The windows are fixed (gRPC otherwise grows them with the
		// bandwidth it measures, up to 16 MiB a stream): what a plugin
		// sends ahead of the host's reading, such as a session's file
		// downloaded by a slow caller, is at most streamWindow a stream.
		GRPCDialOptions: []grpc.DialOption{grpc.WithIdleTimeout(0),
			grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow)},
	})
}

// handshake starts the process, takes its tool kind and asks it to
// describe itself, refusing a plugin that says it is another kind than
// its file name. The caller kills the process when it fails.
func (p *Plugin) handshake(ctx context.Context, client *plugin.Client) (*hostside.KindClient, sdk.Info, error) {
	rpc, err := client.Client()
	if err != nil {
		return nil, sdk.Info{}, fmt.Errorf("the %s plugin %s did not start: %w", p.kind, p.path, explainStart(err))
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		return nil, sdk.Info{}, fmt.Errorf("the %s plugin serves no tool kind: %w", p.kind, err)
	}
	kc := raw.(*hostside.KindClient)
	info, _, err := kc.Describe(ctx)
	if err != nil {
		return nil, sdk.Info{}, fmt.Errorf("the %s plugin: %w", p.kind, err)
	}
	if info.Kind != p.kind {
		return nil, sdk.Info{}, fmt.Errorf("the plugin %s says it is the %q kind, but its file name says %q", p.path, info.Kind, p.kind)
	}
	return kc, info, nil
}

// configure gives the plugin its kind's config table (none when the
// manager only asks questions); a table the kind refuses is a
// *ConfigError. The caller kills the process when it fails.
func (p *Plugin) configure(ctx context.Context, kc *hostside.KindClient, info sdk.Info) error {
	cfg := json.RawMessage("{}")
	if p.m.opts.KindConfig != nil {
		cfg = p.m.opts.KindConfig(p.kind, info)
	}
	if p.m.opts.NoConfigure {
		// Asked questions only: nothing to configure.
	} else if err := kc.Configure(ctx, cfg); err != nil {
		var fe sdk.FieldErrors
		if errors.As(err, &fe) {
			return &ConfigError{Kind: p.kind, Errors: fe}
		}
		return fmt.Errorf("the %s plugin: %w", p.kind, err)
	}
	return nil
}

// publish makes the started process the plugin's current one and wakes
// every caller waiting for it, unless Stop ran meanwhile: then it is an
// error, and the caller kills the process.
func (p *Plugin) publish(client *plugin.Client, kc *hostside.KindClient, cmd *exec.Cmd, info sdk.Info, sum string, logger hclog.Logger) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		// Stop ran while this restart was under way and found nothing to stop.
		return fmt.Errorf("the %s plugin was stopped while it started", p.kind)
	}
	logger.Info("plugin started", "path", p.path, "version", info.Version, "protocol", client.NegotiatedVersion())
	p.client, p.kc, p.cmd, p.info = client, kc, cmd, info
	p.protocol, p.sha256 = client.NegotiatedVersion(), sum
	p.downErr = nil
	select {
	case <-p.up:
	default:
		close(p.up) // wakes every caller waiting in current
	}
	return nil
}

// ConfigError is a kind refusing its config table.
type ConfigError struct {
	Kind   string
	Errors sdk.FieldErrors
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("the %s kind can't work with its config: %s", e.Kind, e.Errors.Error())
}

func explainStart(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return fmt.Errorf("it printed something other than the plugin handshake (is it a toolhost plugin built with the SDK, printing nothing before sdk.Serve?): %w", err)
	case strings.Contains(msg, "timeout"):
		return fmt.Errorf("it did not finish its handshake in time (is it a toolhost plugin?): %w", err)
	case strings.Contains(strings.ToLower(msg), "incompatible api version"), strings.Contains(msg, "protocol version"):
		return fmt.Errorf("it speaks no plugin protocol version this host speaks (%d to %d): build it with an SDK of one of them: %w",
			sdk.MinProtocolVersion, sdk.ProtocolVersion, err)
	}
	return err
}

// watch restarts the plugin with backoff whenever its process exits.
// go-plugin offers no way to wait for the exit, only Exited, so it polls.
func (p *Plugin) watch() {
	backoff := 100 * time.Millisecond
	upSince := time.Now()
	for {
		p.mu.Lock()
		client, stopping := p.client, p.stopping
		p.mu.Unlock()
		if stopping {
			return
		}
		if client != nil && !client.Exited() {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		if p.stopping {
			p.mu.Unlock()
			return
		}
		if client != nil {
			// A plugin that ran a good while before dying starts over at the
			// shortest wait; one that keeps dying waits longer each time.
			if time.Since(upSince) > time.Minute {
				backoff = 100 * time.Millisecond
			}
			p.m.opts.Logger.Warn("plugin exited; restarting", "kind", p.kind, "backoff", backoff)
			p.markDown(client)
			p.client = nil
		}
		p.mu.Unlock()
		time.Sleep(backoff)
		backoff = min(2*backoff, 30*time.Second)
		if err := p.m.checkTrust(); err != nil {
			p.fail(err)
		} else if err := p.start(context.Background()); err != nil {
			p.fail(err)
		} else {
			upSince = time.Now()
			p.mu.Lock()
			p.restarts++
			p.mu.Unlock()
		}
	}
}

// markDown records that client's process has exited: callers wait on a
// fresh up for the next start. It does nothing when client is not the
// running one or was marked down already, so the up that waiters hold is
// replaced only once. p.mu is held.
func (p *Plugin) markDown(client *plugin.Client) {
	if p.kc == nil || p.client != client {
		return
	}
	p.kc = nil
	p.up = make(chan struct{})
	p.downErr = fmt.Errorf("the %s plugin stopped and is being restarted", p.kind)
}

func (p *Plugin) fail(err error) {
	p.m.opts.Logger.Error("plugin restart failed", "kind", p.kind, "error", err)
	p.mu.Lock()
	p.downErr = err
	p.mu.Unlock()
}

// current waits briefly for a running plugin and returns its client. A
// caller waiting through a restart is woken when up is closed.
func (p *Plugin) current(ctx context.Context) (*hostside.KindClient, *plugin.Client, error) {
	deadline := time.NewTimer(p.m.opts.StartTimeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if p.stopping {
			p.mu.Unlock()
			return nil, nil, &sdk.Error{Code: wire.CodePluginUnavailable, Message: fmt.Sprintf("the %s plugin was stopped: toolhost is shutting down", p.kind)}
		}
		if p.kc != nil && p.client.Exited() {
			// Its process ended and watch has not seen it yet.
			p.markDown(p.client)
		}
		up, kc, client := p.up, p.kc, p.client
		p.mu.Unlock()
		if kc != nil {
			return kc, client, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-deadline.C:
			p.mu.Lock()
			downErr := p.downErr
			p.mu.Unlock()
			if downErr == nil {
				downErr = fmt.Errorf("the %s plugin is not running", p.kind)
			}
			return nil, nil, &sdk.Error{Code: wire.CodePluginUnavailable, Message: downErr.Error()}
		}
	}
}

// Check asks the plugin to check a tool; the catalog of the tools loaded
// with it goes along when the kind wants it (sdk.Info.WantsCatalog).
func (p *Plugin) Check(ctx context.Context, tool sdk.Tool, catalog []sdk.Tool) (json.RawMessage, error) {
	kc, _, err := p.current(ctx)
	if err != nil {
		return nil, err
	}
	if !p.Info().WantsCatalog {
		catalog = nil
	}
	return kc.Check(ctx, tool, catalog)
}

// Sessions is the client of the plugin's Sessions service (conversation
// sandboxes), on the plugin process running now; a kind that keeps none
// answers its calls with wire.CodeUnsupported.
func (p *Plugin) Sessions(ctx context.Context) (*hostside.SessionsClient, error) {
	kc, _, err := p.current(ctx)
	if err != nil {
		return nil, err
	}
	return kc.Sessions(p.kind), nil
}

// Invoke runs a tool in the plugin. When the plugin dies during the run,
// the error is an *sdk.Error with code "plugin_crashed".
func (p *Plugin) Invoke(ctx context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	kc, client, err := p.current(ctx)
	if err != nil {
		return nil, err
	}
	res, err := kc.Invoke(ctx, inv, onEvent)
	if errors.Is(err, hostside.ErrStreamBroken) {
		// Give the process a moment to be seen as exited.
		for i := 0; i < 20 && !client.Exited(); i++ {
			time.Sleep(25 * time.Millisecond)
		}
		p.m.opts.Logger.Error("plugin stream broke during a run", "kind", p.kind, "run", inv.RunID, "error", err, "exited", client.Exited())
		return nil, &sdk.Error{Code: wire.CodePluginCrashed, Message: fmt.Sprintf("the %s plugin stopped during the run (it is being restarted); the run did not finish", p.kind)}
	}
	return res, err
}

// stop asks the plugin to exit, then kills its process group.
func (p *Plugin) stop(ctx context.Context) {
	p.mu.Lock()
	p.stopping = true
	client, cmd := p.client, p.cmd
	p.mu.Unlock()
	if client == nil {
		return
	}
	// SIGTERM first: the SDK's Serve closes the kind (the python kind removes its sandboxes,
	// their networks and rules) and exits. go-plugin's own graceful Kill gives a plugin only 2 s,
	// which a slow machine (a VM under emulation) needs more than; ctx bounds the wait instead.
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		for !client.Exited() && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	done := make(chan struct{})
	go func() {
		client.Kill() // at once when it exited; otherwise go-plugin asks it to exit, then kills it
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Metrics asks the running plugin for its own metrics.
func (p *Plugin) Metrics(ctx context.Context) ([]sdk.Metric, error) {
	p.mu.Lock()
	kc, client := p.kc, p.client
	p.mu.Unlock()
	if kc == nil || client.Exited() {
		return nil, fmt.Errorf("the %s plugin is not running", p.kind)
	}
	return kc.Metrics(ctx)
}

// Doctor asks the plugin to check this machine with the config table cfg.
func (p *Plugin) Doctor(ctx context.Context, cfg json.RawMessage) (sdk.DoctorReport, error) {
	kc, _, err := p.current(ctx)
	if err != nil {
		return sdk.DoctorReport{}, err
	}
	return kc.Doctor(ctx, cfg)
}

// Up says whether the plugin's process is running now.
func (p *Plugin) Up() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kc != nil && !p.client.Exited()
}

// Restarts is how many times the plugin was started again after dying.
func (p *Plugin) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Reconfigure hands the running plugin a new config table.
func (p *Plugin) Reconfigure(ctx context.Context, cfg json.RawMessage) error {
	kc, _, err := p.current(ctx)
	if err != nil {
		return err
	}
	if err := kc.Configure(ctx, cfg); err != nil {
		var fe sdk.FieldErrors
		if errors.As(err, &fe) {
			return &ConfigError{Kind: p.kind, Errors: fe}
		}
		return fmt.Errorf("the %s plugin: %w", p.kind, err)
	}
	return nil
}
