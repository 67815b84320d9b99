package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
)

func TestWordCountExample(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	data, err := os.ReadFile("../../examples/tools/word_count.toml")
	if err != nil {
		t.Fatal(err)
	}
	ct, err := config.ParseTool("word_count.toml", data)
	if err != nil {
		t.Fatal(err)
	}
	runJSON, _ := json.Marshal(ct.Run)
	tool := sdk.Tool{Name: ct.Name, Description: ct.Description, Effect: ct.Effect, Run: runJSON, Source: ct.Source}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Check(ctx, tool); err != nil {
		t.Fatalf("the example doesn't check: %v", err)
	}
	r := c.Invoke(ctx, tool, map[string]any{"text": "one two three"})
	wantResult(t, r, `{"words": 3}`)
	if len(r.Events) == 0 || string(r.Events[0].Stdout) != "counting\n" || r.Stdout() != "counting\n" {
		t.Errorf("events = %+v; want counting streamed before the result", r.Events)
	}
}

func TestCheckCompilesInASandbox(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name, code, want string
	}{
		{"syntax", "def run(:\n    pass\n", "run.code: the code doesn't compile: invalid syntax (line 1)"},
		{"syntax later", "def run():\n    return 1\nx = (\n", "run.code: the code doesn't compile: '(' was never closed (line 3)"},
		{"no run", "def walk():\n    return 1\n", "run.code: the code defines a function run(**args) that the tool calls"},
		{"run not top level", "def outer():\n    def run():\n        pass\n", "run.code: the code defines a function run(**args) that the tool calls"},
	}
	for _, tc := range cases {
		_, err := c.Check(ctx, pyTool(t, tc.code, nil))
		var fe sdk.FieldErrors
		if !errors.As(err, &fe) || err.Error() != tc.want {
			t.Errorf("%s: Check = %v; want %q", tc.name, err, tc.want)
		}
	}
	// The check never runs the code: a top-level loop forever still checks fine.
	got, err := c.Check(ctx, pyTool(t, "while True:\n    pass\ndef run():\n    return 1\n", map[string]any{"seconds": 5}))
	if err != nil {
		t.Fatalf("Check of good code = %v", err)
	}
	var table map[string]any
	_ = json.Unmarshal(got, &table)
	if table["seconds"] != float64(5) || table["memory_mb"] != float64(512) || table["network"] != false || table["type"] != "python" {
		t.Errorf("normalised run table = %s", got)
	}
	_, err = c.Check(ctx, pyTool(t, "def run():\n    pass\n", map[string]any{"seconds": 61, "memory_mb": 4096, "netwrk": true}))
	want := "run.memory_mb: is a whole number of MiB from 16 to 1024 ([python] max_memory_mb)\n" +
		"run.netwrk: is not a key of a python tool's run table (type, code, seconds, memory_mb, network)\n" +
		"run.seconds: is a whole number from 1 to 60"
	if err == nil || err.Error() != want {
		t.Errorf("Check of a bad table = %v; want %q", err, want)
	}
}

func TestResultsAndFailures(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	cases := []struct {
		name, code string
		args       any
		result     string
		errCode    string
		message    string
	}{
		{name: "args", code: "def run(a, b=2):\n    return {'sum': a + b, 'list': [None, True, 1.5]}\n", args: map[string]any{"a": 40},
			result: `{"sum": 42, "list": [null, true, 1.5]}`},
		{name: "exception", code: "def run():\n    return helper()\ndef helper():\n    return 1 / 0\n",
			errCode: "code_error", message: "the code failed: ZeroDivisionError: division by zero"},
		{name: "not json", code: "def run():\n    return {'when': object()}\n",
			errCode: "bad_result", message: "the code's result isn't JSON"},
		{name: "nan", code: "def run():\n    return float('nan')\n",
			errCode: "bad_result", message: "the code's result isn't JSON"},
		{name: "compile", code: "def run(:\n",
			errCode: "compile", message: "the code doesn't compile: invalid syntax (line 1)"},
		{name: "no run", code: "x = 1\n",
			errCode: "no_run", message: "the code defines a function run(**args) that the tool calls"},
		{name: "exit", code: "import os\ndef run():\n    os._exit(3)\n",
			errCode: "code_error", message: "the code failed: it exited (status 3) before returning a result"},
		{name: "timeout", code: "import time\ndef run():\n    time.sleep(60)\n", args: map[string]any{},
			errCode: "timeout", message: "the code ran longer than 1 seconds and was stopped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			extra := map[string]any{}
			if tc.name == "timeout" {
				extra["seconds"] = 1
			}
			r := invoke(t, c, tc.code, extra, tc.args)
			if tc.errCode == "" {
				wantResult(t, r, tc.result)
			} else {
				wantError(t, r, tc.errCode, tc.message)
			}
		})
	}
	t.Run("traceback streams to stderr", func(t *testing.T) {
		t.Parallel()
		r := invoke(t, c, "def run():\n    print('before')\n    raise ValueError('bad value')\n", nil, nil)
		wantError(t, r, "code_error", "the code failed: ValueError: bad value")
		if r.Stdout() != "before\n" || !strings.Contains(r.Stderr(), "Traceback") || !strings.Contains(r.Stderr(), `File "tool.py", line 3, in run`) {
			t.Errorf("stdout %q, stderr %q", r.Stdout(), r.Stderr())
		}
	})
}

func TestNoSecretsOrHostFiles(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	canaryDir := t.TempDir()
	canary := filepath.Join(canaryDir, "toolhost-canary.txt")
	if err := os.WriteFile(canary, []byte("canary-words-of-the-host"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `
import os
def run(canary):
    found = {}
    for path in [canary, "/proc/1/root" + canary, "/proc/self/root" + canary, "/../../.." + canary,
                 "/proc/1/cwd/../../.." + canary]:
        try:
            with open(path) as f:
                found[path] = f.read()
        except OSError as e:
            pass
    name = os.path.basename(canary)
    for top in ["/"]:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in ("/proc", "/sys")]
            if name in filenames:
                found[os.path.join(dirpath, name)] = "seen"
    environ = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                environ[pid] = open("/proc/%s/environ" % pid, "rb").read().decode(errors="replace")
            except OSError:
                pass
    return {"found": found, "env": dict(os.environ), "proc_environ": environ}
`
	// The walk of the sandbox's whole tree took over 20 s in a Debian VM under
	// QEMU's TCG; the tool's longest limit keeps the check from racing the clock.
	r := invoke(t, c, code, map[string]any{"seconds": 60}, map[string]any{"canary": canary})
	if r.Err != nil {
		t.Fatalf("%v %s", r.Err, r.Stderr())
	}
	var got struct {
		Found       map[string]string `json:"found"`
		Env         map[string]string `json:"env"`
		ProcEnviron map[string]string `json:"proc_environ"`
	}
	if err := json.Unmarshal(r.Result, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Found) > 0 {
		t.Errorf("the sandbox read the host's canary: %v", got.Found)
	}
	if strings.Contains(string(r.Result), testSecret) || strings.Contains(string(r.Result), "canary-words") {
		t.Errorf("the host's secret or canary is visible inside: %s", r.Result)
	}
	want := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/work"}
	if fmt.Sprint(got.Env) != fmt.Sprint(want) {
		t.Errorf("environment inside = %v; want only %v", got.Env, want)
	}
	if len(got.ProcEnviron) == 0 {
		t.Error("read no /proc/*/environ at all: the check proves nothing")
	}
}

func TestWritesOutsideWorkFail(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	code := `
import os
def run():
    out = {}
    for path in ["/work/ok.txt", "/tmp/ok.txt", "/etc/evil", "/usr/lib/evil", "/evil", "/root/evil", "/work/../etc/evil", "/proc/1/root/etc/evil"]:
        try:
            with open(path, "w") as f:
                f.write("x")
            out[path] = "written"
        except OSError as e:
            out[path] = type(e).__name__
    return out
`
	r := invoke(t, c, code, nil, nil)
	if r.Err != nil {
		t.Fatalf("%v %s", r.Err, r.Stderr())
	}
	var got map[string]string
	_ = json.Unmarshal(r.Result, &got)
	for path, what := range got {
		ok := path == "/work/ok.txt" || path == "/tmp/ok.txt"
		if ok != (what == "written") {
			t.Errorf("writing %s: %s", path, what)
		}
	}
	if len(got) != 8 {
		t.Errorf("result = %v", got)
	}
}

func TestSubprocessSeesOnlyTheSandbox(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	code := `
import subprocess
def run():
    p = subprocess.run(["/bin/sh", "-c", "echo hello from sh; hostname; ls /proc | grep '^[0-9]*$' | sort -n | tr '\\n' ' '; echo; ls /"],
                       capture_output=True, text=True)
    return {"rc": p.returncode, "out": p.stdout.splitlines()}
`
	r := invoke(t, c, code, nil, nil)
	if r.Err != nil {
		t.Fatalf("%v %s", r.Err, r.Stderr())
	}
	var got struct {
		RC  int      `json:"rc"`
		Out []string `json:"out"`
	}
	_ = json.Unmarshal(r.Result, &got)
	if got.RC != 0 || len(got.Out) < 4 || got.Out[0] != "hello from sh" || got.Out[1] != "sandbox" {
		t.Fatalf("subprocess output = %+v", got)
	}
	pids := strings.Fields(got.Out[2])
	if len(pids) > 8 {
		t.Errorf("the sandbox sees %d processes: %v", len(pids), pids)
	}
	for _, p := range pids {
		if len(p) > 2 {
			t.Errorf("the sandbox sees pid %s: a host process?", p)
		}
	}
	listing := strings.Join(got.Out[3:], " ")
	if !strings.Contains(listing, "work") || strings.Contains(listing, "toolhost-canary") {
		t.Errorf("ls / = %s", listing)
	}
	if _, err := os.Stat("/work/main"); err == nil && strings.Contains(listing, "main") {
		t.Errorf("the host's folders show inside: %s", listing)
	}
}

// TestNetworkOff: without network = true nothing outside the sandbox is reachable, not the host's
// loopback and not a server on the host side of a veth; the error says how to ask for network.
func TestNetworkOff(t *testing.T) {
	t.Parallel()
	c := conn(t, false)
	loop, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	loopAddr := serve(t, loop, "loopback server")
	l := newLab(t, randomLabNet())
	hostSide, err := net.Listen("tcp", l.hostIP.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	vethAddr := serve(t, hostSide, "host side of a veth")
	code := `
import urllib.request
def run(url):
    return urllib.request.urlopen(url, timeout=5).read().decode()
`
	for _, addr := range []string{loopAddr, vethAddr, l.nsIP.String() + ":80", "93.184.215.14:80"} {
		r := invoke(t, c, code, nil, map[string]any{"url": "http://" + addr + "/"})
		wantError(t, r, "network", "this tool has no network: say it needs it (network = true)")
	}
	r := invoke(t, c, "import socket\ndef run():\n    return socket.getaddrinfo('example.com', 80)[0][4][0]\n", nil, nil)
	wantError(t, r, "network", "this tool has no network: say it needs it (network = true)")
}

// TestNetworkOn: network = true reaches an address admitted by extra_allowed_cidrs (a server in a
// namespace of the test's own), and the host's own addresses and private ranges stay refused.
func TestNetworkOn(t *testing.T) {
	t.Parallel()
	open := conn(t, true)
	walled := conn(t, false)
	l := openLab(t)
	labAddr := l.serveInNS(t, "hello from the lab")
	hostSide, err := net.Listen("tcp", l.hostIP.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	hostAddr := serve(t, hostSide, "host side of a veth")
	code := `
import urllib.request
def run(url):
    return urllib.request.urlopen(url, timeout=5).read().decode()
`
	net := map[string]any{"network": true}
	wantResult(t, invoke(t, open, code, net, map[string]any{"url": "http://" + labAddr + "/"}), `"hello from the lab"`)

	refused := "the code tried to reach an address python tools may not reach (only public addresses, TCP ports 80 and 443): "
	r := invoke(t, walled, code, net, map[string]any{"url": "http://" + labAddr + "/"})
	if r.ErrorCode() != "network" || !strings.HasPrefix(fmt.Sprint(r.Err), refused) {
		t.Errorf("without extra_allowed_cidrs the lab server answered or failed otherwise: %s %v %s", r.ErrorCode(), r.Err, r.Result)
	}
	r = invoke(t, open, code, net, map[string]any{"url": "http://" + hostAddr + "/"})
	if r.ErrorCode() != "network" || !strings.HasPrefix(fmt.Sprint(r.Err), refused) {
		t.Errorf("the host's own address answered or failed otherwise: %s %v %s", r.ErrorCode(), r.Err, r.Result)
	}
}
