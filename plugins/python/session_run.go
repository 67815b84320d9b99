package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost/plugins/python/session"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// The tools of conversation sandboxes: a run table {"type": "python", "session": S} with S one
// of sessionTools' keys, the tools the kind declares in Describe (declaredSessionTools) and the
// host serves: run_python(code), run_bash(command), sandbox_files() and sandbox_file(path). They
// run in the sandbox of the call's session.

const (
	// shownChars is how much of a run's stdout (its head) and stderr (its tail) goes back in the
	// result; all of it streams as the run's output.
	shownChars = 10000
	// keptBytes is what is kept of each stream to show shownChars characters of it.
	keptBytes = shownChars * utf8.UTFMax
	// maxFileToModel is the largest file sandbox_file gives back.
	maxFileToModel = 1 << 20
	// maxListed is the most entries sandbox_files gives back.
	maxListed = 1000
)

// sessionTools are the values of run.session, with the argument each reads.
var sessionTools = map[string]string{"python": "code", "bash": "command", "files": "", "file": "path"}

// declaredSessionTools are the tools of conversation sandboxes as the kind declares them in
// Describe (sdk.Info.SessionTools): the host serves each, its run table {"type": "python",
// "session": Session}, when [sessions] is on.
func declaredSessionTools() []sdk.SessionTool {
	text := func(name, desc string) sdk.Param {
		return sdk.Param{Name: name, Type: "text", Required: true, Description: desc}
	}
	return []sdk.SessionTool{
		{Name: "run_python", Effect: "change", Session: "python",
			Description: "Run Python 3 code in this conversation's live interpreter, as a notebook cell: names defined in one run " +
				"(variables, functions, imports) are there in the next. The working folder is /work; files written there stay " +
				"for the next runs of the conversation, and files the user uploaded are there too. " +
				"Returns exit_code, stdout (its start), stderr (its end), value (the last expression's value, as a notebook shows it), " +
				"images (how many figures or images it showed: matplotlib's plt.show(), display(img), or a figure left open; each comes as an image), " +
				"and why the run was stopped if it was (timeout, memory, pids, disk). Past its time the code is interrupted (KeyboardInterrupt).",
			Params: []sdk.Param{text("code", "The Python code to run: statements, and a last expression whose value is shown."),
				{Name: "reset", Type: "bool", Description: "Start the interpreter afresh before this code runs: the names of earlier runs are gone, the files in /work stay."}}},
		{Name: "run_bash", Effect: "change", Session: "bash",
			Description: "Run a bash command in this conversation's sandbox, in /work, whose files stay for the next runs of the conversation. " +
				"Returns exit_code, stdout (its start) and stderr (its end), and why the run was stopped if it was.",
			Params: []sdk.Param{text("command", "The command line, run by bash -c.")}},
		{Name: "sandbox_files", Effect: "read", Session: "files",
			Description: "List the files in this conversation's sandbox (/work): each file's path, size and time of change."},
		{Name: "sandbox_file", Effect: "read", Session: "file",
			Description: "Read one file of this conversation's sandbox: text as it is, any other file as base64.",
			Params:      []sdk.Param{text("path", "The file's path relative to /work, e.g. \"results/table.csv\".")}},
	}
}

// sessionResult is what a run in a session gives back.
type sessionResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Stopped  string `json:"stopped"`
	Message  string `json:"message"`
	// Value is run_python's: repr() of the last expression's value (absent when the code ends in
	// a statement, or the value is None).
	Value string `json:"value,omitempty"`
	// Images is how many images run_python's code showed (figures, display()): each is an
	// image in the result's content, in the order shown.
	Images int `json:"images,omitempty"`
	// Resumed says the session's sandbox was restored from the checkpoint made when it stopped
	// (idle, or a restart): the interpreter's names are as they were.
	Resumed bool `json:"resumed,omitempty"`
}

// invokeSession runs a session tool in the call's session.
func (k *kind) invokeSession(ctx context.Context, call sdk.Call, table runTable, emit sdk.Emit) (json.RawMessage, error) {
	if call.Session == "" {
		return nil, sdk.Errorf(errcode.BadArgs, "%s needs a session: call it with \"session\" (the conversation's id)", call.Tool.Name)
	}
	var args map[string]json.RawMessage
	if len(call.Args) > 0 && string(call.Args) != "null" && json.Unmarshal(call.Args, &args) != nil {
		return nil, sdk.Errorf(errcode.BadArgs, "the arguments must be a JSON object")
	}
	var text string
	if name := sessionTools[table.Session]; name != "" {
		if json.Unmarshal(args[name], &text) != nil || text == "" {
			return nil, sdk.Errorf(errcode.BadArgs, "%s needs %q, a text", call.Tool.Name, name)
		}
	}
	m, conf, done, err := k.sessionManagerConf(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	switch table.Session {
	case "python", "bash":
		c, err := k.current()
		if err != nil {
			return nil, sdk.Errorf("not_configured", "%v", err)
		}
		var reset bool
		if raw, ok := args["reset"]; ok && table.Session == "python" && json.Unmarshal(raw, &reset) != nil {
			return nil, sdk.Errorf(errcode.BadArgs, "%s's \"reset\" must be true or false", call.Tool.Name)
		}
		return k.runInSession(ctx, m, call, session.Run{
			Language: table.Session, Code: text,
			Timeout:  time.Duration(conf.Seconds) * time.Second,
			Network:  session.Network(call.SessionNetwork),
			ProxyURL: call.SessionProxy,
			Owner:    call.Principal,
			Reset:    reset,
		}, c.cfg.MaxOutputBytes, emit)
	case "files":
		return listSessionFiles(ctx, m, call.Session)
	case "file":
		return readSessionFile(ctx, m, call.Session, text)
	}
	return nil, sdk.Errorf("bad_tool", "the tool's run table is wrong: run.session %q is not a session tool", table.Session)
}

// runInSession runs code in the session, streaming what it prints (up to maxOutput bytes: more
// stops it) and giving back stdout's head and stderr's tail.
func (k *kind) runInSession(ctx context.Context, m *session.Manager, call sdk.Call, r session.Run, maxOutput int64, emit sdk.Emit) (json.RawMessage, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &sessionOutput{limit: maxOutput, emit: emit, cut: cancel}
	r.Stdout = func(b []byte) { out.write(b, false) }
	r.Stderr = func(b []byte) { out.write(b, true) }
	r.Display = out.display
	res, err := m.Run(runCtx, call.Session, r)
	overflow := out.overflowed()
	switch {
	case err != nil && overflow && ctx.Err() == nil:
		res.Stopped = "output"
		res.Message = fmt.Sprintf("the code printed more than %s and was stopped; the session's files are kept", bytesText(maxOutput))
	case err != nil && errcode.Code(err) != "":
		return nil, err
	case err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled)):
		return nil, err // the run ends cancelled
	case err != nil:
		return nil, sdk.Errorf(errcode.Failed, "the session's sandbox couldn't run the code: %v", err)
	}
	if res.Stopped != "" {
		k.log.Info("a session run was stopped", "session", call.Session, "run", call.RunID, "stopped", res.Stopped)
	}
	return json.Marshal(sessionResult{
		ExitCode: res.ExitCode,
		Stdout:   out.stdoutShown(),
		Stderr:   out.stderrShown(),
		Stopped:  res.Stopped,
		Message:  res.Message,
		Value:    shownValue(res.Value),
		Images:   out.imageCount(),
		Resumed:  res.Resumed,
	})
}

// shownValue is what the result shows of a cell's value: its first shownChars characters.
func shownValue(v string) string {
	if utf8.RuneCountInString(v) <= shownChars {
		return v
	}
	r := []rune(v)
	return string(r[:shownChars]) + fmt.Sprintf("… (%d characters in all)", len(r))
}

// sessionOutput streams a run's output as events and keeps what the result shows: the head of
// stdout and the tail of stderr, with how many characters each had.
type sessionOutput struct {
	limit int64
	emit  sdk.Emit
	cut   func()

	mu                 sync.Mutex
	streamed           int64
	over               bool
	head, tail         []byte // stdout's first keptBytes, stderr's last
	outChars, errChars int    // characters of each, counted as runes start
	images             int    // the images shown
}

func (o *sessionOutput) write(b []byte, stderr bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if stderr {
		o.errChars += runeStarts(b)
		o.tail = append(o.tail, b...)
		if len(o.tail) > 2*keptBytes {
			o.tail = append(o.tail[:0], o.tail[len(o.tail)-keptBytes:]...)
		}
	} else {
		o.outChars += runeStarts(b)
		if room := keptBytes - len(o.head); room > 0 {
			o.head = append(o.head, b[:min(room, len(b))]...)
		}
	}
	if o.over {
		return
	}
	room := o.limit - o.streamed
	if int64(len(b)) > room {
		b = b[:room]
		o.over = true
	}
	o.streamed += int64(len(b))
	if len(b) > 0 {
		if stderr {
			o.emit.Stderr(b)
		} else {
			o.emit.Stdout(b)
		}
	}
	if o.over {
		o.cut()
	}
}

// display shows an image the code showed, in order with its output, and counts its bytes as
// output: an image past the limit stops the run as printing does.
func (o *sessionOutput) display(mimeType string, data []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.over {
		return
	}
	if int64(len(data)) > o.limit-o.streamed {
		o.over = true
		o.cut()
		return
	}
	o.streamed += int64(len(data))
	o.images++
	o.emit.Display(sdk.Content{Type: sdk.ContentImage, Data: data, MIMEType: mimeType})
}

func (o *sessionOutput) overflowed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.over
}

func (o *sessionOutput) imageCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.images
}

// stdoutShown is stdout's first shownChars characters, with a note when there were more.
func (o *sessionOutput) stdoutShown() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := []rune(strings.ToValidUTF8(string(o.head), "\uFFFD"))
	if o.outChars <= shownChars && len(s) <= shownChars {
		return string(s)
	}
	s = s[:min(len(s), shownChars)]
	return string(s) + fmt.Sprintf("\n[stdout was cut: its first %s characters of %s are shown]", countText(len(s)), countText(max(o.outChars, len(s))))
}

// stderrShown is stderr's last shownChars characters, with a note when there were more.
func (o *sessionOutput) stderrShown() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.tail
	if len(t) > keptBytes {
		t = t[len(t)-keptBytes:]
	}
	if o.errChars > shownChars {
		// The kept bytes may begin inside a character.
		for len(t) > 0 && !utf8.RuneStart(t[0]) {
			t = t[1:]
		}
	}
	s := []rune(strings.ToValidUTF8(string(t), "\uFFFD"))
	if o.errChars <= shownChars && len(s) <= shownChars {
		return string(s)
	}
	s = s[max(0, len(s)-shownChars):]
	return fmt.Sprintf("[stderr was cut: its last %s characters of %s are shown]\n", countText(len(s)), countText(max(o.errChars, len(s)))) + string(s)
}

// runeStarts counts the bytes of b that begin a character: its characters when b is UTF-8, and
// right across chunks that split one.
func runeStarts(b []byte) int {
	n := 0
	for _, c := range b {
		if utf8.RuneStart(c) {
			n++
		}
	}
	return n
}

// countText writes n with thousands separated: 50,000.
func countText(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// bytesText writes a size the way people say it: "1 MiB", "64 KiB", "100 bytes".
func bytesText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// listSessionFiles is sandbox_files: the workspace's files and folders.
func listSessionFiles(ctx context.Context, m *session.Manager, id string) (json.RawMessage, error) {
	files, err := m.Files(ctx, id)
	if err != nil && errcode.Code(err) != errcode.NotFound {
		return nil, err
	}
	type entry struct {
		Path     string `json:"path"`
		Size     int64  `json:"size"`
		Dir      bool   `json:"dir,omitempty"`
		Modified string `json:"modified"`
	}
	res := struct {
		Files []entry `json:"files"`
		Note  string  `json:"note,omitempty"`
	}{Files: []entry{}}
	for i, f := range files {
		if i == maxListed {
			res.Note = fmt.Sprintf("the workspace holds %s files and folders: the first %s are listed; list the rest with run_bash (find /work)", countText(len(files)), countText(maxListed))
			break
		}
		res.Files = append(res.Files, entry{Path: f.Path, Size: f.Size, Dir: f.Dir, Modified: f.ModTime.UTC().Format(time.RFC3339)})
	}
	return json.Marshal(res)
}

// readSessionFile is sandbox_file: one file as text when it is UTF-8, else in base64; a file
// over maxFileToModel is not given, with a note saying how to read a part of it.
func readSessionFile(ctx context.Context, m *session.Manager, id, path string) (json.RawMessage, error) {
	data, err := m.ReadFile(ctx, id, path, maxFileToModel)
	if errcode.Code(err) == errcode.TooLarge {
		return json.Marshal(map[string]string{"path": path,
			"note": fmt.Sprintf("%v: read a part of it with run_bash (head -c 100000 %q) or run_python", err, path)})
	}
	if err != nil {
		return nil, err
	}
	res := map[string]any{"path": path, "size": len(data)}
	if utf8.Valid(data) {
		res["encoding"], res["content"] = "utf-8", string(data)
	} else {
		res["encoding"], res["content"] = "base64", base64.StdEncoding.EncodeToString(data)
	}
	return json.Marshal(res)
}
