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

// frame is one message of the agent.
type frame struct {
	kind byte // 'o' stdout, 'e' stderr, 'x' exit status, 'f' could not start
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
	if err := a.send(request{Op: "run", ID: id, Args: args, Env: env, Stdin: stdin}); err != nil {
		done()
		return 0, nil, nil, err
	}
	return id, run.frames, done, nil
}

// kill asks the agent to kill process id's group and every process marked with mark.
func (a *agent) kill(id uint32, mark string) error {
	return a.send(request{Op: "kill", ID: id, Mark: mark})
}

// exitStatus reads the payload of an 'x' frame.
func exitStatus(data []byte) (int, error) {
	code, err := strconv.Atoi(string(data))
	if err != nil {
		return -1, errors.New("the session's sandbox gave an exit status that isn't a number")
	}
	return code, nil
}
