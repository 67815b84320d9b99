package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// brokerIdle is longer than go-plugin's broker remembers an announcement
// nobody dialled (5 s): the host's HostService must answer after it.
const brokerIdle = 7 * time.Second

// nestedTools: say (echo kind) and nest (nested kind), which calls say
// through the host.
var nestedTools = map[string]string{
	"say.toml": `name = "say"
description = "Say a word."
[[params]]
name = "word"
kind = "text"
[run]
type = "echo"
`,
	"nest.toml": `name = "nest"
description = "Calls say through the host."
[run]
type = "nested"
tool = "say"
args = { word = "hello" }
`,
}

// callNested calls nest and checks the nested call went through: the
// result and the output are say's.
func callNested(t *testing.T, h *Host, phase string) {
	t.Helper()
	start := time.Now()
	code, body := postJSON(t, h.URL("/api/v1/tools/nest/call"), `{}`)
	t.Logf("%s: the nested call took %s", phase, time.Since(start).Round(time.Millisecond))
	res, _ := json.Marshal(body["result"])
	if code != 200 || string(res) != `{"echoed":{"word":"hello"}}` || body["printed"] != "word=hello" {
		t.Fatalf("%s: the nested call = %d %v\nhost log:\n%s", phase, code, body, h.Stderr())
	}
}

// TestNestedCallsAnswerWhenever: a tool that calls another tool through
// the host works at once, after the host sat idle, after its plugin was
// killed and restarted (its first call coming after the host sat idle),
// and after a reload.
func TestNestedCallsAnswerWhenever(t *testing.T) {
	h := startHost(t, hostSpec{Tools: nestedTools})
	callNested(t, h, "at once")

	time.Sleep(brokerIdle)
	callNested(t, h, "after the host sat idle")

	pid := childPID(h, "nested")
	if pid == 0 {
		t.Fatalf("no nested plugin process under the host")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The host restarts the plugin; wait until the new one is up.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if p := childPID(h, "nested"); p != 0 && p != pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nested plugin was not restarted:\n%s", h.Stderr())
		}
	}
	// The new process's first nested call comes after the broker forgot
	// the host's announcement to it.
	time.Sleep(brokerIdle)
	callNested(t, h, "after a kill -9 and the host sat idle")
	callNested(t, h, "after a kill -9, again")

	if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !h.WaitLog(t, "config reloaded", 20*time.Second) {
		t.Fatalf("the host did not reload after SIGHUP:\n%s", h.Stderr())
	}
	callNested(t, h, "after a reload")
	time.Sleep(brokerIdle)
	callNested(t, h, "after a reload and the host sat idle")
}

// childPID is the pid of the host's plugin process of a kind, or 0 while
// there is none.
func childPID(h *Host, kind string) int {
	want := "toolhost-plugin-" + kind
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid != h.cmd.Process.Pid {
			continue
		}
		// The host may run a sealed copy of the binary (/proc/PID/exe is
		// then /memfd:…), with the binary's path as argv[0].
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if filepath.Base(string(argv0)) == want || filepath.Base(exe) == want {
			return pid
		}
	}
	return 0
}
