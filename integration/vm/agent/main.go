// Command agent runs in the VMs of integration/vm_test.go (test-agent.service, from the read-only
// share disk): it runs the commands the test sends over the virtio serial port
// /dev/virtio-ports/toolhost.agent, as root, each in a process group of its own, concurrently,
// and answers how each ended. The protocol is integration/vm/agentwire's. Built static
// (CGO_ENABLED=0): the VM's libc is not this machine's.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/integration/vm/agentwire"
)

const (
	port = "/dev/virtio-ports/" + agentwire.PortName
	// portWait bounds the wait for udev to make the port's link at boot.
	portWait = 2 * time.Minute
	// defaultTimeout bounds a command whose request names no bound.
	defaultTimeout = time.Hour
	// waitDelay is how long after a command exits its output may still be held open by a
	// process it left behind (a daemon it started) before the answer goes without the rest.
	waitDelay = 5 * time.Second
)

// baseEnv is every command's environment before the request's own.
var baseEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"}

func main() {
	log.SetFlags(0)
	log.SetPrefix("agent: ")
	f, err := openPort()
	if err != nil {
		log.Fatal(err)
	}
	a := &agent{port: f, running: map[int64]*running{}}
	// The hello blocks until the test connects to its end of the port.
	a.answer(agentwire.Answer{ID: 0, Output: agentwire.ReadyOutput})
	log.Printf("ready on %s", port)
	a.serve()
}

// openPort waits, bounded, for the port to appear and opens it.
func openPort() (*os.File, error) {
	deadline := time.Now().Add(portWait)
	for {
		f, err := os.OpenFile(port, os.O_RDWR, 0)
		if err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the virtio serial port did not appear within %s: %w (is the VM started with -device virtserialport,name=%s?)", portWait, err, agentwire.PortName)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type agent struct {
	port *os.File
	wmu  sync.Mutex // one answer at a time, one line each

	mu      sync.Mutex
	running map[int64]*running
}

// running is a command that has not ended.
type running struct {
	mu     sync.Mutex
	pgid   int    // 0 until it started
	reason string // why it was killed, "" if it was not
}

// kill kills r's process group, saying why.
func (r *running) kill(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reason == "" {
		r.reason = reason
	}
	if r.pgid > 0 {
		_ = syscall.Kill(-r.pgid, syscall.SIGKILL)
	}
}

func (a *agent) answer(ans agentwire.Answer) {
	b, err := json.Marshal(ans)
	if err != nil {
		b, _ = json.Marshal(agentwire.Answer{ID: ans.ID, Exit: -1, Error: "the agent could not encode the answer: " + err.Error()})
	}
	b = append(b, '\n')
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if _, err := a.port.Write(b); err != nil {
		log.Printf("writing the answer to %d: %v", ans.ID, err)
	}
}

// serve reads requests, a line each, until the agent is stopped. While the test is not connected
// to the port, a read ends at once with no data: the agent waits and reads again, so the test
// may connect again later.
func (a *agent) serve() {
	var pending []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := a.port.Read(buf)
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			line := pending[:i]
			pending = pending[i+1:]
			if len(bytes.TrimSpace(line)) > 0 {
				a.handle(line)
			}
		}
		if len(pending) == 0 {
			pending = nil // let a large request's buffer go
		}
		switch {
		case err == nil && n > 0:
		case err == nil, errors.Is(err, io.EOF):
			time.Sleep(100 * time.Millisecond)
		default:
			log.Printf("reading the port: %v", err)
			time.Sleep(time.Second)
		}
	}
}

func (a *agent) handle(line []byte) {
	var req agentwire.Request
	if err := json.Unmarshal(line, &req); err != nil {
		a.answer(agentwire.Answer{ID: req.ID, Exit: -1, Error: fmt.Sprintf("the agent could not read the request %.200q: %v", line, err)})
		return
	}
	if req.Cancel {
		a.mu.Lock()
		r := a.running[req.ID]
		a.mu.Unlock()
		if r != nil {
			r.kill("cancelled")
		}
		return
	}
	if req.ID == 0 || len(req.Args) == 0 {
		a.answer(agentwire.Answer{ID: req.ID, Exit: -1, Error: "a request needs an id other than 0 and a command"})
		return
	}
	r := &running{}
	a.mu.Lock()
	if a.running[req.ID] != nil {
		a.mu.Unlock()
		a.answer(agentwire.Answer{ID: req.ID, Exit: -1, Error: fmt.Sprintf("command %d is already running", req.ID)})
		return
	}
	a.running[req.ID] = r
	a.mu.Unlock()
	go func() {
		ans := run(req, r)
		a.mu.Lock()
		delete(a.running, req.ID)
		a.mu.Unlock()
		a.answer(ans)
	}()
}

// lockedBuffer is the output of one command: its stdout and stderr are one pipe, but a Write may
// come while the answer reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// run runs req's command to its end, killing its process group past its bound or when r is killed.
func run(req agentwire.Request, r *running) agentwire.Answer {
	timeout := defaultTimeout
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	out := &lockedBuffer{}
	cmd := exec.Command(req.Args[0], req.Args[1:]...)
	cmd.Env = append(append([]string(nil), baseEnv...), req.Env...)
	cmd.Dir = "/"
	if req.Cwd != "" {
		cmd.Dir = req.Cwd
	}
	cmd.Stdin = bytes.NewReader([]byte(req.Stdin))
	// The same writer for both: one pipe, the output interleaved as it was written.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = waitDelay

	r.mu.Lock()
	if r.reason != "" { // cancelled before it started
		r.mu.Unlock()
		return agentwire.Answer{ID: req.ID, Exit: -1, Error: r.reason}
	}
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		return agentwire.Answer{ID: req.ID, Exit: -1, Error: fmt.Sprintf("starting %q: %v", req.Args[0], err)}
	}
	r.pgid = cmd.Process.Pid
	r.mu.Unlock()
	timer := time.AfterFunc(timeout, func() { r.kill(fmt.Sprintf("timed out after %s", timeout)) })
	err := cmd.Wait()
	timer.Stop()
	// Reaped: its pid may name another process group from now on.
	r.mu.Lock()
	r.pgid = 0
	r.mu.Unlock()

	ans := agentwire.Answer{ID: req.ID, Output: out.String(), Exit: -1}
	if cmd.ProcessState != nil {
		ans.Exit = cmd.ProcessState.ExitCode()
	}
	r.mu.Lock()
	reason := r.reason
	r.mu.Unlock()
	switch {
	case reason != "":
		ans.Error = reason
	case errors.Is(err, exec.ErrWaitDelay):
		// It exited, but something it started still holds its output: what came so far is all.
	case cmd.ProcessState != nil && !cmd.ProcessState.Exited():
		ans.Error = cmd.ProcessState.String() // "signal: killed"
	case err != nil && cmd.ProcessState == nil:
		ans.Error = err.Error()
	}
	return ans
}
