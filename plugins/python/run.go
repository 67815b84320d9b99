package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/plugins/python/stopcause"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Error codes of a run, short and machine-readable.
const (
	codeTimeout   = "timeout"
	codeMemory    = "memory"
	codeCPU       = "cpu"
	codeProcesses = "processes"
	codeDisk      = "disk"
	codeNetwork   = "network"
	codeCodeError = "code_error"
	codeCompile   = "compile"
	codeNoRun     = "no_run"
	codeBadResult = "bad_result"
	codeOutputCut = "output_cut"
	codeSandbox   = "sandbox"
	codeCancelled = errcode.Cancelled
	// defaultCheckSeconds is [python] check_seconds when left out.
	defaultCheckSeconds = 10
	checkMemoryMB       = 256
	maxResultBytes      = 16 << 20
	// overheadMB is added to a run's memory_mb for gVisor itself (its kernel and gofer), so the
	// code gets about what the tool asked for.
	overheadMB = 64
	// wallGrace is how much longer than its CPU seconds a run may take on the clock (starting
	// Python, waiting on I/O).
	wallGrace = time.Second
	// drainWait bounds the wait for the last output once the answer is in.
	drainWait = 5 * time.Second
)

// request is what the runner reads from its control socket.
type request struct {
	Mode       string          `json:"mode"`
	Code       string          `json:"code"`
	Args       json.RawMessage `json:"args,omitempty"`
	CPUSeconds int             `json:"cpu_seconds"`
	// Seconds is the run's wall-clock limit, which the runner keeps itself (a little after the
	// plugin's own timer), so that a sandbox ends on time whatever happens to the plugin.
	Seconds int `json:"seconds"`
}

// answer is what the runner writes back (see runner.py).
type answer struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Msg    string          `json:"msg"`
	Line   *int            `json:"line"`
	Last   string          `json:"last"`
	Kind   string          `json:"kind"`
	Full   string          `json:"full"`
	Signal int             `json:"signal"`
	Status int             `json:"status"`
	// Content is the result's content, when run returned toolhost.content.
	Content []contentPart `json:"content"`
}

// contentPart is a part of a result's content as the runner writes it.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Data     []byte `json:"data"` // base64 in JSON
	MIMEType string `json:"mime_type"`
	URI      string `json:"uri"`
}

// eventLine is a line the module toolhost writes on fd 3 while the code runs, before the answer:
// a progress or a log event for the caller.
type eventLine struct {
	Event    string   `json:"event"`
	Fraction *float64 `json:"fraction"`
	Level    string   `json:"level"`
	Message  *string  `json:"message"`
}

// callerLogLevels are the levels toolhost.log takes.
var callerLogLevels = map[string]bool{}

func init() {
	for _, l := range sdk.CallerLogLevels {
		callerLogLevels[l] = true
	}
}

// outcome is everything known when a run ended: what the runner said (if anything), what the host
// did to it, and what the sandbox's cgroup and firewall recorded.
type outcome struct {
	answer    *answer
	answerErr error // why no answer could be read
	timedOut  bool
	outputCut bool
	cancelled bool
	// answered is when the answer (or the end of the control socket) came.
	answered time.Time
	stats    sandbox.Stats
	net      sandbox.NetCounters
}

// limits are the numbers a run's messages quote.
type limits struct {
	seconds, memoryMB, workMB, tmpMB int
	outputBytes                      int64
	network                          bool
	// connCap is how many connections a run with network may have open at once.
	connCap int
}

// runInSandbox prepares a sandbox for owner (the principal, whose place among the sandboxes it
// takes), hands it the request, streams its output through emit (nil discards it), and turns how
// it ended into a result or an *sdk.Error.
func (k *kind) runInSandbox(ctx context.Context, c configured, t runTable, owner string, req request, emit sdk.Emit) (json.RawMessage, *sdk.Error) {
	c.runs.RLock()
	defer c.runs.RUnlock()
	lim := limits{seconds: t.Seconds, memoryMB: t.MemoryMB, workMB: c.cfg.WorkMB, tmpMB: c.cfg.TmpMB,
		outputBytes: c.cfg.MaxOutputBytes, network: t.Network, connCap: networkOptions(c.cfg).ConnectionCap()}
	opts := sandboxOptions(c.cfg, t)
	opts.Owner = owner
	sb, err := c.pool.Get(ctx, opts)
	if err != nil {
		switch {
		case ctx.Err() != nil && errors.Is(err, sandbox.ErrFull):
			return nil, sdk.Errorf(codeCancelled, "the run was cancelled before a sandbox was free")
		case ctx.Err() != nil:
			return nil, sdk.Errorf(codeCancelled, "the run was cancelled")
		}
		k.log.Error("starting a sandbox", "error", err)
		return nil, sdk.Errorf(codeSandbox, "the sandbox didn't start: %v", err)
	}
	defer c.pool.Destroy(sb)
	o := k.drive(ctx, sb, req, lim, emit)
	result, serr := classify(o, lim)
	if serr == nil && len(o.answer.Content) > 0 {
		parts := make([]sdk.Content, len(o.answer.Content))
		for i, p := range o.answer.Content {
			parts[i] = sdk.Content{Type: p.Type, Text: p.Text, Data: p.Data, MIMEType: p.MIMEType, URI: p.URI}
		}
		if err := sdk.CheckContent(parts); err != nil {
			var why *sdk.Error
			if errors.As(err, &why) && why.Code == errcode.TooLarge {
				return nil, why
			}
			return nil, sdk.Errorf(codeBadResult, "the code's result is wrong: %v", err)
		}
		if emit != nil {
			emit.Content(parts...)
		}
	}
	return result, serr
}

// networkOptions are the network of the kind's sandboxes with network = true.
func networkOptions(cfg Config) sandbox.NetworkOptions {
	return sandbox.NetworkOptions{ExtraAllowedCIDRs: cfg.extraCIDRs}
}

// sandboxOptions are the sandbox of one run of t. Only the memory limit and the network differ
// between tools; the pool keeps sandboxes ready per network setting and sets the memory limit
// when it hands one out. The code's own CPU limit is set by the runner when the request comes.
func sandboxOptions(cfg Config, t runTable) sandbox.Options {
	args := append([]string{"/usr/bin/python3", "-I", "-B", "-c", runnerSource}, cfg.pool.Preload...)
	return sandbox.Options{
		Args: args,
		Limits: sandbox.Limits{
			MemoryBytes: int64(t.MemoryMB+overheadMB) << 20,
			Pids:        int64(cfg.Pids),
			CPUs:        1,
			CPUSeconds:  2*maxSeconds + 5, // a backstop for the runner; the code gets its seconds
			OpenFiles:   1024,
			FileBytes:   uint64(cfg.WorkMB) << 20,
		},
		WorkBytes: int64(cfg.WorkMB) << 20,
		TmpBytes:  int64(cfg.TmpMB) << 20,
		Network:   t.Network,
		Ready:     "ready",
		GuardInit: true, // the runner is PID 1 and keeps the run's time: the code can't stop it
	}
}

// drive sends the request, streams output until the sandbox ends (or is stopped for time, output
// or cancellation), and gathers the outcome.
func (k *kind) drive(ctx context.Context, sb *sandbox.Sandbox, req request, lim limits, emit sdk.Emit) outcome {
	var o outcome
	out := newCappedOutput(lim.outputBytes, emit)
	streamsDone := streamOutput(sb, out)
	answers := make(chan outcome, 1)
	go func() { answers <- readAnswer(sb.Control, out) }()
	if err := handRequest(sb, req); err != nil {
		o.answerErr = err
		_ = sb.Kill(context.WithoutCancel(ctx))
	}
	timer := time.NewTimer(time.Duration(lim.seconds)*time.Second + wallGrace)
	defer timer.Stop()
	if k.opts.hostTimerOff {
		timer.Stop()
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			if err := sb.Kill(context.WithoutCancel(ctx)); err != nil {
				k.log.Warn("stopping a sandbox", "id", sb.ID, "error", err)
			}
		}
	}
	select {
	case r := <-answers:
		o.answer, o.answerErr, o.answered = r.answer, r.answerErr, time.Now()
		if errors.Is(o.answerErr, errBadChannel) || errors.Is(o.answerErr, errTooLarge) {
			kill() // the code goes on, but its run has failed
		}
	case <-timer.C:
		o.timedOut = true
		kill()
	case <-out.cut:
		o.outputCut = true
		kill()
	case <-ctx.Done():
		o.cancelled = true
		kill()
	}
	endOutput(sb, out, streamsDone, o.answer != nil, kill)
	if out.wasCut() {
		o.outputCut = true
	}
	k.readCounters(ctx, sb, lim, &o)
	return o
}

// streamOutput copies the sandbox's stdout and stderr into out as they come; the channel it
// returns is closed when both have ended.
func streamOutput(sb *sandbox.Sandbox, out *cappedOutput) <-chan struct{} {
	var streams sync.WaitGroup
	for _, s := range []struct {
		f      *os.File
		stderr bool
	}{{sb.Stdout, false}, {sb.Stderr, true}} {
		streams.Add(1)
		go func() {
			defer streams.Done()
			out.copy(s.f, s.stderr)
		}()
	}
	streamsDone := make(chan struct{})
	go func() { streams.Wait(); close(streamsDone) }()
	return streamsDone
}

// handRequest writes req to the sandbox's control channel, one line of JSON.
func handRequest(sb *sandbox.Sandbox, req request) error {
	body, err := json.Marshal(req)
	if err == nil {
		_, err = sb.Control.Write(append(body, '\n'))
	}
	if err != nil {
		return fmt.Errorf("handing the request to the sandbox: %w", err)
	}
	return nil
}

// endOutput waits for the output streams to end and takes what is left in the pipes. After an
// answer that is at once; otherwise when the sandbox ends, which kill hastens after drainWait.
func endOutput(sb *sandbox.Sandbox, out *cappedOutput, streamsDone <-chan struct{}, answered bool, kill func()) {
	if answered {
		// The code is done and everything it wrote is in the pipes already (the sandbox writes
		// them synchronously): stop the streaming goroutines and drain what is left, rather than
		// wait for the sandbox to end.
		_ = sb.Stdout.SetReadDeadline(time.Now())
		_ = sb.Stderr.SetReadDeadline(time.Now())
		<-streamsDone
		out.drain(sb.Stdout, false)
		out.drain(sb.Stderr, true)
		return
	}
	// Stopped or crashed: the output ends when the sandbox does.
	select {
	case <-streamsDone:
	case <-time.After(drainWait):
		kill()
		select {
		case <-streamsDone:
		case <-time.After(drainWait):
			_ = sb.Stdout.SetReadDeadline(time.Now())
			_ = sb.Stderr.SetReadDeadline(time.Now())
			<-streamsDone
		}
	}
}

// readCounters puts the sandbox's cgroup counters in o, and its firewall counters when the run
// had the network. Without its counters a run that hit a limit reads as the code's own failure:
// a counter that can't be read is logged, saying so.
func (k *kind) readCounters(ctx context.Context, sb *sandbox.Sandbox, lim limits, o *outcome) {
	var err error
	if o.stats, err = sb.Stats(); err != nil {
		k.log.Warn("reading a sandbox's cgroup counters; a limit the run hit may read as the code's own error", "id", sb.ID, "error", err)
	}
	if lim.network {
		if o.net, err = sb.NetworkCounters(context.WithoutCancel(ctx)); err != nil {
			k.log.Warn("reading a sandbox's firewall counters; a refused connection may read as the code's own error", "id", sb.ID, "error", err)
		}
	}
}

// readAnswer reads fd 3 until the runner's answer: the module toolhost's event lines go to out as
// they come, and the answer ends the run. A line that is neither (the code wrote to fd 3 itself)
// is errBadChannel: nothing of it is emitted, and the run fails.
func readAnswer(control io.Reader, out *cappedOutput) outcome {
	var r outcome
	br := bufio.NewReaderSize(control, 64<<10)
	for {
		line, err := readLine(br, maxResultBytes)
		if err != nil {
			r.answerErr = err
			return r
		}
		var probe struct {
			Event *string `json:"event"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			r.answerErr = fmt.Errorf("%w: a line isn't JSON", errBadChannel)
			return r
		}
		if probe.Event == nil {
			var a answer
			if err := json.Unmarshal(line, &a); err != nil {
				r.answerErr = fmt.Errorf("%w: the answer is wrong (%v)", errBadChannel, err)
			} else {
				r.answer = &a
			}
			return r
		}
		if err := out.event(line); err != nil {
			r.answerErr = err
			return r
		}
	}
}

// event checks one event line and emits it, counting it against the output limit.
func (c *cappedOutput) event(line []byte) error {
	var ev eventLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return fmt.Errorf("%w: an event is wrong (%v)", errBadChannel, err)
	}
	if ev.Message == nil {
		return fmt.Errorf("%w: an event has no message", errBadChannel)
	}
	var e sdk.Event
	switch {
	case ev.Event == "progress" && ev.Level == "" && (ev.Fraction == nil || (*ev.Fraction >= 0 && *ev.Fraction <= 1)):
		f := -1.0 // unknown
		if ev.Fraction != nil {
			f = *ev.Fraction
		}
		e.Progress = &sdk.Progress{Fraction: f, Message: *ev.Message}
	case ev.Event == "log" && ev.Fraction == nil && callerLogLevels[ev.Level]:
		e.Log = &sdk.Log{Level: ev.Level, Message: *ev.Message, ToCaller: true}
	default:
		return fmt.Errorf("%w: an event is wrong (%.100s)", errBadChannel, line)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(line)) > c.limit-c.written {
		c.cutOnce.Do(func() { c.cutFlag.Store(true); close(c.cut) })
		return nil
	}
	c.written += int64(len(line))
	if c.emit != nil {
		c.emit(e)
	}
	return nil
}

// readLine reads one newline-ended line of at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit {
			return nil, errTooLarge
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				return nil, errNoAnswer
			}
			return nil, err
		}
	}
}

var (
	errTooLarge   = errors.New("the answer is too large")
	errNoAnswer   = errors.New("the sandbox ended without an answer")
	errBadChannel = errors.New("the code wrote to fd 3, the channel of the module toolhost, what toolhost can't read: leave fd 3 to the module")
)

// cappedOutput forwards stdout and stderr to emit until their total reaches the cap, then
// signals cut (once) and forwards nothing more.
type cappedOutput struct {
	emit    sdk.Emit
	limit   int64
	mu      sync.Mutex
	written int64
	cutOnce sync.Once
	cutFlag atomic.Bool
	cut     chan struct{}
}

func newCappedOutput(limit int64, emit sdk.Emit) *cappedOutput {
	return &cappedOutput{emit: emit, limit: limit, cut: make(chan struct{})}
}

func (c *cappedOutput) copy(f *os.File, stderr bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			c.forward(buf[:n], stderr)
		}
		if err != nil {
			return
		}
	}
}

// drain forwards what is buffered in f now, without waiting for more. Only one goroutine may
// read f meanwhile.
func (c *cappedOutput) drain(f *os.File, stderr bool) {
	_ = f.SetReadDeadline(time.Time{})
	buf := make([]byte, 32<<10)
	for {
		n, err := buffered(f)
		if err != nil || n <= 0 {
			return
		}
		m, rerr := f.Read(buf[:min(n, len(buf))])
		if m > 0 {
			c.forward(buf[:m], stderr)
		}
		if rerr != nil {
			return
		}
	}
}

// buffered returns how many bytes wait in the pipe f (FIONREAD), without touching its mode (Fd
// would make it blocking).
func buffered(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ierr
}

func (c *cappedOutput) forward(p []byte, stderr bool) {
	c.mu.Lock()
	room := c.limit - c.written
	if int64(len(p)) > room {
		p = p[:max(room, 0)]
		c.cutOnce.Do(func() { c.cutFlag.Store(true); close(c.cut) })
	}
	c.written += int64(len(p))
	if len(p) > 0 && c.emit != nil {
		if stderr {
			c.emit.Stderr(p)
		} else {
			c.emit.Stdout(p)
		}
	}
	c.mu.Unlock()
}

func (c *cappedOutput) wasCut() bool { return c.cutFlag.Load() }

// classify turns an outcome into the result or the error the user reads. Why a run stopped is
// stopcause.Of's to say (what the host did, the cgroup, the runner's report); the firewall's
// counters and the runner's report of its child's exit status tell the rest, never printed text.
func classify(o outcome, lim limits) (json.RawMessage, *sdk.Error) {
	a := o.answer
	f := stopcause.Facts{After: o.stats, Cancelled: o.cancelled, TimedOut: o.timedOut, OutputCut: o.outputCut,
		Died: a == nil, Failed: a == nil || !a.OK}
	if a != nil {
		f.MemoryError = a.Kind == "memory"
		f.CPUOver = a.Error == "cpu"
		f.TimeOver = a.Error == "timeout"
		f.DiskFull = a.Error == "exception" && a.Kind == "disk"
	}
	switch stopcause.Of(f) {
	case stopcause.Cancelled:
		return nil, sdk.Errorf(codeCancelled, "the run was cancelled")
	case stopcause.Timeout:
		return nil, sdk.Errorf(codeTimeout, "the code ran longer than %d seconds and was stopped", lim.seconds)
	case stopcause.Output:
		return nil, sdk.Errorf(codeOutputCut, "the code printed more than its output limit (%s) and was stopped; what it printed is cut there", sizeText(lim.outputBytes))
	case stopcause.Memory:
		return nil, sdk.Errorf(codeMemory, "the code used more memory than its limit (%d MiB)", lim.memoryMB)
	case stopcause.Processes:
		return nil, sdk.Errorf(codeProcesses, "the code started more processes than its limit")
	case stopcause.CPU:
		return nil, sdk.Errorf(codeCPU, "the code used more CPU time than its limit")
	case stopcause.Disk:
		mb := lim.workMB
		if a.Full == "/tmp" {
			mb = lim.tmpMB
		}
		return nil, sdk.Errorf(codeDisk, "the code wrote more than its disk limit (%d MiB)", mb)
	case stopcause.Died:
		if errors.Is(o.answerErr, errTooLarge) {
			return nil, sdk.Errorf(codeBadResult, "the code's result is larger than %s", sizeText(maxResultBytes))
		}
		if errors.Is(o.answerErr, errBadChannel) {
			return nil, sdk.Errorf(codeCodeError, "the code failed: %v", o.answerErr)
		}
		return nil, sdk.Errorf(codeSandbox, "the sandbox stopped before the code returned a result")
	}
	switch a.Error {
	case "":
		if !a.OK {
			return nil, sdk.Errorf(codeSandbox, "the sandbox's runner gave an answer toolhost doesn't know")
		}
		if a.Result == nil {
			return json.RawMessage("null"), nil
		}
		if !json.Valid(a.Result) {
			return nil, sdk.Errorf(codeBadResult, "the code's result isn't JSON")
		}
		return a.Result, nil
	case "compile":
		if a.Line != nil {
			return nil, sdk.Errorf(codeCompile, "the code doesn't compile: %s (line %d)", a.Msg, *a.Line)
		}
		return nil, sdk.Errorf(codeCompile, "the code doesn't compile: %s", a.Msg)
	case "no_run":
		return nil, sdk.Errorf(codeNoRun, "the code defines a function run(**args) that the tool calls")
	case "bad_result":
		if a.Msg != "" {
			return nil, sdk.Errorf(codeBadResult, "the code's result isn't JSON: %s", a.Msg)
		}
		return nil, sdk.Errorf(codeBadResult, "the code's result isn't JSON")
	case "signal":
		return nil, sdk.Errorf(codeCodeError, "the code failed: it was killed by signal %d", a.Signal)
	case "exit":
		return nil, sdk.Errorf(codeCodeError, "the code failed: it exited (status %d) before returning a result", a.Status)
	case "exception":
		switch {
		case a.Kind == "network" && !lim.network:
			return nil, sdk.Errorf(codeNetwork, "this tool has no network: say it needs it (network = true)")
		case lim.network && o.net.OverConnLimit > 0:
			return nil, sdk.Errorf(codeNetwork, "the code had more than %d connections open at once (the limit of a python tool); close the ones it no longer needs", lim.connCap)
		case lim.network && o.net.Refused > 0:
			return nil, sdk.Errorf(codeNetwork, "the code tried to reach an address python tools may not reach (only public addresses, TCP ports 80 and 443): %s", a.Last)
		}
		return nil, sdk.Errorf(codeCodeError, "the code failed: %s", a.Last)
	}
	return nil, sdk.Errorf(codeSandbox, "the sandbox's runner gave an answer toolhost doesn't know (%q)", a.Error)
}

// sizeText writes a byte count the way people read it: "1 MiB", "512 KiB", "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
