package session

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cell runs code as a python run with opts and returns the result and what it printed; an error
// fails the test.
func cell(t *testing.T, m *Manager, id, code string, opts Run) (Result, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var o output
	opts.Language, opts.Code = "python", code
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	res, err := m.Run(ctx, id, o.run(opts))
	if err != nil {
		t.Fatalf("cell %q: %v (stdout %q, stderr %q)", code, err, o.stdout(), o.stderr())
	}
	return res, o.stdout(), o.stderr()
}

// TestTheInterpreterKeepsNamesAcrossRuns: run_python's cells share one interpreter, as a
// notebook's do: names, imports and functions last; the last expression's value comes back
// (none for None or a statement); an exception, a syntax error and sys.exit end the cell, not the
// interpreter; input() reads nothing; a reset starts afresh; an interpreter the code ends is
// said to be gone, and the next cell has a new one.
func TestTheInterpreterKeepsNamesAcrossRuns(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("kernel")

	res, out, errOut := cell(t, m, id, "import math\nx = 21\ndef double(v):\n    return v * 2\n", Run{})
	if res.ExitCode != 0 || res.Value != "" || out != "" || errOut != "" || res.Restarted {
		t.Fatalf("a cell of statements: %+v, %q, %q", res, out, errOut)
	}
	if res, _, _ := cell(t, m, id, "double(x)", Run{}); res.Value != "42" || res.ExitCode != 0 {
		t.Errorf("a cell using the names of the one before: %+v; want value 42", res)
	}
	res, out, errOut = cell(t, m, id, "import sys\nprint('a')\nprint('b', file=sys.stderr)\n[math.floor(1.5), 'x']", Run{})
	if res.Value != "[1, 'x']" || out != "a\n" || errOut != "b\n" {
		t.Errorf("a cell that prints and ends in an expression: %+v, %q, %q", res, out, errOut)
	}
	if res, _, _ := cell(t, m, id, "_", Run{}); res.Value != "[1, 'x']" {
		t.Errorf("_ after a value: %+v; want the last value", res)
	}
	if res, _, _ := cell(t, m, id, "print('p')", Run{}); res.Value != "" {
		t.Errorf("a cell whose expression is None: %+v; want no value", res)
	}

	res, _, errOut = cell(t, m, id, "y = 7\n1/0\n", Run{})
	if res.ExitCode != 1 || res.Value != "" || !strings.Contains(errOut, "line 2") || !strings.Contains(errOut, "1/0") ||
		!strings.Contains(errOut, "ZeroDivisionError") || strings.Contains(errOut, "kernel") || res.Restarted {
		t.Errorf("a cell that raises: %+v, stderr %q; want exit 1 and a traceback of the cell's own lines", res, errOut)
	}
	res, _, errOut = cell(t, m, id, "def (:\n", Run{})
	if res.ExitCode != 1 || !strings.Contains(errOut, "SyntaxError") {
		t.Errorf("a syntax error: %+v, %q", res, errOut)
	}
	if res, _, _ := cell(t, m, id, "import sys\nsys.exit(3)", Run{}); res.ExitCode != 3 || res.Restarted {
		t.Errorf("sys.exit(3): %+v; want exit 3, the interpreter kept", res)
	}
	res, _, errOut = cell(t, m, id, "input()", Run{})
	if res.ExitCode != 1 || !strings.Contains(errOut, "EOFError") {
		t.Errorf("input(): %+v, %q; want EOFError (no input)", res, errOut)
	}
	if res, _, _ := cell(t, m, id, "(x, y, double(y))", Run{}); res.Value != "(21, 7, 14)" {
		t.Errorf("the names after an error, a syntax error, sys.exit and input: %+v", res)
	}
	// What pip installs in the user's site (made after the interpreter started) imports in the
	// next cell.
	cell(t, m, id, "import os, site\nd = site.getusersitepackages()\nos.makedirs(d)\nopen(os.path.join(d, 'installed_here.py'), 'w').write('ANSWER = 42')", Run{})
	if res, _, errOut := cell(t, m, id, "import installed_here\ninstalled_here.ANSWER", Run{}); res.Value != "42" {
		t.Errorf("importing a module put in the user's site by the cell before: %+v, %q", res, errOut)
	}
	// bash runs beside it, on the same files, in a process of its own.
	cell(t, m, id, "open('from-cell.txt', 'w').write(str(x))", Run{})
	if res, out, _ := runOK(t, m, id, "bash", "cat from-cell.txt"); out != "21" || res.Cold {
		t.Errorf("bash after cells: %+v, %q", res, out)
	}

	if res, _, _ := cell(t, m, id, "'x' in globals(), __name__", Run{Reset: true}); res.Value != "(False, '__main__')" || res.Cold {
		t.Errorf("a reset: %+v; want a new interpreter in the same sandbox", res)
	}
	cell(t, m, id, "z = 5", Run{})
	res, _, _ = cell(t, m, id, "import os\nos._exit(5)", Run{})
	if res.ExitCode != 5 || !res.Restarted || !strings.Contains(res.Message, "variables are gone") {
		t.Errorf("a cell that ends the interpreter: %+v; want exit 5 and a message saying the variables are gone", res)
	}
	if res, _, _ := cell(t, m, id, "'z' in globals()", Run{}); res.Value != "False" || res.Restarted || res.Cold {
		t.Errorf("the cell after: %+v; want a new interpreter, in the same sandbox", res)
	}
	// A stopped sandbox's interpreter is gone, and the next cell is told so.
	cell(t, m, id, "z = 6", Run{})
	if err := m.Stop(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	res, _, _ = cell(t, m, id, "'z' in globals()", Run{})
	if res.Value != "False" || !res.Cold || !strings.Contains(res.Message, "names defined in earlier runs are gone") {
		t.Errorf("the first cell after a stop: %+v; want a new sandbox and a message saying the names are gone", res)
	}
	if res, _, _ := cell(t, m, id, "1", Run{}); res.Message != "" {
		t.Errorf("the cell after that: %+v; want no message", res)
	}
	// A restart (a new manager on the folder) resumes the interpreter from the checkpoint the
	// closing manager made (see checkpoint_test.go). Without one (a crash makes none), the first
	// cell after a restart is told the names are gone, but not a session's first cell ever,
	// nor one after only bash ran.
	cell(t, m, id, "w = 1", Run{})
	bashOnly := testID("kernel-bash")
	runOK(t, m, bashOnly, "bash", "true")
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = ts.manager(t, Options{})
	if res, _, _ := cell(t, m, id, "w", Run{}); resumed(t, res) && (res.Value != "1" || res.Message != "") {
		t.Errorf("the first cell after a restart: %+v; want the names resumed", res)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.removeCheckpoint(id)
	m = ts.manager(t, Options{})
	if res, _, _ := cell(t, m, id, "'w' in globals()", Run{}); res.Value != "False" || !strings.Contains(res.Message, "names defined in earlier runs are gone") {
		t.Errorf("the first cell after a restart with no checkpoint: %+v; want a message saying the names are gone", res)
	}
	if res, _, _ := cell(t, m, bashOnly, "1", Run{}); res.Message != "" {
		t.Errorf("the first cell of a session that ran only bash, after a restart: %+v; want no message", res)
	}
	if res, _, _ := cell(t, m, testID("kernel-new"), "1", Run{}); res.Message != "" {
		t.Errorf("the first cell of a new session: %+v; want no message", res)
	}
}

// TestACellPastItsTimeIsInterrupted: a cell past its time gets KeyboardInterrupt and keeps the
// interpreter; one that catches it is killed with its interpreter a moment later, and says so;
// the processes a cell starts end with it, finished or stopped.
func TestACellPastItsTimeIsInterrupted(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("interrupt")
	cell(t, m, id, "keep = 'kept'", Run{})

	res, _, errOut := cell(t, m, id, "import time\nn = 0\nwhile True:\n    n += 1\n    time.sleep(0.01)\n", Run{Timeout: 2 * time.Second})
	if res.Stopped != "timeout" || res.ExitCode != 130 || res.Restarted || !strings.Contains(errOut, "KeyboardInterrupt") ||
		!strings.Contains(res.Message, "interrupted") || !strings.Contains(res.Message, "2 seconds") {
		t.Fatalf("a loop past its time: %+v, stderr %q; want KeyboardInterrupt and the interpreter kept", res, errOut)
	}
	if res, _, _ := cell(t, m, id, "keep, n > 0", Run{}); res.Value != "('kept', True)" {
		t.Errorf("after the interrupt: %+v; want the names kept", res)
	}

	// A cell's processes end with it: a finished cell's, and an interrupted one's (the cell
	// waits for its child: the interrupt kills it, so the cell goes on to its KeyboardInterrupt).
	res, _, _ = cell(t, m, id, "import subprocess\nsubprocess.Popen(['sleep', '301'])\nsubprocess.Popen(['setsid', 'sleep', '302'])\n'started'", Run{})
	if res.Value != "'started'" {
		t.Fatalf("a cell starting processes: %+v", res)
	}
	res, _, _ = cell(t, m, id, "subprocess.run(['sleep', '303'])", Run{Timeout: 2 * time.Second})
	if res.Stopped != "timeout" || res.Restarted {
		t.Errorf("a cell waiting for a child past its time: %+v; want interrupted, the interpreter kept", res)
	}
	const sleeps = "import os\nsorted(open('/proc/%s/cmdline' % p).read().replace('\\0', ' ').strip() for p in os.listdir('/proc') " +
		"if p.isdigit() and open('/proc/%s/comm' % p).read().strip() == 'sleep')"
	if res, _, _ := cell(t, m, id, sleeps, Run{}); res.Value != "[]" {
		t.Errorf("the processes left after two cells: %s; want none", res.Value)
	}

	res, _, _ = cell(t, m, id, "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass\n",
		Run{Timeout: 2 * time.Second})
	if res.Stopped != "timeout" || !res.Restarted || !strings.Contains(res.Message, "interpreter was restarted") {
		t.Fatalf("a cell that catches the interrupt: %+v; want the interpreter restarted, and the message saying so", res)
	}
	if res, _, _ := cell(t, m, id, "'keep' in globals()", Run{}); res.Value != "False" || res.Cold {
		t.Errorf("after a restart: %+v; want a new interpreter in the same sandbox", res)
	}
}

// TestACellCantConfuseTheAgent: a cell that writes a line of junk longer than an image's (9 MiB)
// to the pipe on which its interpreter says a cell ended has its interpreter killed (the cell
// says so), and the next cell works in a new one; a value of more than 64 KiB comes back whole.
func TestACellCantConfuseTheAgent(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("confuse")
	res, _, _ := cell(t, m, id, "'é' * 40000", Run{})
	if want := "'" + strings.Repeat("é", 40000) + "'"; res.Value != want {
		t.Errorf("a value of 80 KB: %d bytes back, want %d", len(res.Value), len(want))
	}
	res, _, errOut := cell(t, m, id, `import fcntl, os
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        pipe = os.readlink('/proc/self/fd/%d' % fd).startswith('pipe:')
        if fd > 2 and pipe and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
            os.write(fd, b'x' * (9 << 20))
    except OSError:
        pass
`, Run{})
	if !res.Restarted {
		t.Errorf("a cell writing junk to the interpreter's pipe: %+v, %q; want its interpreter restarted", res, errOut)
	}
	if res, _, _ := cell(t, m, id, "1 + 1", Run{}); res.Value != "2" {
		t.Errorf("the next cell: %+v", res)
	}
}

// TestCellsOfOneSessionTakeTurns: cells sent at once run one after the other in the one
// interpreter, each with its own output and value, and each sees what the others defined.
func TestCellsOfOneSessionTakeTurns(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("turns")
	cell(t, m, id, "import time, threading\nseen = []", Run{})
	const n = 4
	var wg sync.WaitGroup
	values := make([]string, n)
	outs := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o output
			res, err := m.Run(context.Background(), id, o.run(Run{Language: "python", Timeout: time.Minute,
				Code: "seen.append(" + strconv.Itoa(i) + ")\ntime.sleep(0.2)\nprint('cell', " + strconv.Itoa(i) + ")\nlen(seen)"}))
			if err != nil {
				t.Errorf("cell %d: %v", i, err)
			}
			values[i], outs[i] = res.Value, o.stdout()
		}()
	}
	wg.Wait()
	lens := map[string]bool{}
	for i := range n {
		if outs[i] != "cell "+strconv.Itoa(i)+"\n" {
			t.Errorf("cell %d printed %q", i, outs[i])
		}
		lens[values[i]] = true
	}
	if len(lens) != n || !lens["1"] || !lens[strconv.Itoa(n)] {
		t.Errorf("the values of %d cells sent at once: %q; want 1 to %d, one each", n, values, n)
	}
}

// TestTheInterpreterRestsBetweenCells: a thread a cell leaves in the interpreter does no work
// while no cell runs (the interpreter is stopped between cells), and goes on in the next.
func TestTheInterpreterRestsBetweenCells(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("rests")
	res, _, _ := cell(t, m, id, `import threading, time
count = 0
def tick():
    global count
    while True:
        count += 1
        time.sleep(0.01)
threading.Thread(target=tick, daemon=True).start()
time.sleep(0.5)
at_end = count
at_end > 10`, Run{})
	if res.Value != "True" {
		t.Fatalf("a cell that starts a ticking thread: %+v; want it ticking during the cell", res)
	}
	time.Sleep(2 * time.Second)
	res, _, _ = cell(t, m, id, "count - at_end", Run{})
	if n, err := strconv.Atoi(res.Value); err != nil || n > 30 {
		t.Errorf("ticks between two cells 2 s apart: %q; want few (the interpreter rests), not about 200", res.Value)
	}
	res, _, _ = cell(t, m, id, "before = count\ntime.sleep(0.5)\ncount - before > 10", Run{})
	if res.Value != "True" {
		t.Errorf("the thread in the next cell: %+v; want it ticking again", res)
	}
}
