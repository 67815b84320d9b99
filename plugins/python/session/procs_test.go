package session

import (
	"context"
	"strings"
	"testing"
	"time"
)

// escapes is a run that leaves processes behind every way a shell can: in the background under
// nohup, a sleeper double-forked into a session of its own, the same with an empty environment
// (no run's mark), and a daemon appending to /work/daemon.log every 100 ms.
const escapes = `
nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &
setsid sh -c 'sleep 600 & exit' </dev/null >/dev/null 2>&1
env -i /usr/bin/setsid /bin/sh -c '/bin/sleep 700 & exit' </dev/null >/dev/null 2>&1
( setsid sh -c 'while :; do echo tick >> /work/daemon.log; sleep 0.1; done' </dev/null >/dev/null 2>&1 & )
while [ ! -s /work/daemon.log ]; do sleep 0.05; done
echo started`

// census lists, in the next run, the processes left of escapes: their names, one a line.
const census = `for p in /proc/[0-9]*; do
  c=$(cat $p/comm 2>/dev/null) || continue
  case "$c" in sh|sleep) echo "$c $(tr '\0' ' ' < $p/cmdline)";; esac
done
echo end`

// TestRunsProcessesEndWithTheRun (agent and runsc exec): once a run's process exits, every
// process it started is gone, however it left (nohup, setsid, a double fork, no environment):
// the next run finds none of them, and the daemon's file stops growing.
func TestRunsProcessesEndWithTheRun(t *testing.T) {
	bothWays(t, testRunsProcessesEnd)
}

func testRunsProcessesEnd(t *testing.T, viaExec bool) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	m.viaExec = viaExec
	id := testID("procs")
	res, out, _ := runOK(t, m, id, "bash", escapes)
	if res.ExitCode != 0 || out != "started\n" {
		t.Fatalf("the run that leaves processes: %+v, %q", res, out)
	}
	res, out, _ = runOK(t, m, id, "bash", census)
	if res.Cold || out != "end\n" {
		t.Errorf("the processes after the run ended: %+v\n%s\nwant a warm run and none of them", res, out)
	}
	_, out, _ = runOK(t, m, id, "bash", `a=$(wc -l < daemon.log); sleep 1; b=$(wc -l < daemon.log); echo $a $b`)
	if f := strings.Fields(out); len(f) != 2 || f[0] != f[1] {
		t.Errorf("the daemon's file over a second after the run: %q lines; want it not to grow", out)
	}
}

// TestTimeoutEndsTheRunsProcesses (agent and runsc exec): a run stopped for its time has every
// process it started killed too, the escaped ones included.
func TestTimeoutEndsTheRunsProcesses(t *testing.T) {
	bothWays(t, func(t *testing.T, viaExec bool) {
		ts := newSetup(t)
		m := ts.manager(t, Options{})
		m.viaExec = viaExec
		id := testID("procs-timeout")
		runOK(t, m, id, "bash", "true")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var o output
		res, err := m.Run(ctx, id, o.run(Run{Language: "bash", Timeout: 3 * time.Second, Code: escapes + "\nsleep 300"}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Stopped != "timeout" || o.stdout() != "started\n" {
			t.Fatalf("a run of 300 s with 3 s: %+v, stdout %q", res, o.stdout())
		}
		res, out, _ := runOK(t, m, id, "bash", census)
		if res.Cold || out != "end\n" {
			t.Errorf("the processes after the timeout: %+v\n%s\nwant a warm run and none of them", res, out)
		}
	})
}

// TestKilledShepherdStillEndsTheRun: code that kills every process it may (its shepherd among
// them) keeps running to its end, and what it started then ends all the same.
func TestKilledShepherdStillEndsTheRun(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("procs-shepherd")
	runOK(t, m, id, "bash", "true")
	res, out, _ := runOK(t, m, id, "bash", `
env -i /usr/bin/setsid /bin/sh -c '/bin/sleep 700 & exit' </dev/null >/dev/null 2>&1
kill -9 -1
env -i /usr/bin/setsid /bin/sh -c '/bin/sleep 800 & exit' </dev/null >/dev/null 2>&1
echo done`)
	if res.ExitCode != 0 || out != "done\n" {
		t.Fatalf("a run that kills its shepherd: %+v, %q; want it to run to its end", res, out)
	}
	res, out, _ = runOK(t, m, id, "bash", census)
	if res.Cold || out != "end\n" {
		t.Errorf("the processes after the run ended: %+v\n%s\nwant a warm run and none of them", res, out)
	}
}
