package session

import (
	"bufio"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// agentProgram is the sandbox's first process: it starts the runs' processes (see agent.py for
// the protocol).
//
//go:embed agent.py
var agentProgram string

// maxFrame bounds a frame's payload from the agent (it sends at most 64 KiB): what runs in the
// sandbox may have taken the agent over, so what it sends is read with care.
const maxFrame = 1 << 20

// kernelProgram is the live interpreter in which run_python's cells run (see kernel.py); the
// agent starts it at the first cell, and again after it ended or a reset.
//
//go:embed kernel.py
var kernelProgram string

// kernelArgs start the interpreter. Not isolated (-I): modules in /work, and what pip installs in
// the user's site there, import, as they did for python3 -.
var kernelArgs = []string{"/usr/bin/python3", "-u", "-c", kernelProgram}

// frame is one message of the agent.
type frame struct {
	// 'o' stdout, 'e' stderr, 'x' exit status, 'f' could not start, 'v' a cell's value, 'r' the
	// interpreter ended during the cell, 'd' a piece of an image the cell shows, 'i' its end (its
	// MIME type)
	kind byte
	data []byte
}

// agent is the host's end of a sandbox's agent.
type agent struct {
	conn *os.File

	wmu sync.Mutex // one request written at a time

	mu   sync.Mutex
	next uint32
	runs map[uint32]*agentRun
	dead chan struct{} // closed when the agent's socket ended
}

// agentRun is where the frames of one process go.
type agentRun struct {
	frames chan frame
	gone   chan struct{} // closed when the run no longer reads
}

func newAgent(conn *os.File) *agent {
	a := &agent{conn: conn, runs: map[uint32]*agentRun{}, dead: make(chan struct{})}
	go a.read()
	return a
}

// read hands each frame to its run until the socket ends.
func (a *agent) read() {
	defer close(a.dead)
	r := bufio.NewReaderSize(a.conn, 64<<10)
	var head [9]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[5:])
		if n > maxFrame {
			return // not the agent talking: give up on the sandbox's socket
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			return
		}
		id := binary.BigEndian.Uint32(head[1:5])
		a.mu.Lock()
		run := a.runs[id]
		a.mu.Unlock()
		if run != nil {
			select {
			case run.frames <- frame{kind: head[0], data: data}:
			case <-run.gone:
			}
		}
	}
}

// request is what the host asks of the agent.
type request struct {
	Op    string   `json:"op"`
	ID    uint32   `json:"id"`
	Args  []string `json:"args,omitempty"`
	Env   []string `json:"env,omitempty"`
	Stdin string   `json:"stdin,omitempty"`
	Mark  string   `json:"mark,omitempty"`
	Code  string   `json:"code,omitempty"`
	Reset bool     `json:"reset,omitempty"`
}

func (a *agent) send(req request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if _, err := a.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("talking to the session's sandbox: %w", err)
	}
	return nil
}

// start starts a process and returns its id and the channel of its frames; done forgets it.
func (a *agent) start(args, env []string, stdin string) (uint32, <-chan frame, func(), error) {
	return a.open(request{Op: "run", Args: args, Env: env, Stdin: stdin})
}

// startCell runs code as a cell of the sandbox's live interpreter, its processes marked with
// mark; env is the interpreter's when the cell starts one (none runs, or reset asks for a new
// one). It returns the cell's id and the channel of its frames; done forgets it.
func (a *agent) startCell(code, mark string, env []string, reset bool) (uint32, <-chan frame, func(), error) {
	return a.open(request{Op: "py", Code: code, Mark: mark, Args: kernelArgs, Env: env, Reset: reset})
}

// open sends req under a new id and returns the id and the channel of its frames; done forgets
// it.
func (a *agent) open(req request) (uint32, <-chan frame, func(), error) {
	a.mu.Lock()
	a.next++
	id := a.next
	// Buffered: a run whose reader is slow holds the others up only once this is full.
	run := &agentRun{frames: make(chan frame, 64), gone: make(chan struct{})}
	a.runs[id] = run
	a.mu.Unlock()
	done := func() {
		a.mu.Lock()
		delete(a.runs, id)
		a.mu.Unlock()
		close(run.gone)
	}
	req.ID = id
	if err := a.send(req); err != nil {
		done()
		return 0, nil, nil, err
	}
	return id, run.frames, done, nil
}

// kill asks the agent to kill process id's group and every process marked with mark.
func (a *agent) kill(id uint32, mark string) error {
	return a.send(request{Op: "kill", ID: id, Mark: mark})
}

// interrupt asks the agent for a KeyboardInterrupt in cell id, the processes it started killed.
func (a *agent) interrupt(id uint32) error {
	return a.send(request{Op: "interrupt", ID: id})
}

// exitStatus reads the payload of an 'x' frame.
func exitStatus(data []byte) (int, error) {
	code, err := strconv.Atoi(string(data))
	if err != nil {
		return -1, errors.New("the session's sandbox gave an exit status that isn't a number")
	}
	return code, nil
}
