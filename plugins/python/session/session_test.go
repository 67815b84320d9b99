package session

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// TestFilesLastAcrossRuns: what one run writes the next reads, in python and bash alike; the
// first run starts the sandbox and the next ones reuse it; the files are the sandbox user's, and
// the Go API sees, reads, writes and removes them.
func TestFilesLastAcrossRuns(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	ctx := context.Background()
	id := testID("files")

	res, out, errOut := runOK(t, m, id, "python", "import os\nopen('notes.txt','w').write('hello')\nprint(os.getcwd(), os.getuid())")
	if !res.Cold || res.ExitCode != 0 || strings.TrimSpace(out) != "/work 65534" {
		t.Fatalf("first run: %+v, stdout %q, stderr %q; want a cold start printing /work 65534", res, out, errOut)
	}
	res, out, _ = runOK(t, m, id, "bash", "cat notes.txt; echo; stat -c '%u:%g %a' notes.txt; ls -A")
	if res.Cold || res.ExitCode != 0 || out != "hello\n65534:65534 644\nnotes.txt\n" {
		t.Fatalf("second run: %+v, stdout %q; want the file of the first, in the same sandbox", res, out)
	}

	files, err := m.Files(ctx, id)
	if err != nil || len(files) != 1 || files[0].Path != "notes.txt" || files[0].Size != 5 || files[0].Dir {
		t.Fatalf("Files = %+v, %v; want notes.txt of 5 bytes", files, err)
	}
	f, err := m.WriteFile(ctx, id, "data/in/table.csv", strings.NewReader("a,b\n1,2\n"))
	if err != nil || f.Path != "data/in/table.csv" || f.Size != 8 {
		t.Fatalf("WriteFile = %+v, %v", f, err)
	}
	_, out, _ = runOK(t, m, id, "bash", "stat -c '%n %u:%g %a' data data/in data/in/table.csv; cat data/in/table.csv")
	if out != "data 65534:65534 755\ndata/in 65534:65534 755\ndata/in/table.csv 65534:65534 644\na,b\n1,2\n" {
		t.Errorf("what the code sees of an upload: %q", out)
	}
	if _, err := m.WriteFile(ctx, id, "/work/data/in/table.csv", strings.NewReader("replaced")); err != nil {
		t.Fatal(err)
	}
	if b, err := m.ReadFile(ctx, id, "data/in/table.csv", 100); err != nil || string(b) != "replaced" {
		t.Errorf("ReadFile after a replacing write = %q, %v", b, err)
	}
	if _, err := m.ReadFile(ctx, id, "data/in/table.csv", 3); errcode.Code(err) != errcode.TooLarge {
		t.Errorf("ReadFile of 8 bytes with max 3: %v; want too_large", err)
	}
	if _, err := m.ReadFile(ctx, id, "nothing.txt", 100); errcode.Code(err) != errcode.NotFound {
		t.Errorf("ReadFile of a missing file: %v; want not_found", err)
	}
	if _, err := m.ReadFile(ctx, id, "data", 100); errcode.Code(err) != errcode.BadPath {
		t.Errorf("ReadFile of a folder: %v; want bad_path", err)
	}
	// A FIFO the code makes lives in gVisor alone; one on the disk is what a crafted image or a
	// later gVisor could hold.
	if err := unix.Mkfifo(filepath.Join(m.mountPath(id), "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadFile(ctx, id, "pipe", 100); errcode.Code(err) != errcode.BadPath {
		t.Errorf("ReadFile of a FIFO: %v; want bad_path", err)
	}
	files, _ = m.Files(ctx, id)
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if got := strings.Join(paths, " "); got != "data data/in data/in/table.csv notes.txt" {
		t.Errorf("Files = %s", got)
	}
	if err := m.RemoveFile(ctx, id, "data"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveFile(ctx, id, "data"); errcode.Code(err) != errcode.NotFound {
		t.Errorf("removing what is gone: %v; want not_found", err)
	}
	_, out, _ = runOK(t, m, id, "bash", "ls -A")
	if out != "notes.txt\npipe\n" {
		t.Errorf("after removing data: %q", out)
	}
}

// TestExitCodeAndStreams: the exit status and both streams come back, stdout as it is printed,
// whether the sandbox's agent or runsc exec starts the process.
func TestExitCodeAndStreams(t *testing.T) {
	bothWays(t, testExitCodeAndStreams)
}

func testExitCodeAndStreams(t *testing.T, viaExec bool) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	m.viaExec = viaExec
	id := testID("streams")
	res, out, errOut := func() (Result, string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var o output
		first := make(chan time.Time, 1)
		r := o.run(Run{Language: "python", Timeout: time.Minute,
			Code: "import sys, time\nprint('first')\ntime.sleep(2)\nprint('to stderr', file=sys.stderr)\nraise SystemExit(3)"})
		inner := r.Stdout
		r.Stdout = func(b []byte) {
			select {
			case first <- time.Now():
			default:
			}
			inner(b)
		}
		res, err := m.Run(ctx, id, r)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-first:
			if time.Since(at) < time.Second {
				t.Errorf("stdout came only at the end of the run")
			}
		default:
			t.Errorf("no stdout")
		}
		return res, o.stdout(), o.stderr()
	}()
	if res.ExitCode != 3 || res.Stopped != "" || out != "first\n" || errOut != "to stderr\n" {
		t.Errorf("run: %+v, stdout %q, stderr %q", res, out, errOut)
	}
	_, _, errOut = runOK(t, m, id, "python", "x = 1\n1/0\n")
	where := `File "<cell 2>", line 2` // the interpreter's second cell
	if viaExec {
		where = `File "<stdin>", line 2`
	}
	if !strings.Contains(errOut, where) || !strings.Contains(errOut, "ZeroDivisionError") {
		t.Errorf("a traceback: %q", errOut)
	}
	res, out, _ = runOK(t, m, id, "bash", "echo $HOME; exit 4")
	if res.ExitCode != 4 || out != "/work\n" {
		t.Errorf("bash: %+v, %q", res, out)
	}
	// A background process that keeps stdout open doesn't hold the run up (until its timeout).
	res, out, _ = runOK(t, m, id, "bash", "(sleep 300 &); echo back")
	if res.ExitCode != 0 || res.Stopped != "" || out != "back\n" {
		t.Errorf("a run leaving a process with its stdout: %+v, %q", res, out)
	}
}
