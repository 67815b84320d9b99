package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// TestSessionsRunOnTheSessionRootfs: a conversation's run_python imports numpy, pandas and
// matplotlib and uses them (the session rootfs has the scientific stack), while a one-shot
// python tool of the same kind runs on the lean rootfs, where pandas is not.
func TestSessionsRunOnTheSessionRootfs(t *testing.T) {
	_, c, s := sessionKind(t)
	// The imports take a few seconds here, and minutes in the VMs' emulated CPU (TCG): a cell
	// may take 10 minutes, and each import has a cell of its own.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 64, MemoryMB: 256, IdleMinutes: 15, Seconds: 600}); err != nil {
		t.Fatal(err)
	}
	id := newSessionID()
	py := sessionTool(t, "run_python", "python")
	for _, code := range []string{"import numpy, pandas", "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt"} {
		if res := ranResult(t, callIn(t, c, id, py, map[string]any{"code": code}, nil)); res.ExitCode != 0 || res.Stopped != "" {
			t.Fatalf("%q in a session: %+v", code, res)
		}
	}
	res := ranResult(t, callIn(t, c, id, py, map[string]any{"code": "" +
		"df = pandas.DataFrame({'a': numpy.arange(5), 'b': [10, 20, 30, 40, 50]})\n" +
		"fig, ax = plt.subplots()\nax.plot(df['a'], df['b'])\nfig.savefig('plot.png')\nplt.close(fig)\n" +
		"import os\nprint(int(df['a'].sum()), int(df['b'].sum()), os.path.getsize('plot.png') > 1000)\n"}, nil))
	if res.ExitCode != 0 || res.Stdout != "10 150 True\n" || res.Stopped != "" {
		t.Fatalf("numpy, pandas and matplotlib in a session: %+v", res)
	}
	res = ranResult(t, callIn(t, c, id, py, map[string]any{"code": "df['a'].sum() + df['b'].sum()"}, nil))
	if res.ExitCode != 0 || res.Value != "160" {
		t.Errorf("the DataFrame in the next cell: %+v; want value 160", res)
	}

	r := invoke(t, c, "def run():\n    try:\n        import pandas\n    except ImportError as e:\n        return 'no pandas: ' + str(e)\n    return 'pandas'\n", nil, nil)
	if r.Err != nil || !strings.HasPrefix(string(r.Result), `"no pandas: `) {
		t.Errorf("a one-shot tool of the same kind: %s %v; want no pandas (the lean rootfs)", r.Result, r.Err)
	}
}

// TestMissingSessionRootfsIsSaid: with no session rootfs at [python] session_rootfs the kind
// still configures and runs tools, and the conversation sandboxes' start says which folder is
// missing and to run toolhost rootfs.
func TestMissingSessionRootfsIsSaid(t *testing.T) {
	onlyOnce(t)
	state, err := os.MkdirTemp(env.stateDir, "nosessionrootfs-")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(state, "rootfs-sessions")
	raw, _ := json.Marshal(map[string]any{"runsc": env.runscBin, "rootfs": env.rootfs, "session_rootfs": missing,
		"state_dir": state, "sessions_dir": filepath.Join(state, "sessions"), "sandbox_prefix": testPrefix("thpn"),
		"pool": map[string]any{"size": 0, "max": 4, "ready_sessions": 0}})
	k := newKind(kindOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.Configure(ctx, raw); err != nil {
		t.Fatalf("configuring without a session rootfs: %v", err)
	}
	defer func() {
		if err := k.Close(ctx); err != nil {
			t.Errorf("closing the kind: %v", err)
		}
	}()
	err = k.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 64, MemoryMB: 256, IdleMinutes: 15, Seconds: 60})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "toolhost rootfs") ||
		!strings.Contains(err.Error(), "session_rootfs") {
		t.Errorf("sessions without their rootfs: %v; want an error naming %s, [python] session_rootfs and toolhost rootfs", err, missing)
	}
	rep, err := k.Doctor(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	said := false
	for _, c := range rep.Checks {
		if c.Name == "session rootfs" {
			said = !c.OK && strings.Contains(c.Detail, missing) && strings.Contains(c.Fix, "toolhost rootfs")
		}
	}
	if !said {
		t.Errorf("toolhost doctor without the session rootfs: %+v; want a failing \"session rootfs\" line naming %s", rep.Checks, missing)
	}
}
