package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The operator flow: what an operator does with the Debian package on a booted machine with
// systemd, and what they must see. It is written against machine alone, so the same steps run in
// the systemd-nspawn container (systemd_test.go) and in the QEMU VMs: every wait is scaled by the
// machine's slowdown, and every fact is read with a command or a read in the machine.

// The network the flow makes inside the machine for the network step: a network namespace with
// a web server at the end of a veth pair, in the benchmarking range (RFC 2544), which python
// tools may not reach unless [python] extra_allowed_cidrs admits it.
const (
	fixtureNetns  = "thnet"
	fixtureNet    = "198.18.0.0/30"
	fixtureHostIP = "198.18.0.1" // the machine's end, thnet-out
	fixtureSrvIP  = "198.18.0.2" // the namespace's end, thnet-in, where the server listens
	fixturePort   = 8000
)

// flowWorkMB is the /work cap ([python] work_mb) the flow sets: small, so that filling it is quick
// on a slow machine too.
const flowWorkMB = 32

// holdMB is what slow_hold keeps in memory while it sleeps: far above a ready sandbox's use
// (about 25 MiB), so that a run's cgroup is told from the pool's by its memory.
const holdMB = 64

// limitCase is a python tool that one limit stops, and the error `toolhost call` prints then.
type limitCase struct {
	tool, body string
	run        map[string]any
	code, msg  string
}

// flowLimits are a tool for every limit of a python tool.
func flowLimits() []limitCase {
	return []limitCase{
		{"hog_memory", "hog = []\n    while True:\n        hog.append(b'x' * (16 << 20))", map[string]any{"memory_mb": 64},
			"memory", "the code used more memory than its limit (64 MiB)"},
		{"fork_bomb", "import os\n    while True:\n        os.fork()", nil,
			"processes", "the code started more processes than its limit"},
		{"spin_cpu", "while True:\n        pass", map[string]any{"seconds": 1},
			"cpu", "the code used more CPU time than its limit"},
		{"sleep_long", "import time\n    time.sleep(30)", map[string]any{"seconds": 2},
			"timeout", "the code ran longer than 2 seconds and was stopped"},
		{"fill_work", "with open('/work/big', 'wb') as f:\n        for _ in range(1024):\n            f.write(b'\\0' * (1 << 20))", nil,
			"disk", fmt.Sprintf("the code wrote more than its disk limit (%d MiB)", flowWorkMB)},
		{"flood_output", "import sys\n    for _ in range(100):\n        sys.stdout.write('x' * (1 << 20))", nil,
			"output_cut", "the code printed more than its output limit (1 MiB) and was stopped; what it printed is cut there"},
	}
}

// operatorFlow installs the package at deb (its path in m) on the booted machine m, configures
// it with the sandbox prefix prefix, and drives systemd as an operator would: start, check and
// doctor, every limit of a python tool, the network, reload, refused reloads, a restart, the
// watchdog, the sandboxes' cgroups, a crash, stop. Commands and what they printed go to m's
// transcript.
func operatorFlow(t *testing.T, m machine, deb, prefix string) {
	flowStart := time.Now()
	defer func() {
		if t.Failed() {
			m.note("the host's journal, at the end of a flow that failed", m.quiet("journalctl", "-u", "toolhost", "--no-pager", "-n", "300", "-o", "short-precise"), nil)
		}
		m.note(fmt.Sprintf("the operator flow on %s took %.1f s", m.name(), time.Since(flowStart).Seconds()), "", nil)
	}()

	// Install: dpkg creates the paths and the conffile, enables and starts nothing.
	m.must("dpkg", "-i", deb)
	if out, _ := m.run("systemctl", "is-enabled", "toolhost"); strings.TrimSpace(out) != "disabled" {
		t.Errorf("after dpkg -i the unit is %q, want disabled: the package enables nothing by itself", out)
	}
	if out, _ := m.run("systemctl", "is-active", "toolhost"); strings.TrimSpace(out) != "inactive" {
		t.Errorf("after dpkg -i the unit is %q, want inactive", out)
	}
	if out := m.must("dpkg-query", "-W", "-f=${Conffiles}", "toolhost"); !strings.Contains(out, "/etc/toolhost/toolhost.toml") {
		t.Errorf("the config is not a conffile: %q", out)
	}
	installed := []string{"/usr/bin/toolhost", "/usr/lib/toolhost/plugins", "/usr/lib/toolhost/pins.toml", "/usr/lib/toolhost/runsc",
		"/usr/lib/toolhost/plugins/toolhost-plugin-python", "/usr/lib/toolhost/plugins/toolhost-plugin-http", "/etc/toolhost/tools"}
	statOut, statErr := m.run(append([]string{"stat", "-L", "-c", "%u %a %n"}, installed...)...)
	made := map[string]bool{}
	for _, line := range strings.Split(statOut, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || !slices.Contains(installed, f[2]) {
			continue
		}
		made[f[2]] = true
		if perm, err := strconv.ParseUint(f[1], 8, 32); err != nil || f[0] != "0" || perm&0o022 != 0 {
			t.Errorf("%s is owned by %s with mode %s: want root's, writable by nobody else", f[2], f[0], f[1])
		}
	}
	for _, p := range installed {
		if !made[p] {
			t.Errorf("the package did not make %s: %v\n%s", p, statErr, statOut)
		}
	}
	// The installed rootfs builder, through `toolhost rootfs`: the rootfs and the session rootfs
	// in place are the ones the installed config asks for, so both are up to date.
	if out := m.must("toolhost", "rootfs"); strings.Count(out, "is up to date") != 2 ||
		!strings.Contains(out, "/var/lib/toolhost/rootfs-sessions is up to date") {
		t.Errorf("toolhost rootfs: %s", out)
	}

	// Configure: an http tool against a server in the machine, python tools (one for every
	// limit, and two for the network), the test's network admitted, a small /work, and a
	// shorter watchdog than the unit's 30 s so the test can see it act.
	edit(t, m, "/etc/toolhost/toolhost.toml", func(s string) string {
		s = replaceFirst(t, s, "allow_private = false", "allow_private = true")
		s = replaceFirst(t, s, "[sessions]\n# enabled: serve the session tools and the /api/v1/sessions endpoints. Read at\n# start only. Default: false.\nenabled = false",
			"[sessions]\nenabled = true")
		s = replaceFirst(t, s, `sandbox_prefix = "toolhost-"`, fmt.Sprintf("sandbox_prefix = %q", prefix))
		s = replaceFirst(t, s, "\nextra_allowed_cidrs = []\n", fmt.Sprintf("\nextra_allowed_cidrs = [%q]\n", fixtureNet))
		return replaceFirst(t, s, "\nwork_mb = 256\n", fmt.Sprintf("\nwork_mb = %d\n", flowWorkMB))
	})
	m.write("/srv/hello.json", `{"greeting": "hello from the machine"}`)
	m.must("systemd-run", "--unit=fixture-web", "--property=WorkingDirectory=/srv", "python3", "-m", "http.server", "9999", "--bind", "127.0.0.1")
	for _, args := range [][]string{
		{"ip", "netns", "add", fixtureNetns},
		{"ip", "link", "add", "thnet-out", "type", "veth", "peer", "name", "thnet-in", "netns", fixtureNetns},
		{"ip", "addr", "add", fixtureHostIP + "/30", "dev", "thnet-out"},
		{"ip", "link", "set", "thnet-out", "up"},
		{"ip", "-n", fixtureNetns, "addr", "add", fixtureSrvIP + "/30", "dev", "thnet-in"},
		{"ip", "-n", fixtureNetns, "link", "set", "thnet-in", "up"},
		{"ip", "-n", fixtureNetns, "link", "set", "lo", "up"},
		{"ip", "-n", fixtureNetns, "route", "add", "default", "via", fixtureHostIP},
	} {
		m.must(args...)
	}
	m.must("systemd-run", "--unit=fixture-net", "--property=WorkingDirectory=/srv",
		"ip", "netns", "exec", fixtureNetns, "python3", "-m", "http.server", strconv.Itoa(fixturePort), "--bind", fixtureSrvIP)
	tools := map[string]string{
		"hello":      httpTool("hello"),
		"word_count": pythonTool("word_count", "print('counting')\n    return {'words': len(text.split())}", nil),
		"slow_net":   pythonTool("slow_net", "print('waiting', flush=True)\n    import time; time.sleep(55)", map[string]any{"network": true}),
		"slow_hold": pythonTool("slow_hold", fmt.Sprintf("import time\n    held = b'x' * (%d << 20)\n    print('holding', flush=True)\n    time.sleep(%d)\n    return len(held)",
			holdMB, int(min(scaled(m, 8*time.Second), 40*time.Second)/time.Second)), nil),
		"net_fetch":  pythonTool("net_fetch", netFetch, map[string]any{"network": true}),
		"net_denied": pythonTool("net_denied", netFetch, map[string]any{"network": false}),
	}
	for _, l := range flowLimits() {
		tools[l.tool] = pythonTool(l.tool, l.body, l.run)
	}
	for name, tool := range tools {
		m.write("/etc/toolhost/tools/"+name+".toml", tool)
	}
	m.write("/etc/systemd/system/toolhost.service.d/test-watchdog.conf", fmt.Sprintf("[Service]\nWatchdogSec=%d\n", int(scaled(m, 5*time.Second)/time.Second)))
	m.must("systemctl", "daemon-reload")

	// Start returns only once the host serves (Type=notify): the first request after it, with
	// no retry, must be answered.
	m.must("systemctl", "start", "toolhost")
	if out := m.must("toolhost", "tools"); !strings.Contains(out, "hello") || !strings.Contains(out, "word_count") {
		t.Fatalf("right after systemctl start, the host does not list the tools:\n%s", out)
	}
	if out := m.must("toolhost", "call", "word_count", "text=one two three"); !hasWords(out, 3) {
		t.Errorf("the python tool in gVisor on %s: %s", m.name(), out)
	}
	if out := m.must("toolhost", "call", "hello", "name=hello"); !strings.Contains(out, "hello from the machine") {
		t.Errorf("the http tool: %s", out)
	}

	// check and doctor beside the live host: they say the installed machine is fine and leave
	// the host serving.
	if out := m.must("toolhost", "check"); !strings.Contains(out, "/etc/toolhost/toolhost.toml: ok") {
		t.Errorf("toolhost check of the installed config: %s", out)
	}
	if out := m.must("toolhost", "doctor"); !strings.Contains(out, "this machine can run python tools") {
		t.Errorf("toolhost doctor on %s: %s", m.name(), out)
	}
	if out := m.must("toolhost", "call", "word_count", "text=still here"); !hasWords(out, 2) {
		t.Errorf("after check and doctor beside it, the host: %s", out)
	}

	// Every limit stops its run with an error that names it, and the host serves the next call.
	for _, l := range flowLimits() {
		want := fmt.Sprintf("toolhost: %s (%s)", l.msg, l.code)
		if l.code == "cpu" {
			// The code must get its second of CPU within the wall-clock limit, one second more:
			// not while the pool starts the sandboxes that replace the last runs'.
			waitPoolQuiet(m)
		}
		if l.tool == "flood_output" {
			// What it prints is counted, not copied into the transcript.
			out, _ := m.run("sh", "-c", `{ toolhost call flood_output; echo "toolhost call: exit status $?" >&2; } | wc -c`)
			if !strings.Contains(out, want) || !strings.Contains(out, "toolhost call: exit status 1") {
				t.Errorf("%s: want %q and exit status 1, got:\n%s", l.tool, want, out)
			}
			if n := countLine(out); n != 1<<20 {
				t.Errorf("%s printed %d bytes through toolhost call, want exactly its cap, %d:\n%s", l.tool, n, 1<<20, out)
			}
		} else {
			out, err := m.run("toolhost", "call", l.tool)
			for try := 2; l.code == "cpu" && try <= 3 && strings.Contains(out, "(timeout)"); try++ {
				// Its second of CPU didn't come within two on the clock: the machine (the other
				// VM, the host's other work) was busy. The timeout is right then, but not this case.
				t.Logf("%s on %s ended on the clock, try %d of 3: %s", l.tool, m.name(), try, out)
				waitPoolQuiet(m)
				out, err = m.run("toolhost", "call", l.tool)
			}
			if !exitedWith(err, 1) || !strings.Contains(out, want) {
				t.Errorf("%s: want %q and exit status 1, got %v:\n%s", l.tool, want, err, out)
			}
		}
		if out := m.must("toolhost", "call", "word_count", "text=after "+l.tool); !hasWords(out, 2) {
			t.Errorf("after %s the host does not serve the next call: %s", l.tool, out)
		}
	}

	// The network: a tool with network = true reaches the server in the test's namespace, which
	// extra_allowed_cidrs admits; the same code without network fails saying so.
	fetchable := fmt.Sprintf("import urllib.request; urllib.request.urlopen('http://%s:%d/hello.json', timeout=5).read()", fixtureSrvIP, fixturePort)
	for deadline := time.Now().Add(scaled(m, 30*time.Second)); !succeeds(m, scaled(m, 10*time.Second), "python3", "-c", fetchable); {
		if time.Now().After(deadline) {
			t.Fatalf("the test's server in the network namespace %s does not answer: %s", fixtureNetns,
				m.quiet("journalctl", "-u", "fixture-net", "--no-pager", "-n", "20"))
		}
		time.Sleep(scaled(m, 200*time.Millisecond))
	}
	if out, err := m.run("toolhost", "call", "net_fetch"); err != nil || !strings.Contains(out, "hello from the machine") {
		t.Errorf("a tool with network = true did not reach %s:%d (admitted by extra_allowed_cidrs): %v:\n%s", fixtureSrvIP, fixturePort, err, out)
	}
	if out, err := m.run("toolhost", "call", "net_denied"); !exitedWith(err, 1) || !strings.Contains(out, "toolhost: this tool has no network: say it needs it (network = true) (network)") {
		t.Errorf("a tool with network = false reaching %s:%d: want the error naming the network, got %v:\n%s", fixtureSrvIP, fixturePort, err, out)
	}

	// Reload applies a changed tool, and returns once it is served.
	m.write("/etc/toolhost/tools/hello_again.toml", httpTool("hello_again"))
	m.must("systemctl", "reload", "toolhost")
	if out := m.must("toolhost", "tools"); !strings.Contains(out, "hello_again") {
		t.Errorf("right after systemctl reload, the new tool is not listed:\n%s", out)
	}

	// Broken configs: a TOML mistake (seen before the host is asked) and a value only the http
	// kind refuses (seen by the host). Each time reload fails, the host serves on with the
	// config before, and the journal says where the problem is.
	good, err := m.read("/etc/toolhost/toolhost.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, broken := range []struct{ name, config, where string }{
		{"a TOML mistake", good + "\nlisten = \n", "/etc/toolhost/toolhost.toml:"},
		{"a value the http kind refuses", replaceFirst(t, good, "timeout_seconds = 30", "timeout_seconds = 0"), "http.timeout_seconds"},
	} {
		m.write("/etc/toolhost/toolhost.toml", broken.config)
		if out, err := m.run("systemctl", "reload", "toolhost"); err == nil {
			t.Errorf("systemctl reload of %s succeeded:\n%s", broken.name, out)
		}
		if out, _ := m.run("systemctl", "is-active", "toolhost"); strings.TrimSpace(out) != "active" {
			t.Errorf("after a refused reload of %s the unit is %q, want active", broken.name, out)
		}
		if out := m.must("toolhost", "call", "hello_again", "name=hello"); !strings.Contains(out, "hello from the machine") {
			t.Errorf("after a refused reload of %s the host does not serve: %s", broken.name, out)
		}
		if out := m.quiet("journalctl", "-u", "toolhost", "--no-pager", "-o", "cat"); !strings.Contains(out, broken.where) {
			t.Errorf("the journal does not say where %s is (%q):\n%s", broken.name, broken.where, tail(out, 20))
		}
	}
	m.write("/etc/toolhost/toolhost.toml", good)
	m.must("systemctl", "reload", "toolhost")

	// A conversation's files outlive a restart of the service (its runtime folder is emptied).
	if out := runPython(m, "conv-1", "open('/work/kept.txt', 'w').write('written before the restart')"); !strings.Contains(strings.ReplaceAll(out, " ", ""), `"exit_code":0`) {
		t.Fatalf("run_python in a session: %s", out)
	}
	m.must("systemctl", "restart", "toolhost")
	if out := runPython(m, "conv-1", "print(open('/work/kept.txt').read())"); !strings.Contains(out, "written before the restart") {
		t.Errorf("after systemctl restart, the session's file is gone: %s", out)
	}
	firstPID := mainPID(m)

	// The watchdog: a host that serves keeps feeding it (no restart over several periods) ...
	time.Sleep(scaled(m, 12*time.Second))
	if pid := mainPID(m); pid != firstPID || restarts(m) != 0 {
		t.Fatalf("a serving host was restarted (pid %d -> %d, %d restarts): the watchdog is not fed", firstPID, pid, restarts(m))
	}
	// ... and one that stops answering is killed and started again.
	kill(m, "-STOP", firstPID)
	secondPID := waitNewMain(t, m, firstPID, scaled(m, 60*time.Second))
	if out := m.must("journalctl", "-u", "toolhost", "--no-pager"); !strings.Contains(strings.ToLower(out), "watchdog timeout") {
		t.Errorf("the journal does not say the watchdog stopped the host:\n%s", tail(out, 20))
	}

	// The sandboxes' cgroups. On cgroup v2 the host runs in a leaf of the unit's cgroup, and the
	// sandboxes are cgroups beside it, below the unit's.
	if m.cgroupV2() {
		if cg, err := m.read(fmt.Sprintf("/proc/%d/cgroup", secondPID)); strings.TrimSpace(cg) != "0::/system.slice/toolhost.service/host" {
			t.Errorf("the host's main process is in the cgroup %q (%v), want 0::/system.slice/toolhost.service/host", strings.TrimSpace(cg), err)
		}
	}
	// While three runs hold their memory, each has a cgroup with a memory and a pids limit; once
	// they end, none of the three is left (the pool's ready sandboxes are, with the prefix too),
	// and the host serves on.
	holdCtx, holdCancel := context.WithTimeout(context.Background(), scaled(m, 3*time.Minute))
	var holds []func() (string, error)
	for range 3 {
		holds = append(holds, m.command(holdCtx, "toolhost", "call", "slow_hold"))
	}
	ran := heldRuns(t, m, prefix, 3)
	for i, wait := range holds {
		out, err := wait()
		m.note(fmt.Sprintf("toolhost call slow_hold (%d of 3, in the background)", i+1), out, err)
		if err != nil || !strings.Contains(out, strconv.Itoa(holdMB<<20)) {
			t.Errorf("a run of slow_hold: %v: %s", err, out)
		}
	}
	holdCancel()
	if left := waitGone(m, prefix, ran, scaled(m, 20*time.Second)); len(left) > 0 {
		t.Errorf("after their runs ended, the cgroups of %v are left", left)
	}
	if out := m.must("toolhost", "call", "word_count", "text=after the runs"); !hasWords(out, 3) {
		t.Errorf("after three runs, the host: %s", out)
	}

	// A crash of the host's main process alone (kill -9) during a run and a networked run:
	// systemd stops the rest of the unit (KillMode=mixed) and starts it again, and the new host
	// serves python tools and has removed every sandbox of the one killed. Nobody took the
	// networked sandbox's namespace and firewall chain down (they are in no cgroup): the new
	// host's sweep does, and says so in the journal.
	crashCtx, crashCancel := context.WithTimeout(context.Background(), scaled(m, 2*time.Minute))
	crashed := m.command(crashCtx, "toolhost", "call", "slow_hold")
	heldRuns(t, m, prefix, 1)
	crashedNet := m.command(crashCtx, "toolhost", "call", "slow_net")
	for deadline := time.Now().Add(scaled(m, 60*time.Second)); !strings.Contains(m.quiet("ip", "netns", "list"), prefix); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the networked run made no network namespace within %s", scaled(m, 60*time.Second))
		}
	}
	var before []string
	for name := range sandboxCgroups(m, prefix) {
		before = append(before, name)
	}
	slices.Sort(before)
	m.note("the sandboxes' cgroups before the crash", strings.Join(before, "\n"), nil)
	kill(m, "-9", secondPID)
	waitNewMain(t, m, secondPID, scaled(m, 60*time.Second))
	out, err := crashed()
	netOut, netErr := crashedNet()
	crashCancel()
	m.note("toolhost call slow_hold (its host killed by kill -9)", out, err)
	m.note("toolhost call slow_net (its host killed by kill -9)", netOut, netErr)
	if err == nil {
		t.Errorf("the run of a host killed with kill -9 ended with a result: %s", out)
	}
	if out := m.must("toolhost", "call", "word_count", "text=a b"); !hasWords(out, 2) {
		t.Errorf("after the crash the python tool: %s", out)
	}
	if left := waitGone(m, prefix, before, scaled(m, 30*time.Second)); len(left) > 0 {
		t.Errorf("the cgroups of the killed host's sandboxes are left after its restart: %v", left)
	}
	if out := m.quiet("ip", "netns", "list"); strings.Contains(out, prefix) {
		t.Errorf("the killed host's network namespace is left after its restart:\n%s", out)
	}
	if out := m.quiet("journalctl", "-u", "toolhost", "--no-pager", "-o", "cat"); !strings.Contains(out, "removed a leftover") || !strings.Contains(out, "network namespace "+prefix) {
		t.Errorf("the journal does not say the new host removed the killed one's network namespace:\n%s", tail(out, 30))
	}
	if n := restarts(m); n < 2 {
		t.Errorf("NRestarts = %d after a watchdog kill and a crash, want 2", n)
	}

	// The logs are JSON in the journal.
	jsonLines := 0
	for _, line := range strings.Split(m.must("journalctl", "-u", "toolhost", "--no-pager", "-o", "cat"), "\n") {
		var msg map[string]any
		if json.Unmarshal([]byte(line), &msg) == nil && msg["@message"] != nil && msg["@level"] != nil {
			jsonLines++
		}
	}
	if jsonLines < 5 {
		t.Errorf("journalctl -u toolhost shows %d JSON log lines, want the host's logs in JSON", jsonLines)
	}

	// Stop, while a python run with a network of its own is going: nothing of toolhost is left:
	// no process, sandbox, network namespace, firewall rule or mount.
	ctx, cancel := context.WithTimeout(context.Background(), scaled(m, 2*time.Minute))
	defer cancel()
	call := m.command(ctx, "toolhost", "call", "slow_net")
	deadline := time.Now().Add(scaled(m, 60*time.Second))
	for !strings.Contains(m.quiet("ip", "netns", "list"), prefix) {
		if time.Now().After(deadline) {
			cancel()
			out, err := call()
			t.Fatalf("the networked run made no network namespace; the call said: %v: %s", err, out)
		}
		time.Sleep(scaled(m, 200*time.Millisecond))
	}
	m.must("systemctl", "stop", "toolhost")
	callOut, callErr := call()
	m.note("toolhost call slow_net (stopped by systemctl stop)", callOut, callErr)
	if callErr == nil || !strings.Contains(callOut, "the host is stopping") {
		t.Errorf("the run cut off by stop did not end saying the host stopped: %v: %s", callErr, callOut)
	}
	// The test's own network goes before the checks.
	m.must("systemctl", "stop", "fixture-net")
	m.must("ip", "netns", "del", fixtureNetns)
	// The kernel removes a deleted namespace's devices in the background (a work queue), so the
	// veth's other end goes a moment later, not at once.
	for gone := time.Now().Add(scaled(m, 10*time.Second)); ; time.Sleep(scaled(m, 100*time.Millisecond)) {
		out, err := m.run("ip", "link", "show", "thnet-out")
		if err != nil {
			break
		}
		if time.Now().After(gone) {
			t.Errorf("the test's veth is left 10 s after its namespace went:\n%s", out)
			break
		}
	}

	if out := m.quiet("sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"); strings.Contains(out, "toolhost-plugin") ||
		strings.Contains(out, "runsc") || strings.Contains(out, "toolhost serve") {
		t.Errorf("processes are left after stop:\n%s", out)
	}
	cgroups := "ls -d /sys/fs/cgroup/*/" + prefix + "* 2>/dev/null"
	if m.cgroupV2() {
		cgroups = "find /sys/fs/cgroup -name '" + prefix + "*'"
	}
	if out := strings.TrimSpace(m.quiet("sh", "-c", cgroups)); out != "" {
		t.Errorf("sandbox cgroups are left after stop:\n%s", out)
	}
	if out := m.quiet("ip", "netns", "list"); strings.Contains(out, prefix) || strings.Contains(out, fixtureNetns) {
		t.Errorf("network namespaces are left after stop: %s", out)
	}
	if out := m.quiet("iptables-save"); strings.Contains(out, prefix) || strings.Contains(out, "toolhost") {
		t.Errorf("firewall rules are left after stop:\n%s", out)
	}
	for _, line := range strings.Split(m.quiet("cat", "/proc/self/mountinfo"), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == "/var/lib/toolhost/rootfs" || f[4] == "/var/lib/toolhost/rootfs-sessions" || f[4] == path.Dir(deb)) {
			continue // the test's own binds
		}
		if strings.Contains(line, "toolhost") || strings.Contains(line, "runsc") {
			t.Errorf("a mount is left after stop: %s", line)
		}
	}
	if out := m.quiet("ip", "link"); strings.Contains(out, "veth") || strings.Contains(out, "thnet") {
		t.Errorf("links are left after stop:\n%s", out)
	}
}

// netFetch is the body of net_fetch and net_denied: the document of the server in the test's
// network namespace.
var netFetch = fmt.Sprintf("import urllib.request\n    return urllib.request.urlopen('http://%s:%d/hello.json', timeout=10).read().decode()", fixtureSrvIP, fixturePort)

// sandboxCgroup is what a sandbox's cgroup shows: the memory its processes use, and its memory
// and pids limits ("max": none).
type sandboxCgroup struct {
	memoryBytes        int64
	memoryMax, pidsMax string
}

// sandboxCgroups are the cgroups of the sandboxes of prefix on m, by name: on cgroup v2 those
// below the unit's cgroup (memory.current, memory.max, pids.max), on v1 those of the memory
// hierarchy (memory.usage_in_bytes, memory.limit_in_bytes) with pids.max of the pids one.
func sandboxCgroups(m machine, prefix string) map[string]sandboxCgroup {
	script := `for d in /sys/fs/cgroup/memory/PREFIX*/; do [ -d "$d" ] || continue; n=${d%/}; n=${n##*/}; ` +
		`echo "$n" "$(cat "$d/memory.usage_in_bytes")" "$(cat "$d/memory.limit_in_bytes")" "$(cat "/sys/fs/cgroup/pids/$n/pids.max")"; done 2>/dev/null`
	if m.cgroupV2() {
		script = `for d in /sys/fs/cgroup/system.slice/toolhost.service/PREFIX*/; do [ -d "$d" ] || continue; n=${d%/}; n=${n##*/}; ` +
			`echo "$n" "$(cat "$d/memory.current")" "$(cat "$d/memory.max")" "$(cat "$d/pids.max")"; done 2>/dev/null`
	}
	out := map[string]sandboxCgroup{}
	for _, line := range strings.Split(m.quiet("sh", "-c", strings.ReplaceAll(script, "PREFIX", prefix)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || !strings.HasPrefix(f[0], prefix) {
			continue // a cgroup removed while it was read
		}
		used, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseUint(f[2], 10, 64); err == nil && v >= 1<<62 {
			f[2] = "max" // v1's "no limit"
		}
		out[f[0]] = sandboxCgroup{memoryBytes: used, memoryMax: f[2], pidsMax: f[3]}
	}
	return out
}

// heldRuns waits until n runs of slow_hold hold their memory, checks that the cgroup of each has
// a memory and a pids limit, and returns their names. A run's sandbox is told from the pool's
// ready ones by the memory it holds.
func heldRuns(t *testing.T, m machine, prefix string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(scaled(m, 60*time.Second))
	for {
		cgs := sandboxCgroups(m, prefix)
		var held []string
		for name, cg := range cgs {
			if cg.memoryBytes >= holdMB<<20 {
				held = append(held, name)
			}
		}
		if len(held) >= n {
			slices.Sort(held)
			var seen strings.Builder
			for _, name := range held {
				cg := cgs[name]
				fmt.Fprintf(&seen, "%s: memory %d bytes, memory limit %s, pids limit %s\n", name, cg.memoryBytes, cg.memoryMax, cg.pidsMax)
				if cg.memoryMax == "max" || cg.pidsMax == "max" {
					t.Errorf("the cgroup %s of a run has no limit: memory %s, pids %s", name, cg.memoryMax, cg.pidsMax)
				}
			}
			m.note(fmt.Sprintf("the cgroups of %d runs of slow_hold", n), seen.String(), nil)
			return held
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d cgroups of %s hold the memory of a run of slow_hold, want %d: %v", scaled(m, 60*time.Second), len(held), prefix, n, cgs)
		}
		time.Sleep(scaled(m, 200*time.Millisecond))
	}
}

// waitGone waits until none of the cgroups named is among prefix's on m, for at most timeout,
// and returns those still there.
func waitGone(m machine, prefix string, names []string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		cgs := sandboxCgroups(m, prefix)
		var left []string
		for _, name := range names {
			if _, ok := cgs[name]; ok {
				left = append(left, name)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(scaled(m, 250*time.Millisecond))
	}
}

// waitPoolQuiet waits, for a while, until the python kind's pool starts no sandbox and has one
// ready (its gauges in /metrics), and writes what it saw to the transcript.
func waitPoolQuiet(m machine) {
	const quiet = `import sys, time, urllib.request
deadline = time.time() + float(sys.argv[1])
while True:
    starting, ready = 0, 0
    for line in urllib.request.urlopen("http://127.0.0.1:8080/metrics", timeout=10).read().decode().splitlines():
        if line.startswith("toolhost_kind_pool_starting{"):
            starting += float(line.split()[-1])
        if line.startswith("toolhost_kind_pool_ready{") and 'shape="no_network"' in line:
            ready += float(line.split()[-1])
    if (starting == 0 and ready >= 1) or time.time() > deadline:
        print("the pool: %d starting, %d ready" % (starting, ready))
        break
    time.sleep(0.1)`
	_, _ = m.run("python3", "-c", quiet, strconv.Itoa(int(scaled(m, 20*time.Second)/time.Second)))
}

// edit reads the file p of m, changes it, and writes it back.
func edit(t *testing.T, m machine, p string, change func(string) string) {
	t.Helper()
	s, err := m.read(p)
	if err != nil {
		t.Fatal(err)
	}
	m.write(p, change(s))
}

// replaceFirst replaces the first old in s by new, failing the test when s has no old: a change
// of the installed config that did not apply would make the flow test the wrong thing.
func replaceFirst(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the config has no %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

// kill sends the signal sig (as kill takes it: -STOP, -9) to the process pid of m, with the
// shell's kill (a minimal Debian has no /bin/kill).
func kill(m machine, sig string, pid int) {
	m.must("sh", "-c", `kill "$1" "$2"`, "sh", sig, strconv.Itoa(pid))
}

// exitedWith says whether err is a command's end with exit status status.
func exitedWith(err error, status int) bool {
	ee := (*exitError)(nil)
	return errors.As(err, &ee) && ee.status == status
}

// succeeds says whether args end with status 0 on m within timeout.
func succeeds(m machine, timeout time.Duration, args ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := m.command(ctx, args...)()
	return err == nil
}

// hasWords says whether a call of word_count printed n words.
func hasWords(out string, n int) bool {
	return strings.Contains(out, fmt.Sprintf(`"words": %d`, n)) || strings.Contains(out, fmt.Sprintf(`"words":%d`, n))
}

// countLine is the number on a line of out of digits alone (what wc -c printed), or -1.
func countLine(out string) int {
	for _, line := range strings.Split(out, "\n") {
		if n, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			return n
		}
	}
	return -1
}

// show is a property of the unit.
func show(m machine, prop string) string {
	return strings.TrimSpace(m.quiet("systemctl", "show", "-p", prop, "--value", "toolhost"))
}

// mainPID is the host's pid in the machine.
func mainPID(m machine) int {
	pid, _ := strconv.Atoi(show(m, "MainPID"))
	return pid
}

func restarts(m machine) int {
	n, _ := strconv.Atoi(show(m, "NRestarts"))
	return n
}

// waitNewMain waits until systemd runs the host again under a new pid and it serves.
func waitNewMain(t *testing.T, m machine, old int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		pid := mainPID(m)
		if pid != 0 && pid != old && show(m, "ActiveState") == "active" {
			m.note(fmt.Sprintf("systemd started the host again: pid %d, after %d", pid, old), m.quiet("systemctl", "status", "--no-pager", "-n", "0", "toolhost"), nil)
			m.must("toolhost", "tools")
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd did not start the host again within %s: %s\n%s", timeout, m.quiet("systemctl", "status", "--no-pager", "-n", "0", "toolhost"),
				m.quiet("journalctl", "-u", "toolhost", "--no-pager", "-n", "40"))
		}
		time.Sleep(scaled(m, 250*time.Millisecond))
	}
}

// runPython calls run_python in a session over HTTP from inside the machine (there is no curl
// in it, but there is Python), returning the response.
func runPython(m machine, session, code string) string {
	const call = `import json, sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:8080/api/v1/tools/run_python/call?session=" + sys.argv[1],
    data=json.dumps({"code": sys.argv[2]}).encode(), headers={"content-type": "application/json"}, method="POST")
try:
    print(urllib.request.urlopen(req, timeout=float(sys.argv[3])).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())`
	out, _ := m.run("python3", "-c", call, session, code, strconv.Itoa(int(scaled(m, 120*time.Second)/time.Second)))
	return out
}

func httpTool(name string) string {
	return fmt.Sprintf(`name = %q
description = "Fetch a document from the machine's own web server."
[[params]]
name = "name"
kind = "text"
required = true
[run]
type = "http"
method = "GET"
url = "http://127.0.0.1:9999/{{name}}.json"
`, name)
}

// pythonTool is a python tool whose run(text="") is body (its lines after the first indented by
// four spaces). run are keys of its run table besides type and code (seconds, memory_mb,
// network); seconds is 60 unless run says.
func pythonTool(name, body string, run map[string]any) string {
	keys := map[string]any{"seconds": 60}
	maps.Copy(keys, run)
	var table strings.Builder
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		fmt.Fprintf(&table, "%s = %v\n", k, keys[k])
	}
	return fmt.Sprintf(`name = %q
description = "A python tool of the operator flow."
[[params]]
name = "text"
kind = "text"
required = false
[run]
type = "python"
%scode = '''
def run(text=""):
    %s
'''
`, name, table.String(), body)
}
