package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
)

// sessionHost is a host serving conversation sandboxes with the real python
// plugin and runsc, in a folder that a restarted host takes over.
type sessionHost struct {
	*Host
	dir, addr  string
	prefix     string
	runscState string
	rt         *runsc.Runtime
	spec       hostSpec
}

func sessionSpec(t *testing.T, dir, prefix string) hostSpec {
	_, runscBin, rootfs := sandboxBuild(t)
	return hostSpec{Config: fmt.Sprintf(`
[python]
runsc = %q
rootfs = %q
session_rootfs = %q
state_dir = %q
sessions_dir = %q
sandbox_prefix = %q
[python.pool]
size = 0

[sessions]
enabled = true
disk_mb = 16
idle_minutes = 1
seconds = 30
`, runscBin, rootfs, sessionRootfs(t, rootfs), filepath.Join(dir, "runsc-state"), filepath.Join(dir, "sessions"), prefix)}
}

func startSessionHost(t *testing.T) *sessionHost {
	t.Helper()
	_, runscBin, _ := sandboxBuild(t)
	dir, err := os.MkdirTemp("", "thsess")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prefix := fmt.Sprintf("thse%d-", os.Getpid()%10000)
	s := &sessionHost{dir: dir, addr: freePort(t), prefix: prefix, runscState: filepath.Join(dir, "runsc-state"), spec: sessionSpec(t, dir, prefix)}
	s.rt, err = runsc.NewRuntime(runsc.RuntimeOptions{Binary: runscBin, Root: filepath.Join(s.runscState, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	s.Host = startHostIn(t, dir, s.addr, s.spec)
	t.Cleanup(func() {
		s.Stop(t)
		if left := s.leftovers(t); len(left) > 0 {
			t.Errorf("the stopped host left behind: %v", left)
		}
	})
	return s
}

// restart starts the host again in the same folder.
func (s *sessionHost) restart(t *testing.T) {
	t.Helper()
	s.Host = startHostIn(t, s.dir, s.addr, s.spec)
}

// leftovers are the sandboxes of the host's prefix runsc still lists and
// the mounts and loop devices of its workspaces.
func (s *sessionHost) leftovers(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	states, err := s.rt.List(ctx)
	if err != nil {
		t.Fatalf("runsc list: %v", err)
	}
	for _, st := range states {
		if strings.HasPrefix(st.ID, s.prefix) && !readySandbox(st) {
			out = append(out, "sandbox "+st.ID+" "+st.Status)
		}
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, s.dir) && !strings.Contains(l, "/ready-") {
			out = append(out, "mount "+l)
		}
	}
	loops, _ := exec.Command("losetup", "-a").Output()
	for _, l := range strings.Split(string(loops), "\n") {
		if strings.Contains(l, s.dir) && !strings.Contains(l, "/ready-") {
			out = append(out, "loop "+l)
		}
	}
	return out
}

// readySandbox says whether st is a sandbox the python kind keeps ready for a new session
// ([python.pool] ready_sessions): its /work is a ready sandbox's mount point, which is still
// there (handed to a session, its disk is mounted at the session's mount point instead, and the
// ready one removed).
// Such a sandbox belongs to no session, and a session's leftovers leave it out.
func readySandbox(st runsc.State) bool {
	b, err := os.ReadFile(filepath.Join(st.Bundle, "config.json"))
	if err != nil {
		return false
	}
	var spec struct {
		Mounts []struct {
			Destination, Source string
		} `json:"mounts"`
	}
	if json.Unmarshal(b, &spec) != nil {
		return false
	}
	for _, m := range spec.Mounts {
		if m.Destination == "/work" && strings.HasPrefix(filepath.Base(m.Source), "ready-") {
			_, err := os.Stat(m.Source)
			return err == nil
		}
	}
	return false
}

// run calls a session tool over HTTP and returns the run's result.
func (s *sessionHost) run(t *testing.T, session, tool, field, text string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]string{field: text})
	code, out := postJSON(t, s.URL("/api/v1/tools/"+tool+"/call?session="+session), string(body))
	res, _ := out["result"].(map[string]any)
	if code != http.StatusOK || res == nil {
		t.Fatalf("%s in %s = %d %v\nhost log:\n%s", tool, session, code, out, s.Stderr())
	}
	return res
}

func (s *sessionHost) python(t *testing.T, session, code string) map[string]any {
	return s.run(t, session, "run_python", "code", code)
}

func (s *sessionHost) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(s.URL(path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestSessionFilesLastAcrossRunsIdleStopsAndACrash: a file written by one
// run is there for the next, after the sandbox stopped for idleness, and
// after the host was killed mid-run and started again; the crash leaves no
// sandbox, mount or loop device behind once the new host has reconciled.
// The interpreter's names last across the idle stop and a graceful restart
// (checkpoints), not across the crash.
func TestSessionFilesLastAcrossRunsIdleStopsAndACrash(t *testing.T) {
	s := startSessionHost(t)
	if res := s.python(t, "conv-1", "open('notes.txt','w').write('kept')\nprint('written')"); res["exit_code"] != float64(0) || !strings.Contains(fmt.Sprint(res["stdout"]), "written") {
		t.Fatalf("the first run: %v", res)
	}
	if res := s.run(t, "conv-1", "run_bash", "command", "cat notes.txt"); res["stdout"] != "kept" {
		t.Fatalf("the second run read %v", res)
	}
	// run_python's cells share one interpreter: a name lasts, and the last expression's value
	// comes back as value.
	s.python(t, "conv-1", "answer = 6 * 7")
	if res := s.python(t, "conv-1", "answer, len(open('notes.txt').read())"); res["value"] != "(42, 4)" || res["exit_code"] != float64(0) {
		t.Fatalf("a cell using the name of the one before: %v; want value (42, 4)", res)
	}
	if code, b := s.get(t, "/api/v1/sessions/conv-1/files/notes.txt"); code != 200 || string(b) != "kept" {
		t.Fatalf("GET the file: %d %q", code, b)
	}

	if !testing.Short() {
		// Idle longer than idle_minutes: the sandbox stops, the files stay. What may be left is
		// one sandbox prepared for the resume: created, nothing running in it.
		deadline := time.Now().Add(3 * time.Minute)
		for running := s.leftoversOfKind(t, "sandbox"); len(running) > 0; running = s.leftoversOfKind(t, "sandbox") {
			if len(running) == 1 && strings.HasSuffix(running[0], " created") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the idle session's sandbox is still up after 3 minutes: %v", s.leftovers(t))
			}
			time.Sleep(5 * time.Second)
		}
		// The idle stop checkpointed the sandbox: the next run resumes it, names and all.
		res := s.python(t, "conv-1", "print(open('notes.txt').read())\nanswer")
		if strings.TrimSpace(fmt.Sprint(res["stdout"])) != "kept" || res["value"] != "42" || res["resumed"] != true || res["message"] != "" {
			t.Fatalf("after the idle stop: %v; want the file, the interpreter's names, and resumed", res)
		}
	}

	// A restart of the host (SIGTERM) checkpoints the sandbox too; the new host resumes it.
	s.python(t, "conv-1", "answer += 1")
	s.Stop(t)
	s.restart(t)
	if res := s.python(t, "conv-1", "answer"); res["value"] != "43" || res["resumed"] != true {
		t.Fatalf("after a restart of the host: %v; want the interpreter's names back, and resumed", res)
	}

	// Killed mid-run.
	ws := s.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "c1", "tool": "run_python", "session": "conv-1",
		"args": map[string]any{"code": "import time\nopen('during.txt','w').write('x')\nprint('going', flush=True)\ntime.sleep(60)"}})
	for {
		f := ws.Read(time.Minute)
		if f.Str("type") == "stdout" && strings.Contains(f.Str("data"), "going") {
			break
		}
		if f.Str("type") == "result" || f.Str("type") == "error" {
			t.Fatalf("the long run ended early: %v", f)
		}
	}
	// The sandbox kept ready for a new session ([python.pool] ready_sessions) dies with the
	// host; the restart's reconcile removes its disk and mount.
	readyBefore, _ := filepath.Glob(filepath.Join(s.dir, "sessions", "ready-*.img"))
	if len(readyBefore) != 1 {
		t.Errorf("the ready sandboxes' disks before the crash: %v; want one", readyBefore)
	}
	s.killHard(t)
	s.restart(t)
	if left := s.leftovers(t); len(left) > 0 {
		t.Errorf("after the crash and a restart, left behind: %v", left)
	}
	for _, img := range readyBefore {
		name := strings.TrimSuffix(filepath.Base(img), ".img")
		for _, p := range []string{img, filepath.Join(s.dir, "sessions", "mnt", name)} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("after the crash and a restart, the killed host's ready sandbox left %s", p)
			}
		}
		if mounts, _ := os.ReadFile("/proc/mounts"); strings.Contains(string(mounts), name) {
			t.Errorf("after the crash and a restart, the killed host's ready sandbox's disk is still mounted")
		}
	}
	if res := s.run(t, "conv-1", "run_bash", "command", "cat notes.txt during.txt"); res["stdout"] != "keptx" {
		t.Fatalf("the files after the crash: %v", res)
	}
	var runs struct{ Runs []map[string]any }
	code, b := s.get(t, "/api/v1/runs?session=conv-1")
	if err := json.Unmarshal(b, &runs); err != nil || code != 200 || len(runs.Runs) < 4 {
		t.Errorf("the ledger after the restart: %d %s", code, b)
	}
}

func (s *sessionHost) leftoversOfKind(t *testing.T, kind string) []string {
	var out []string
	for _, l := range s.leftovers(t) {
		if strings.HasPrefix(l, kind+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestSessionsAreApart: one conversation can't see another's files, from
// inside by any path it tries, nor through the API.
func TestSessionsAreApart(t *testing.T) {
	s := startSessionHost(t)
	s.python(t, "alpha", "open('secret-alpha.txt','w').write('alpha only')")
	res := s.run(t, "beta", "run_bash", "command",
		"ls -a /work ..; cat /work/../*/secret-alpha.txt; grep -rl 'alpha only' / 2>/dev/null | head; ls /proc/*/root/ 2>&1 | head -3; echo done")
	out := fmt.Sprint(res["stdout"])
	if strings.Contains(out, "secret-alpha") || strings.Contains(out, "alpha only") || !strings.Contains(out, "done") {
		t.Fatalf("beta saw alpha's file: %v", res)
	}
	for _, path := range []string{"../alpha/secret-alpha.txt", "..%2falpha%2fsecret-alpha.txt", "%2Fwork%2Fsecret-alpha.txt", "secret-alpha.txt"} {
		if code, b := s.get(t, "/api/v1/sessions/beta/files/"+path); code == 200 || strings.Contains(string(b), "alpha only") {
			t.Errorf("GET beta's %s: %d %s", path, code, b)
		}
	}
	// A link planted in beta pointing at alpha's image is not followed.
	s.run(t, "beta", "run_bash", "command", "ln -s / root; ln -s /proc/1/root/ p1")
	for _, path := range []string{"root/etc/passwd", "p1/etc/passwd"} {
		if code, b := s.get(t, "/api/v1/sessions/beta/files/"+path); code == 200 {
			t.Errorf("GET beta's %s through a link: %d %s", path, code, b)
		}
	}
}

// TestSessionDiskCapAndDelete: a writer past disk_mb is stopped with its
// own message while the host serves on and the session goes on; deleting
// the session removes its sandbox and files at once.
func TestSessionDiskCapAndDelete(t *testing.T) {
	s := startSessionHost(t)
	res := s.python(t, "big", "f = open('fill.bin','wb')\nfor i in range(64):\n    f.write(b'x' * (1 << 20))\n    f.flush()\nprint('never')")
	if res["stopped"] != "disk" || !strings.Contains(strings.ToLower(fmt.Sprint(res["message"])), "disk") {
		t.Fatalf("the writer past the cap: %v", res)
	}
	if code, _ := s.get(t, "/healthz"); code != 200 {
		t.Fatalf("/healthz after the disk filled: %d", code)
	}
	if res := s.python(t, "big", "import os\nos.remove('fill.bin')\nprint('room again')"); !strings.Contains(fmt.Sprint(res["stdout"]), "room again") {
		t.Fatalf("the session after its disk filled: %v", res)
	}
	req, _ := http.NewRequest(http.MethodDelete, s.URL("/api/v1/sessions/big"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE the session: %d", resp.StatusCode)
	}
	if code, _ := s.get(t, "/api/v1/sessions/big/files"); code != http.StatusNotFound {
		t.Errorf("the deleted session's files: %d", code)
	}
	if left := s.leftovers(t); len(left) > 0 {
		t.Errorf("the deleted session left: %v", left)
	}
	images, _ := filepath.Glob(filepath.Join(s.dir, "sessions", "s*.img")) // not the ready sandboxes' (ready-*.img)
	if len(images) > 0 {
		t.Errorf("the deleted session's image is still there: %v", images)
	}
}
