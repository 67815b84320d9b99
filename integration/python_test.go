package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
)

// pythonHost is a real toolhost (the harness's) serving python tools through the real python
// plugin, runsc and rootfs (built by make build sandbox), with a sandbox prefix of its own and a
// token of the editor role.
type pythonHost struct {
	*Host
	url, token, prefix, stateDir, runscBin string
}

func pythonRepo(t testing.TB) string {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// startPythonHost starts a host serving the tools in tools (file name → TOML) with the python
// kind.
func startPythonHost(t testing.TB, tools map[string]string) *pythonHost {
	t.Helper()
	return startPythonHostPool(t, tools, -1)
}

// startPythonHostPool is startPythonHost with [python.pool] size = poolSize (the config's
// default when negative). When the host has stopped, no sandbox of its prefix may be left.
func startPythonHostPool(t testing.TB, tools map[string]string, poolSize int) *pythonHost {
	t.Helper()
	_, runscBin, rootfs := sandboxBuild(t)
	dir := t.TempDir()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := &pythonHost{token: hex.EncodeToString(b), prefix: "thit" + hex.EncodeToString(b[:2]) + "-",
		stateDir: filepath.Join(dir, "python-state"), runscBin: runscBin}
	tokSum := sha256.Sum256([]byte(h.token))
	cfg := fmt.Sprintf(`[python]
runsc = %q
rootfs = %q
state_dir = %q
sandbox_prefix = %q
work_mb = 64

[[tokens]]
name = "integration"
sha256 = %q
role = "editor"
`, runscBin, rootfs, h.stateDir, h.prefix, hex.EncodeToString(tokSum[:]))
	if poolSize >= 0 {
		cfg += fmt.Sprintf("\n[python.pool]\nsize = %d\nmax = 16\n", poolSize)
	}
	// Registered before the host's own Stop, so it runs after it.
	t.Cleanup(func() { h.assertNothingLeft(t) })
	h.Host = startHostIn(t, dir, freePort(t), hostSpec{Config: cfg, Tools: tools})
	h.url = h.URL("")
	return h
}

// assertNothingLeft asserts that the stopped host left none of its sandboxes.
func (h *pythonHost) assertNothingLeft(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: h.runscBin, Root: filepath.Join(h.stateDir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	opts := sandbox.SweepOptions{Runtime: rt, Prefix: h.prefix, StateDir: h.stateDir}
	left, err := sandbox.Leftovers(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the stopped host left sandboxes behind: %v", left)
		_ = sandbox.Sweep(ctx, opts)
	}
}

// call is POST /api/v1/tools/{name}/call.
func (h *pythonHost) call(t testing.TB, tool string, args any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(args)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/api/v1/tools/"+tool+"/call", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s answered %d with %q", tool, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

const pythonForkBomb = `name = "fork_bomb"
description = "Starts processes until something stops it."
[run]
type = "python"
code = '''
import os
def run():
    while True:
        os.fork()
'''
`

// TestPythonToolsThroughTheHost: the example word_count through a real host, a fork bomb stopped
// with its own message while the host keeps serving, and nothing left once the host stops.
// It runs with the pool of ready sandboxes off and on (the config's default: 2 ready): the
// answers are the same.
func TestPythonToolsThroughTheHost(t *testing.T) {
	for _, pool := range []int{0, 2} {
		t.Run(fmt.Sprintf("pool size %d", pool), func(t *testing.T) { pythonToolsThroughTheHost(t, pool) })
	}
}

func pythonToolsThroughTheHost(t *testing.T, pool int) {
	wc, err := os.ReadFile(filepath.Join(pythonRepo(t), "examples/tools/word_count.toml"))
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{"word_count.toml": string(wc), "fork_bomb.toml": pythonForkBomb}
	var h *pythonHost
	if pool == 0 {
		h = startPythonHostPool(t, tools, 0)
	} else {
		h = startPythonHost(t, tools) // [python.pool] left out: size 2 by default
	}

	status, out := h.call(t, "word_count", map[string]any{"text": "one two three"})
	res, _ := json.Marshal(out["result"])
	if status != http.StatusOK || string(res) != `{"words":3}` || out["printed"] != "counting" {
		t.Fatalf("word_count = %d %v\n%s", status, out, h.Stderr())
	}
	status, out = h.call(t, "fork_bomb", map[string]any{})
	e, _ := out["error"].(map[string]any)
	if status != http.StatusUnprocessableEntity || e == nil || !strings.Contains(fmt.Sprint(e), "the code started more processes than its limit") {
		t.Fatalf("fork_bomb = %d %v", status, out)
	}
	status, out = h.call(t, "word_count", map[string]any{"text": "still serving"})
	res, _ = json.Marshal(out["result"])
	if status != http.StatusOK || string(res) != `{"words":2}` {
		t.Fatalf("word_count after the fork bomb = %d %v", status, out)
	}
	// The pool's state is on /metrics: its size ready (waiting, generously, for it to refill).
	want := fmt.Sprintf(`toolhost_kind_pool_ready{kind="python",shape="no_network"} %d`, pool)
	var metrics string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if metrics = string(b); strings.Contains(metrics, want+"\n") {
			break
		}
	}
	if !strings.Contains(metrics, want+"\n") || !strings.Contains(metrics, "toolhost_kind_pool_cold_starts_total{") {
		var lines []string
		for _, l := range strings.Split(metrics, "\n") {
			if strings.Contains(l, "pool_") {
				lines = append(lines, l)
			}
		}
		t.Errorf("/metrics lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
	h.Stop(t)
}
