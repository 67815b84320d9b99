package integration

import (
	"encoding/json"
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

	pid := pluginPIDOf(h.cmd.Process.Pid, "nested")
	if pid == 0 {
		t.Fatalf("no nested plugin process under the host")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The host restarts the plugin; wait until the new one is up.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if p := pluginPIDOf(h.cmd.Process.Pid, "nested"); p != 0 && p != pid {
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
