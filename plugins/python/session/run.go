package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/plugins/python/stopcause"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk/errcode"
)

const (
	// maxArg is the longest bash script: runsc exec hands it over as one argument, which Linux
	// caps (MAX_ARG_STRLEN).
	maxArg = 128<<10 - 1
	// killWait bounds the wait for a killed run's process to be gone before its sandbox goes
	// instead.
	killWait = 10 * time.Second
	// runToken names the environment variable that marks a run's processes.
	runToken = "TOOLHOST_RUN"
	// interruptWait is how long a cell past its time has, once interrupted (KeyboardInterrupt),
	// to end before its interpreter is killed.
	interruptWait = 3 * time.Second
	// maxValue bounds a cell's value as read from the agent (kernel.py sends at most 64 Ki
	// characters).
	maxValue = 256 << 10
	// maxImage bounds an image a cell shows, as read from the agent (kernel.py sends at most
	// 4 MiB).
	maxImage = 4 << 20
)

// Run runs code in the session id: in its sandbox, started first if it has none (or if its
// network mode differs from r.Network), in /work. Python runs in the sandbox's live interpreter,
// one run at a time, so names defined in one run are there in the next (as cells of a notebook);
// bash runs as a new process. What it prints streams to r.Stdout and r.Stderr. A run past its
// time has its processes killed (python: is interrupted, and its interpreter restarted if that
// doesn't stop it), the sandbox stays; one that ran out of memory, processes or disk says so in
// Stopped and Message. Bash runs may overlap each other and python's.
func (m *Manager) Run(ctx context.Context, id string, r Run) (Result, error) {
	if err := checkID(id); err != nil {
		return Result{}, err
	}
	args, stdin, err := command(r)
	if err != nil {
		return Result{}, err
	}
	net := r.Network
	switch net {
	case "":
		net = NetworkOff
	case NetworkOff, NetworkWeb, NetworkPackages:
	default:
		return Result{}, errcode.Errorf(errcode.BadArgs, "%q is not a network mode: give off, web or packages", string(net))
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if m.inKernel(r) {
		// One cell at a time: a run waits for the one before it, and its time starts once it runs.
		s, err := m.session(id)
		if err != nil {
			return Result{}, err
		}
		slot := s.cellSlot()
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("the run was cancelled while it waited for the one before it: %w", ctx.Err())
		}
		defer func() { <-slot }()
	}
	s, b, how, err := m.acquire(ctx, id, net, r.Owner)
	if err != nil {
		return Result{Cold: how.cold}, err
	}
	defer m.release(s)
	res, err := m.runIn(ctx, s, b, r, net, args, stdin)
	res.Cold, res.Resumed = how.cold, how.resumed
	if m.inKernel(r) {
		s.mu.Lock()
		if !s.cells {
			// The session's first cell here: one may have run before this manager (a host or
			// plugin restart), which the marker beside its disk says.
			s.cells = m.cellsMarked(id)
			if !s.cells {
				m.markCells(id)
			}
		}
		lost := how.cold && s.cells
		s.cells = true
		s.mu.Unlock()
		if lost && err == nil && res.Message == "" {
			res.Message = "the conversation's sandbox had stopped (it was idle, stopped, or its network changed), so this code ran in a new interpreter: names defined in earlier runs are gone; files in /work are kept"
			if how.unresumed != nil {
				res.Message = fmt.Sprintf("the conversation's sandbox had stopped and couldn't be resumed where it stopped (%s), so this code ran in a new interpreter: names defined in earlier runs are gone; files in /work are kept", how.unresumed)
			}
		}
	}
	return res, err
}

// cellsMarker is the file beside a session's disk that says a cell ran in one of its sandboxes,
// however long ago: after a restart, the first cell in a new sandbox then says the names of
// before are gone.
func (m *Manager) cellsMarker(id string) string { return filepath.Join(m.opts.Dir, id+".cells") }

// cellsMarked says whether the session's marker is there.
func (m *Manager) cellsMarked(id string) bool {
	_, err := os.Lstat(m.cellsMarker(id))
	return err == nil
}

// markCells leaves the session's marker (an empty file; a failure only loses the message).
func (m *Manager) markCells(id string) {
	fd, err := unix.Open(m.cellsMarker(id), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err == nil {
		unix.Close(fd)
	}
}

// inKernel says whether r runs in the sandbox's live interpreter: python, unless the runs are
// runsc execs (a way kept for tests and measurements).
func (m *Manager) inKernel(r Run) bool {
	return r.Language == "python" && !m.viaExec
}

// command is the process of a run and what it reads on stdin. Python reads its program from
// stdin (python3 -): no argument limit, and tracebacks name <stdin> and the line.
func command(r Run) (args []string, stdin string, err error) {
	switch r.Language {
	case "python":
		return []string{"/usr/bin/python3", "-u", "-"}, r.Code, nil
	case "bash":
		if len(r.Code) > maxArg {
			return nil, "", errcode.Errorf(errcode.TooLarge, "the script is longer than %d KiB: write it to a file in /work and run that file", (maxArg+1)>>10)
		}
		return []string{"/bin/bash", "-c", r.Code}, "", nil
	}
	return nil, "", errcode.Errorf(errcode.BadArgs, "%q is not a language of conversation sandboxes: give python or bash", r.Language)
}

// acquired says how acquire found the session's sandbox.
type acquired struct {
	// cold: a new sandbox was started; resumed: it was restored from its checkpoint.
	cold, resumed bool
	// unresumed says why a checkpoint couldn't be restored (cold is then set).
	unresumed error
}

// acquire readies the session's sandbox for a run of network net and counts the run in; a
// sandbox it starts (or restores from its checkpoint) holds its place for owner.
func (m *Manager) acquire(ctx context.Context, id string, net Network, owner string) (*session, *box, acquired, error) {
	var how acquired
	s, err := m.lockSession(id)
	if err != nil {
		return nil, nil, how, err
	}
	defer s.mu.Unlock()
	t0 := time.Now()
	if net == NetworkOff && !s.mounted && s.box == nil && m.opts.Ready > 0 && !m.imageExists(s.id) {
		// A new session: a ready sandbox, if one is, becomes its own.
		adopted, err := m.adopt(ctx, s, owner)
		if err != nil {
			return nil, nil, how, err
		}
		if adopted {
			m.log.Debug("a new session took a ready sandbox", "session", id, "sandbox", s.box.sb.ID, "took", time.Since(t0))
		}
	}
	if err := m.ready(ctx, s, true); err != nil {
		return nil, nil, how, err
	}
	t1 := time.Now()
	if b := s.box; b != nil && (b.net != net || b.isEnded()) {
		why := "the session's network mode changed"
		if b.isEnded() {
			why = "the session's sandbox ended"
		}
		_ = m.stopBox(ctx, b, why)
		s.box = nil
	}
	if s.box == nil && net == NetworkOff {
		b, failed, err := m.resume(ctx, s, owner)
		if err != nil {
			return nil, nil, how, err
		}
		if failed != nil {
			m.log.Warn("a session's sandbox couldn't be resumed: a new one starts", "session", id, "error", failed)
			how.unresumed = failed
		}
		if b != nil {
			s.box, how.resumed = b, true
			m.log.Debug("resumed a session's sandbox", "session", id, "sandbox", b.sb.ID, "disk", t1.Sub(t0), "restore", time.Since(t1))
		}
	} else if s.box == nil && m.hasCheckpoint(id) {
		// Its network changed: the interpreter of before can't come back.
		m.removeCheckpoint(id)
	}
	if s.box == nil {
		b, err := m.startBox(ctx, s, net, owner)
		if err != nil {
			if errcode.Code(err) != "" {
				return nil, nil, how, err
			}
			return nil, nil, how, fmt.Errorf("starting the session's sandbox: %w", err)
		}
		s.box, how.cold = b, true
		m.log.Debug("started a session's sandbox", "session", id, "sandbox", b.sb.ID, "network", string(net),
			"disk", t1.Sub(t0), "start", time.Since(t1))
	}
	s.active++
	s.lastUsed = time.Now()
	return s, s.box, how, nil
}

// release counts a run or a file operation out.
func (m *Manager) release(s *session) {
	s.mu.Lock()
	s.active--
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// runEnv is a run's environment: the sandbox's, its token, and the proxy in packages mode.
func runEnv(r Run, net Network, token string) []string {
	env := append(sandbox.DefaultEnv(), runToken+"="+token,
		// Debian's python refuses pip installs outside a virtual environment (PEP 668): in a
		// session, installs go to the user's site in /work (HOME).
		"PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_USER=1",
		// matplotlib draws with Agg in every process (none has a screen); the live interpreter
		// shows its figures itself (kernel.py). Its settings and font cache go in the sandbox's
		// /tmp, not among the session's files.
		"MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/matplotlib")
	if net == NetworkPackages && r.ProxyURL != "" {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env = append(env, k+"="+r.ProxyURL)
		}
	}
	return env
}

// runIn runs one process in b and says how it ended: stopcause.Of says why it stopped, named here
// on the session's wire ("timeout", "memory", "pids", "disk").
func (m *Manager) runIn(ctx context.Context, s *session, b *box, r Run, net Network, args []string, stdin string) (Result, error) {
	res := Result{ExitCode: -1}
	before, _ := b.sb.Stats()
	token := newToken()
	env := runEnv(r, net, token)
	var o outcome
	switch {
	case b.agent != nil && m.inKernel(r):
		o = m.runCell(ctx, b, r, runEnv(r, net, newToken()), token)
	case b.agent != nil:
		o = m.runAgent(ctx, b, r, args, env, stdin, token)
	default:
		o = m.runExec(ctx, b, r, args, env, stdin, token)
	}
	res.Took = o.took
	res.Value, res.Restarted = o.value, o.restarted
	x, timedOut, cancelled, killed := o.exited, o.timedOut, o.cancelled, o.killed
	if x.err == nil {
		res.ExitCode = x.code
	}
	if x.err != nil || b.isEnded() {
		// The sandbox may be ending: its last figures are read as it goes.
		select {
		case <-b.ended:
		case <-time.After(2 * time.Second):
		}
	}
	died := b.isEnded()
	after := b.final
	if !died {
		after, _ = b.sb.Stats()
	}
	lim := m.opts.Limits
	why := b.stopped()
	failed := res.ExitCode != 0
	f := stopcause.Facts{Before: before, After: after, Cancelled: cancelled, Stopped: why != "", TimedOut: timedOut,
		Died: died, Failed: failed, DiskFull: failed && m.workspaceFull(s.id)}
	switch stopcause.Of(f) {
	case stopcause.Cancelled:
		return res, fmt.Errorf("the run was cancelled: %w", ctx.Err())
	case stopcause.Stopped:
		return res, errcode.Errorf(errcode.Failed, "the code was stopped: %s", why)
	case stopcause.Timeout:
		res.Stopped = "timeout"
		res.Message = fmt.Sprintf("the code ran longer than %s and was stopped; the session's files and sandbox are kept", durationText(r.Timeout))
		switch {
		case killed:
			res.Message = fmt.Sprintf("the code ran longer than %s and was stopped with the session's sandbox; its files are kept and its next run starts a new sandbox", durationText(r.Timeout))
		case o.restarted:
			res.Message = fmt.Sprintf("the code ran longer than %s and didn't stop when interrupted, so the interpreter was restarted: its variables are gone; files in /work are kept", durationText(r.Timeout))
		case m.inKernel(r):
			res.Message = fmt.Sprintf("the code ran longer than %s and was interrupted (KeyboardInterrupt); the interpreter and its variables are kept, and so are the session's files", durationText(r.Timeout))
		}
	case stopcause.Memory:
		res.Stopped = "memory"
		res.Message = fmt.Sprintf("the code used more memory than the session's limit (%d MiB) and was stopped; the session's files are kept and its next run starts a new sandbox", lim.MemoryBytes>>20)
		if !died && o.restarted {
			res.Message = fmt.Sprintf("the code used more memory than the session's limit (%d MiB) and was stopped with the interpreter: its variables are gone; files in /work are kept", lim.MemoryBytes>>20)
		}
	case stopcause.Processes:
		res.Stopped = "pids"
		res.Message = fmt.Sprintf("the code started more processes or threads than the session's limit (%d) and was stopped", lim.Pids)
		if died {
			res.Message += "; the session's files are kept and its next run starts a new sandbox"
		}
	case stopcause.Disk:
		res.Stopped = "disk"
		res.Message = fmt.Sprintf("the code ran out of disk space: the session's files may take %d MiB; remove some to make room", m.opts.DiskMB)
	case stopcause.Died:
		return res, errcode.Errorf(errcode.Failed, "the session's sandbox stopped while the code ran; its files are kept and the next run starts a new sandbox")
	default:
		if x.err != nil {
			return res, fmt.Errorf("running the code in the session's sandbox: %w", x.err)
		}
		if o.restarted {
			res.Message = fmt.Sprintf("the interpreter ended (exit status %d): its variables are gone; files in /work are kept, and the next run starts a new interpreter", res.ExitCode)
		}
	}
	return res, nil
}

// outcome is what a run's process did, and what was done to it.
type outcome struct {
	exited
	took                        time.Duration
	timedOut, cancelled, killed bool   // killed: with its sandbox
	value                       string // a cell's value
	restarted                   bool   // the cell's interpreter ended
	image                       []byte // the image a cell is showing, as far as it came
	imageTooLarge               bool   // it came to more than maxImage
}

// runExec runs the process with runsc exec, its output through pipes of its own.
func (m *Manager) runExec(ctx context.Context, b *box, r Run, args, env []string, stdin, token string) (o outcome) {
	outR, outW, err := os.Pipe()
	if err != nil {
		o.err = fmt.Errorf("making the run's output pipe: %w", err)
		return o
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		o.err = fmt.Errorf("making the run's output pipe: %w", err)
		return o
	}
	defer errR.Close()
	var inR *os.File
	if stdin != "" {
		var inW *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			outW.Close()
			errW.Close()
			o.err = fmt.Errorf("making the run's input pipe: %w", err)
			return o
		}
		go func() {
			_, _ = inW.WriteString(stdin)
			inW.Close()
		}()
	}
	out := &streams{}
	out.start(outR, r.Stdout)
	out.start(errR, r.Stderr)

	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	done := make(chan exited, 1)
	started := time.Now()
	go func() {
		// The agent's program as the run's shepherd: the processes the run starts end with it.
		shepherded := append([]string{"/usr/bin/python3", "-I", "-S", "-c", agentProgram, "shepherd"}, args...)
		code, err := b.sb.Exec(execCtx, shepherded, &sandbox.ExecOpts{Env: env, Cwd: "/work",
			Stdin: inR, Stdout: outW, Stderr: errW})
		done <- exited{code, err}
	}()
	timer := time.NewTimer(r.Timeout)
	defer timer.Stop()
	select {
	case o.exited = <-done:
	case <-timer.C:
		o.timedOut = true
	case <-ctx.Done():
		o.cancelled = true
	}
	if o.timedOut || o.cancelled {
		o.exited, o.killed = m.kill(b, token, done, cancelExec)
	}
	o.took = time.Since(started)
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
	}
	// The process is gone and what it wrote is in the pipes (a sandbox writes them as the code
	// does): stop the readers and hand on what is left, rather than wait for background
	// processes that may hold the pipes open.
	out.finish(outR, errR)
	return o
}

// runAgent has the sandbox's agent run the process, its output coming over the agent's socket.
func (m *Manager) runAgent(ctx context.Context, b *box, r Run, args, env []string, stdin, token string) (o outcome) {
	started := time.Now()
	defer func() { o.took = time.Since(started) }()
	id, frames, done, err := b.agent.start(args, env, stdin)
	if err != nil {
		o.err = err
		return o
	}
	defer done()
	return m.follow(ctx, b, r, id, frames, runToken+"="+token, false)
}

// runCell runs r.Code as a cell of the sandbox's live interpreter (started with env when none
// runs). Past its time, or cancelled, the cell is interrupted; if it is still running
// interruptWait later, its interpreter is killed, and if even that doesn't end it within killWait,
// the sandbox goes.
func (m *Manager) runCell(ctx context.Context, b *box, r Run, env []string, token string) (o outcome) {
	started := time.Now()
	defer func() { o.took = time.Since(started) }()
	mark := runToken + "=" + token
	id, frames, done, err := b.agent.startCell(r.Code, mark, env, r.Reset)
	if err != nil {
		o.err = err
		return o
	}
	defer done()
	return m.follow(ctx, b, r, id, frames, mark, true)
}

// follow reads the frames of the agent's run id until it ends: what it prints goes to r.Stdout
// and r.Stderr, a cell's value and the end of its interpreter into the outcome. Past r.Timeout,
// or once ctx ends, the run is stopped: a cell is interrupted first and killed (with its
// interpreter) interruptWait later, any other run killed at once (its processes, and those
// marked with mark); a run the kill doesn't end within killWait goes with its sandbox.
func (m *Manager) follow(ctx context.Context, b *box, r Run, id uint32, frames <-chan frame, mark string, cell bool) (o outcome) {
	timer := time.NewTimer(r.Timeout)
	defer timer.Stop()
	ctxDone := ctx.Done()
	var interrupted, killDeadline <-chan time.Time
	kill := func() {
		killDeadline = time.After(killWait)
		if err := b.agent.kill(id, mark); err != nil {
			m.log.Warn("asking the session's agent to kill a run", "sandbox", b.sb.ID, "error", err)
		}
	}
	stop := func() {
		switch {
		case interrupted != nil || killDeadline != nil:
		case cell:
			interrupted = time.After(interruptWait)
			if err := b.agent.interrupt(id); err != nil {
				m.log.Warn("asking the session's agent to interrupt a cell", "sandbox", b.sb.ID, "error", err)
			}
		default:
			kill()
		}
	}
	emit := func(f func([]byte), data []byte) {
		if f != nil {
			f(data)
		}
	}
	for {
		select {
		case f := <-frames:
			switch f.kind {
			case 'o':
				emit(r.Stdout, f.data)
			case 'e':
				emit(r.Stderr, f.data)
			case 'v':
				// A long value comes in several frames; what the code forged beyond a
				// notebook's value is cut.
				if len(o.value) < maxValue {
					o.value += string(f.data[:min(len(f.data), maxValue-len(o.value))])
				}
			case 'd':
				if len(o.image)+len(f.data) > maxImage {
					o.image, o.imageTooLarge = nil, true
				} else if !o.imageTooLarge {
					o.image = append(o.image, f.data...)
				}
			case 'i':
				m.showImage(r, string(f.data), o.image, o.imageTooLarge)
				o.image, o.imageTooLarge = nil, false
			case 'r':
				o.restarted = true
			case 'x':
				o.code, o.err = exitStatus(f.data)
				return o
			case 'f':
				what := "the code's process"
				if cell {
					what = "the code"
				}
				o.err = fmt.Errorf("%s could not start: %s", what, f.data)
				return o
			}
		case <-timer.C:
			o.timedOut = true
			stop()
		case <-ctxDone:
			ctxDone = nil
			o.cancelled = true
			stop()
		case <-interrupted:
			interrupted = make(chan time.Time) // never again
			m.log.Info("a cell didn't stop when interrupted: killing its interpreter", "sandbox", b.sb.ID)
			kill()
		case <-killDeadline:
			killDeadline = make(chan time.Time) // never again
			m.log.Warn("a run's processes could not be killed: stopping the session's sandbox", "sandbox", b.sb.ID)
			o.killed = true
			_ = b.sb.Destroy(context.Background())
		case <-b.agent.dead:
			o.err = errors.New("the session's sandbox ended")
			return o
		}
	}
}

// showImage hands an image the cell showed to r.Display, once its type and bytes agree: what runs
// in the sandbox may have taken the agent over. One it can't take is said on r.Stderr instead.
func (m *Manager) showImage(r Run, mimeType string, data []byte, tooLarge bool) {
	if r.Display == nil {
		return
	}
	why := ""
	switch {
	case tooLarge:
		why = fmt.Sprintf("it is larger than %d MiB", maxImage>>20)
	case !imageMatches(mimeType, data):
		why = fmt.Sprintf("its bytes are not the %q it says", mimeType)
	}
	if why != "" {
		if r.Stderr != nil {
			r.Stderr([]byte("[an image was not shown: " + why + "]\n"))
		}
		return
	}
	r.Display(mimeType, data)
}

// imageTypes are the MIME types of the images a cell may show, with how their bytes begin.
var imageTypes = map[string][]byte{
	"image/png":  []byte("\x89PNG\r\n\x1a\n"),
	"image/jpeg": {0xFF, 0xD8, 0xFF},
}

// imageMatches says whether data begins as an image of mimeType does.
func imageMatches(mimeType string, data []byte) bool {
	magic, ok := imageTypes[mimeType]
	return ok && bytes.HasPrefix(data, magic)
}

// kill kills every process of the run marked with token, and waits (bounded) for the run's
// process to end. When that fails, the sandbox goes, killing everything in it: the session's
// files stay and its next run starts a new one.
func (m *Manager) kill(b *box, token string, done <-chan exited, cancelExec context.CancelFunc) (x exited, sandboxGone bool) {
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	_, kerr := b.sb.Exec(ctx, []string{"/usr/bin/python3", "-I", "-S", "-c", agentProgram, "kill", runToken + "=" + token}, nil)
	if kerr == nil {
		select {
		case x := <-done:
			return x, false
		case <-ctx.Done():
		}
	}
	m.log.Warn("a run's processes could not be killed: stopping the session's sandbox", "sandbox", b.sb.ID, "error", kerr)
	_ = b.sb.Destroy(context.Background())
	select {
	case x := <-done:
		return x, true
	case <-time.After(killWait):
		cancelExec()
		return <-done, true
	}
}

// exited is how a run's process ended: its status, or why runsc exec failed.
type exited struct {
	code int
	err  error
}

// workspaceFull reports whether the session's workspace has (next to) no room left.
func (m *Manager) workspaceFull(id string) bool {
	free, files, size, err := diskFree(m.mountPath(id))
	return err == nil && isFull(free, files, size)
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// durationText writes a run's time the way people say it: "60 seconds", "2 minutes", "1.5 seconds".
func durationText(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		if d == time.Minute {
			return "1 minute"
		}
		return fmt.Sprintf("%d minutes", d/time.Minute)
	case d%time.Second == 0:
		if d == time.Second {
			return "1 second"
		}
		return fmt.Sprintf("%d seconds", d/time.Second)
	}
	return fmt.Sprintf("%g seconds", d.Seconds())
}

// streams forwards a run's stdout and stderr as they are read.
type streams struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	emit map[*os.File]func([]byte)
}

func (s *streams) start(f *os.File, emit func([]byte)) {
	s.mu.Lock()
	if s.emit == nil {
		s.emit = map[*os.File]func([]byte){}
	}
	s.emit[f] = emit
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 && emit != nil {
				emit(append([]byte(nil), buf[:n]...))
			}
			if err != nil {
				return
			}
		}
	}()
}

// finish stops the readers of files and forwards what is still buffered in them.
func (s *streams) finish(files ...*os.File) {
	for _, f := range files {
		_ = f.SetReadDeadline(time.Now())
	}
	s.wg.Wait()
	for _, f := range files {
		_ = f.SetReadDeadline(time.Time{})
		s.mu.Lock()
		emit := s.emit[f]
		s.mu.Unlock()
		buf := make([]byte, 32<<10)
		for {
			n, err := buffered(f)
			if err != nil || n <= 0 {
				break
			}
			k, rerr := f.Read(buf[:min(n, len(buf))])
			if k > 0 && emit != nil {
				emit(append([]byte(nil), buf[:k]...))
			}
			if rerr != nil {
				break
			}
		}
	}
}

// buffered returns how many bytes wait in the pipe f (FIONREAD), without touching its mode.
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
