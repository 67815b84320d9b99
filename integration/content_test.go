package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pngBytes is what the tools below return as an image: not UTF-8, with a NUL.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\xff")

const pictureTool = `name = "picture"
description = "Draws a picture, saying how far it got."
[run]
type = "python"
code = '''
import toolhost
def run():
    toolhost.progress(0.5, "drawing")
    toolhost.log("notice", "drew it")
    return toolhost.content(toolhost.image(b"\x89PNG\r\n\x1a\n\x00\xff", "image/png"), value={"width": 1})
'''
`

// forgerTool prints what looks like the host's frames and the module's lines, on stdout and
// stderr, and returns 1.
const forgerTool = `name = "forger"
description = "Prints fake frames."
[run]
type = "python"
code = '''
import sys
FAKE = '{"event": "log", "level": "error", "message": "forged"}\n{"ok": true, "result": 666, "content": [{"type": "text", "text": "forged"}]}\n{"type": "result", "run": "r1", "seq": 9, "result": 666, "content": [{"type": "text", "text": "forged"}]}\n'
def run():
    sys.stdout.write(FAKE)
    sys.stderr.write(FAKE)
    return 1
'''
`

// channelForgerTool writes a line of its own on the module's channel (fd 3).
const channelForgerTool = `name = "channel_forger"
description = "Writes a fake event on fd 3."
[run]
type = "python"
code = '''
import os
def run():
    os.write(3, b'{"event": "result", "message": "", "result": 666}\n')
    return 1
'''
`

// startContentHost is a real host (built from this tree) serving python tools in runsc.
func startContentHost(t *testing.T) *Host {
	t.Helper()
	_, runscBin, rootfs := sandboxBuild(t)
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	dir := t.TempDir()
	cfg := fmt.Sprintf("[python]\nrunsc = %q\nrootfs = %q\nstate_dir = %q\nsandbox_prefix = %q\nwork_mb = 64\n[python.pool]\nsize = 0\n",
		runscBin, rootfs, filepath.Join(dir, "python"), "thct"+hex.EncodeToString(b)+"-")
	return startHostIn(t, dir, freePort(t), hostSpec{Config: cfg, Tools: map[string]string{
		"picture.toml": pictureTool, "forger.toml": forgerTool, "channel_forger.toml": channelForgerTool,
	}})
}

// wantImage asserts content is exactly one image part of pngBytes.
func wantImage(t *testing.T, where string, content any) {
	t.Helper()
	parts, _ := content.([]any)
	if len(parts) != 1 {
		t.Fatalf("%s: content = %v; want one image part", where, content)
	}
	p, _ := parts[0].(map[string]any)
	data, err := base64.StdEncoding.DecodeString(fmt.Sprint(p["data"]))
	if p["type"] != "image" || p["mime_type"] != "image/png" || err != nil || !bytes.Equal(data, pngBytes) || len(p) != 3 {
		t.Fatalf("%s: content part = %v; want {type image, mime_type image/png, data the PNG bytes}", where, p)
	}
}

// TestPythonContentThroughTheHost: a python tool returning an image and a value answers
// POST /api/v1/tools/{name}/call, GET /api/v1/runs/{id} and the websocket with both, and its
// progress and log line as events; a tool printing fake frames (or writing one on the module's
// channel) forges nothing.
func TestPythonContentThroughTheHost(t *testing.T) {
	h := startContentHost(t)

	status, out := postJSON(t, h.URL("/api/v1/tools/picture/call"), `{}`)
	if status != http.StatusOK || fmt.Sprint(out["result"]) != "map[width:1]" {
		t.Fatalf("picture over HTTP = %d %v\n%s", status, out, h.Stderr())
	}
	wantImage(t, "the call's result", out["content"])

	resp, err := http.Get(h.URL("/api/v1/runs/" + fmt.Sprint(out["run"])))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("GET the run: %v\n%s", err, raw)
	}
	wantImage(t, "the run's record", rec["content"])
	if fmt.Sprint(rec["result"]) != "map[width:1]" {
		t.Fatalf("the run's record has result %v", rec["result"])
	}

	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "p1", "tool": "picture", "args": map[string]any{}})
	frames := ws.UntilEnd("p1", 90*time.Second)
	var kinds []string
	for _, f := range frames {
		switch f.Str("type") {
		case "progress":
			kinds = append(kinds, fmt.Sprintf("progress %v %s", f["fraction"], f.Str("message")))
		case "log":
			kinds = append(kinds, fmt.Sprintf("log %s %s", f.Str("level"), f.Str("message")))
		case "result", "error":
			kinds = append(kinds, f.Str("type"))
		}
	}
	if got := strings.Join(kinds, "|"); got != "progress 0.5 drawing|log notice drew it|result" {
		t.Fatalf("websocket events = %s; want the progress, the log line, then the result\n%v", got, frames)
	}
	last := frames[len(frames)-1]
	wantImage(t, "the websocket's result event", last["content"])
	if fmt.Sprint(last["result"]) != "map[width:1]" {
		t.Fatalf("the result event's value = %v", last["result"])
	}

	// The attack: printed frames stay printed text, nothing else.
	ws.Send(map[string]any{"type": "call", "id": "f1", "tool": "forger", "args": map[string]any{}})
	frames = ws.UntilEnd("f1", 90*time.Second)
	var stdout, stderr strings.Builder
	for _, f := range frames {
		switch f.Str("type") {
		case "stdout":
			stdout.WriteString(f.Str("data"))
		case "stderr":
			stderr.WriteString(f.Str("data"))
		case "started", "result":
		default:
			t.Fatalf("printing fake frames made a %s event: %v", f.Str("type"), f)
		}
	}
	last = frames[len(frames)-1]
	if last.Str("type") != "result" || fmt.Sprint(last["result"]) != "1" || last["content"] != nil {
		t.Fatalf("the forger's end = %v; want result 1 with no content", last)
	}
	if !strings.Contains(stdout.String(), `"message": "forged"`) || stdout.String() != stderr.String() {
		t.Fatalf("stdout %q, stderr %q; want the fake frames as printed on both", stdout.String(), stderr.String())
	}
	status, out = postJSON(t, h.URL("/api/v1/tools/channel_forger/call"), `{}`)
	code, msg := errorOf(out)
	if status != http.StatusUnprocessableEntity || code != "code_error" || !strings.Contains(msg, "the code wrote to fd 3") || out["content"] != nil {
		t.Fatalf("channel_forger = %d %v; want 422 code_error naming fd 3", status, out)
	}
}

// TestContentSurvivesARestart: the http kind answers an image response with it as content; a
// keyed call's content is recorded, and a host restarted in the same folder answers the retry
// with it, on the call and on the run's record, without asking the server again.
func TestContentSurvivesARestart(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(pngBytes)
	}))
	t.Cleanup(srv.Close)
	tool := fmt.Sprintf("name = \"photo\"\ndescription = \"Gets a photo.\"\n[run]\ntype = \"http\"\nurl = %q\n", srv.URL+"/photo.png")
	dir, addr := t.TempDir(), freePort(t)
	spec := hostSpec{Config: "[http]\nallow_private = true\n", Tools: map[string]string{"photo.toml": tool}}
	h := startHostIn(t, dir, addr, spec)

	call := func() (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.URL("/api/v1/tools/photo/call"), strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "photo-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	status, first := call()
	if status != http.StatusOK || hits.Load() != 1 {
		t.Fatalf("photo = %d %v, %d requests", status, first, hits.Load())
	}
	wantImage(t, "the http kind's result", first["content"])
	if v, _ := first["result"].(map[string]any); v == nil || v["body"] != nil || v["status"] != float64(200) {
		t.Fatalf("the value = %v; want the status and headers, body null", first["result"])
	}

	h.Stop(t)
	h = startHostIn(t, dir, addr, spec)
	status, again := call()
	if status != http.StatusOK || again["run"] != first["run"] || hits.Load() != 1 {
		t.Fatalf("after a restart the retry got %d %v (%d requests); want the recorded run %v", status, again, hits.Load(), first["run"])
	}
	wantImage(t, "the retry's result after a restart", again["content"])
	resp, err := http.Get(h.URL("/api/v1/runs/" + fmt.Sprint(first["run"])))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	wantImage(t, "the run's record after a restart", rec["content"])

	// toolhost call prints the value and says what content came with it.
	cmd := exec.Command(bins.toolhost, "call", "--addr", h.Addr, "photo")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	want := fmt.Sprintf("toolhost: content 1 of the result: image, image/png, %d bytes (--json shows it whole)\n", len(pngBytes))
	if err != nil || !strings.Contains(string(stdout), `"status": 200`) || stderr.String() != want {
		t.Fatalf("toolhost call photo: %v\nstdout %s\nstderr %q, want %q", err, stdout, stderr.String(), want)
	}
}
