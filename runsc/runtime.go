package runsc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Platform names of runsc's --platform that work on this kind of machine (kvm does not start in a
// VM guest; see docs/python.md).
const (
	PlatformSystrap = "systrap"
	PlatformPtrace  = "ptrace"
)

// Network modes of runsc's --network.
const (
	NetworkNone    = "none"
	NetworkSandbox = "sandbox"
)

// RuntimeOptions configure a Runtime.
type RuntimeOptions struct {
	// Binary is the runsc executable.
	Binary string
	// Root is runsc's state folder (--root); ours alone, never /var/run/runsc.
	Root string
	// Platform is --platform; PlatformSystrap when empty.
	Platform string
}

// Runtime runs runsc's verbs, one method each, in the style of go-runc. Every method takes a
// context; when it ends the runsc process is killed. Failures are *Error.
type Runtime struct {
	opts RuntimeOptions
}

// NewRuntime checks the options and returns a Runtime.
func NewRuntime(opts RuntimeOptions) (*Runtime, error) {
	if opts.Binary == "" {
		return nil, errors.New("the runtime needs the path of the runsc binary")
	}
	if opts.Root == "" {
		return nil, errors.New("the runtime needs a state folder of its own for runsc (--root)")
	}
	if opts.Platform == "" {
		opts.Platform = PlatformSystrap
	}
	if err := os.MkdirAll(opts.Root, 0o700); err != nil {
		return nil, fmt.Errorf("making runsc's state folder: %w", err)
	}
	return &Runtime{opts: opts}, nil
}

// Options returns the options the runtime runs with (defaults filled in).
func (r *Runtime) Options() RuntimeOptions { return r.opts }

// Error is a runsc command that failed: its arguments, exit status and what it wrote to stderr
// (or its log). Every failure of a Runtime's verbs is one; read it with errors.As, or ask
// IsNotExist.
type Error struct {
	Args     []string
	ExitCode int // -1 when it did not exit by itself (killed, or not started)
	Stderr   string
	Err      error
}

func (e *Error) Error() string {
	verb := "runsc"
	for _, a := range e.Args {
		if !strings.HasPrefix(a, "-") {
			verb = "runsc " + a
			break
		}
	}
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.ExitCode >= 0 {
		return fmt.Sprintf("%s failed (exit status %d): %s", verb, e.ExitCode, msg)
	}
	return fmt.Sprintf("%s failed: %s", verb, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// IsNotExist reports whether err says that runsc has no container of that id.
func IsNotExist(err error) bool {
	var ce *Error
	if !errors.As(err, &ce) {
		return false
	}
	s := ce.Stderr
	return strings.Contains(s, "does not exist") || strings.Contains(s, "no such container") ||
		strings.Contains(s, "not found")
}

// CreateOpts are the options of Create and Run.
type CreateOpts struct {
	// Network is --network: NetworkNone (the default) or NetworkSandbox.
	Network string
	// Stdin, Stdout, Stderr become the container's standard files. They must be *os.File (files,
	// FIFOs, sockets or pipe ends the caller reads itself): runsc hands them to the sandbox, so a
	// copying goroutine would wait until the sandbox ends. nil is /dev/null.
	Stdin, Stdout, Stderr *os.File
	// ExtraFiles are passed to the container's first process as fds 3, 4, … (Run only; runsc
	// create has no --pass-fd).
	ExtraFiles []*os.File
	// LogFile receives runsc's own error messages (--log), which otherwise go to the container's
	// stderr. Error.Stderr then comes from this file.
	LogFile string
	// PidFile receives the sandbox's pid.
	PidFile string
	// ExtraFlags are more global flags, e.g. "--debug".
	ExtraFlags []string
}

func (o *CreateOpts) globals() []string {
	net := o.Network
	if net == "" {
		net = NetworkNone
	}
	g := []string{"--network=" + net}
	if o.LogFile != "" {
		g = append(g, "--log="+o.LogFile)
	}
	return append(g, o.ExtraFlags...)
}

// Create creates a container from the bundle in bundleDir without starting it.
func (r *Runtime) Create(ctx context.Context, id, bundleDir string, opts *CreateOpts) error {
	if opts == nil {
		opts = &CreateOpts{}
	}
	if len(opts.ExtraFiles) > 0 {
		return errors.New("runsc create can't pass extra files: use Run with Detach")
	}
	args := append(opts.globals(), "create", "--bundle", bundleDir)
	if opts.PidFile != "" {
		args = append(args, "--pid-file", opts.PidFile)
	}
	args = append(args, id)
	return r.runStdio(ctx, args, opts)
}

// RunOpts are the options of Run.
type RunOpts struct {
	CreateOpts
	// Detach returns once the container started instead of waiting for it to end.
	Detach bool
}

// Run creates and starts a container. With Detach it returns as soon as the container's first
// process started (the sandbox package starts its sandboxes that way).
func (r *Runtime) Run(ctx context.Context, id, bundleDir string, opts *RunOpts) error {
	if opts == nil {
		opts = &RunOpts{}
	}
	args := append(opts.globals(), "run", "--bundle", bundleDir)
	if opts.Detach {
		args = append(args, "--detach")
	}
	if opts.PidFile != "" {
		args = append(args, "--pid-file", opts.PidFile)
	}
	for i := range opts.ExtraFiles {
		args = append(args, "--pass-fd", fmt.Sprintf("%d:%d", 3+i, 3+i))
	}
	args = append(args, id)
	return r.runStdio(ctx, args, &opts.CreateOpts)
}

func (r *Runtime) runStdio(ctx context.Context, args []string, opts *CreateOpts) error {
	cmd := r.command(ctx, args)
	if opts.Stdin != nil {
		cmd.Stdin = opts.Stdin
	}
	if opts.Stdout != nil {
		cmd.Stdout = opts.Stdout
	}
	// The container inherits runsc's stderr, so it must be a file, never a pipe copied by a
	// goroutine (that would wait for the sandbox to end).
	var captured *os.File
	if opts.Stderr != nil {
		cmd.Stderr = opts.Stderr
	} else {
		f, err := os.CreateTemp(r.opts.Root, ".stderr-*")
		if err != nil {
			return fmt.Errorf("making a file for runsc's stderr: %w", err)
		}
		_ = os.Remove(f.Name())
		defer f.Close()
		captured, cmd.Stderr = f, f
	}
	cmd.ExtraFiles = opts.ExtraFiles
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var stderr string
	if captured != nil {
		if _, serr := captured.Seek(0, io.SeekStart); serr != nil {
			return commandError(ctx, args, "", err)
		}
		if b, rerr := io.ReadAll(io.LimitReader(captured, 64<<10)); rerr == nil {
			stderr = string(b)
		}
	}
	if opts.LogFile != "" {
		if b, rerr := os.ReadFile(opts.LogFile); rerr == nil && len(b) > 0 {
			stderr = logMessages(b)
		}
	}
	return commandError(ctx, args, stderr, err)
}

// logMessages turns runsc's JSON log lines ({"msg": …}) into their messages, one a line; other
// lines stay as they are.
func logMessages(b []byte) string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var entry struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg != "" {
			out = append(out, entry.Msg)
		} else if strings.TrimSpace(line) != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// Start starts a created container.
func (r *Runtime) Start(ctx context.Context, id string) error {
	_, err := r.output(ctx, "start", id)
	return err
}

// CheckpointOpts are the options of Checkpoint.
type CheckpointOpts struct {
	// ImagePath is the folder the checkpoint is written to (runsc makes its files there).
	ImagePath string
	// LogFile receives runsc's own error messages, as in CreateOpts.
	LogFile string
}

// Checkpoint saves a running container's state (its memory, processes and open files) to
// opts.ImagePath, and stops it: what is left of it is for Delete.
func (r *Runtime) Checkpoint(ctx context.Context, id string, opts *CheckpointOpts) error {
	if opts == nil || opts.ImagePath == "" {
		return errors.New("a checkpoint needs a folder to be written to")
	}
	var args []string
	if opts.LogFile != "" {
		args = append(args, "--log="+opts.LogFile)
	}
	args = append(args, "checkpoint", "--image-path", opts.ImagePath, id)
	_, err := r.output(ctx, args...)
	if err != nil && opts.LogFile != "" {
		var ce *Error
		if errors.As(err, &ce) && strings.TrimSpace(ce.Stderr) == "" {
			if b, rerr := os.ReadFile(opts.LogFile); rerr == nil {
				ce.Stderr = logMessages(b)
			}
		}
	}
	return err
}

// RestoreOpts are the options of Restore.
type RestoreOpts struct {
	CreateOpts
	// ImagePath is the folder a Checkpoint wrote.
	ImagePath string
	// Detach returns once the container runs again instead of waiting for it to end.
	Detach bool
}

// Restore creates a container from the bundle in bundleDir and the checkpoint in
// opts.ImagePath, and runs it from where the checkpoint left it. The restored processes' standard
// files are opts.Stdin, Stdout and Stderr, in place of the ones they had (a restore can hand
// them no other files: ExtraFiles are refused).
func (r *Runtime) Restore(ctx context.Context, id, bundleDir string, opts *RestoreOpts) error {
	if opts == nil || opts.ImagePath == "" {
		return errors.New("a restore needs the folder of a checkpoint")
	}
	if len(opts.ExtraFiles) > 0 {
		return errors.New("runsc restore can't pass extra files: a restored sandbox gets new standard files only")
	}
	args := append(opts.globals(), "restore", "--bundle", bundleDir, "--image-path", opts.ImagePath)
	if opts.Detach {
		args = append(args, "--detach")
	}
	args = append(args, id)
	return r.runStdio(ctx, args, &opts.CreateOpts)
}

// ExecOpts are the options of Exec.
type ExecOpts struct {
	// Env is the environment, KEY=VALUE; the container's when empty.
	Env []string
	// Cwd is the working folder inside the container; the container's when empty.
	Cwd string
	// User is "uid" or "uid:gid" inside the container; the container's when empty.
	User string
	// Stdin, Stdout, Stderr as in CreateOpts; nil is /dev/null (stderr: kept for Error).
	Stdin, Stdout, Stderr *os.File
}

// Exec runs the process args in a running container and waits for it to end. It returns the
// process's exit status; a non-zero status is not an error.
func (r *Runtime) Exec(ctx context.Context, id string, args []string, opts *ExecOpts) (int, error) {
	if len(args) == 0 {
		return -1, errors.New("exec needs a command")
	}
	if opts == nil {
		opts = &ExecOpts{}
	}
	process := args
	args = []string{"exec"}
	for _, e := range opts.Env {
		args = append(args, "--env", e)
	}
	if opts.Cwd != "" {
		args = append(args, "--cwd", opts.Cwd)
	}
	if opts.User != "" {
		args = append(args, "--user", opts.User)
	}
	args = append(args, id)
	args = append(args, process...)
	cmd := r.command(ctx, args)
	if opts.Stdin != nil {
		cmd.Stdin = opts.Stdin
	}
	if opts.Stdout != nil {
		cmd.Stdout = opts.Stdout
	}
	var captured bytes.Buffer
	if opts.Stderr != nil {
		cmd.Stderr = opts.Stderr
	} else {
		cmd.Stderr = &captured
	}
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && ctx.Err() == nil {
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return -1, commandError(ctx, args, captured.String(), err)
	}
	return 0, nil
}

// KillOpts are the options of Kill.
type KillOpts struct {
	// All sends the signal to every process in the container, not only its first.
	All bool
}

// Kill sends sig to the container's first process (with All, to every process in it).
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal, opts *KillOpts) error {
	args := []string{"kill"}
	if opts != nil && opts.All {
		args = append(args, "--all")
	}
	args = append(args, id, strconv.Itoa(int(sig)))
	_, err := r.output(ctx, args...)
	return err
}

// DeleteOpts are the options of Delete.
type DeleteOpts struct {
	// Force stops a running container first.
	Force bool
}

// Delete removes a container and its state (and, for the last container of a sandbox, the
// sandbox and its cgroup).
func (r *Runtime) Delete(ctx context.Context, id string, opts *DeleteOpts) error {
	args := []string{"delete"}
	if opts != nil && opts.Force {
		args = append(args, "--force")
	}
	args = append(args, id)
	_, err := r.output(ctx, args...)
	return err
}

// State is what runsc state and runsc list say about a container.
type State struct {
	ID      string `json:"id"`
	Pid     int    `json:"pid"`
	Status  string `json:"status"` // creating, created, running, stopped
	Bundle  string `json:"bundle"`
	Created string `json:"created"`
}

// State returns the state of one container.
func (r *Runtime) State(ctx context.Context, id string) (*State, error) {
	out, err := r.output(ctx, "state", id)
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("reading runsc state of %s: %w", id, err)
	}
	return &s, nil
}

// List returns every container in the runtime's state folder.
func (r *Runtime) List(ctx context.Context) ([]State, error) {
	out, err := r.output(ctx, "list", "--format=json")
	if err != nil {
		return nil, err
	}
	var states []State
	if s := strings.TrimSpace(string(out)); s == "" || s == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(out, &states); err != nil {
		return nil, fmt.Errorf("reading runsc list: %w", err)
	}
	return states, nil
}

func (r *Runtime) output(ctx context.Context, args ...string) ([]byte, error) {
	cmd := r.command(ctx, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, commandError(ctx, args, stderr.String(), err)
	}
	return stdout.Bytes(), nil
}

func (r *Runtime) command(ctx context.Context, args []string) *exec.Cmd {
	full := append([]string{"--root=" + r.opts.Root, "--platform=" + r.opts.Platform}, args...)
	cmd := exec.CommandContext(ctx, r.opts.Binary, full...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

func commandError(ctx context.Context, args []string, stderr string, err error) error {
	code := -1
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		code = exitErr.ExitCode()
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return &Error{Args: args, ExitCode: code, Stderr: stderr, Err: err}
}
