package main

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk"
)

// TestClassify: the cause of a stop comes from what the host did, then the cgroup, then the
// runner's report, in that order.
func TestClassify(t *testing.T) {
	lim := limits{seconds: 3, memoryMB: 64, workMB: 100, tmpMB: 8, outputBytes: 1 << 20}
	line := 4
	cases := []struct {
		name string
		o    outcome
		lim  limits
		code string
		msg  string
	}{
		{"result", outcome{answer: &answer{OK: true, Result: json.RawMessage(`{"a":1}`)}}, lim, "", `{"a":1}`},
		{"timeout beats the cgroup", outcome{timedOut: true, stats: sandbox.Stats{OOMKills: 1}}, lim, "timeout", "the code ran longer than 3 seconds and was stopped"},
		{"output", outcome{outputCut: true}, lim, "output_cut", "the code printed more than its output limit (1 MiB) and was stopped; what it printed is cut there"},
		{"oom kill, runner saw a SIGKILL", outcome{answer: &answer{Error: "signal", Signal: 9}, stats: sandbox.Stats{OOMKills: 1}}, lim, "memory", "the code used more memory than its limit (64 MiB)"},
		{"oom, sandbox gone", outcome{answerErr: errNoAnswer, stats: sandbox.Stats{MemoryLimitHits: 3}}, lim, "memory", "the code used more memory than its limit (64 MiB)"},
		{"MemoryError", outcome{answer: &answer{Error: "exception", Kind: "memory", Last: "MemoryError"}}, lim, "memory", "the code used more memory than its limit (64 MiB)"},
		{"limit hits but the code finished", outcome{answer: &answer{OK: true, Result: json.RawMessage(`1`)}, stats: sandbox.Stats{MemoryLimitHits: 3, PidsLimitHits: 1}}, lim, "", "1"},
		{"pids", outcome{answerErr: errNoAnswer, stats: sandbox.Stats{PidsLimitHits: 1}}, lim, "processes", "the code started more processes than its limit"},
		{"cpu", outcome{answer: &answer{Error: "cpu"}}, lim, "cpu", "the code used more CPU time than its limit"},
		{"disk work", outcome{answer: &answer{Error: "exception", Kind: "disk", Full: "/work"}}, lim, "disk", "the code wrote more than its disk limit (100 MiB)"},
		{"disk tmp", outcome{answer: &answer{Error: "exception", Kind: "disk", Full: "/tmp"}}, lim, "disk", "the code wrote more than its disk limit (8 MiB)"},
		{"no network", outcome{answer: &answer{Error: "exception", Kind: "network", Last: "URLError: x"}}, lim, "network", "this tool has no network: say it needs it (network = true)"},
		{"network refused by the chain", outcome{answer: &answer{Error: "exception", Kind: "network", Last: "ConnectionRefusedError: [Errno 111] Connection refused"}, net: sandbox.NetCounters{Refused: 2}},
			limits{seconds: 3, network: true}, "network", "the code tried to reach an address python tools may not reach (only public addresses, TCP ports 80 and 443): ConnectionRefusedError: [Errno 111] Connection refused"},
		{"over the connection cap", outcome{answer: &answer{Error: "exception", Kind: "network", Last: "ConnectionRefusedError: [Errno 111] Connection refused"}, net: sandbox.NetCounters{OverConnLimit: 1, Refused: 1}},
			limits{seconds: 3, network: true, connCap: 64}, "network", "the code had more than 64 connections open at once (the limit of a python tool); close the ones it no longer needs"},
		{"network on, refused elsewhere", outcome{answer: &answer{Error: "exception", Kind: "network", Last: "ConnectionRefusedError: x"}},
			limits{seconds: 3, network: true}, "code_error", "the code failed: ConnectionRefusedError: x"},
		{"exception", outcome{answer: &answer{Error: "exception", Last: "KeyError: 'a'"}}, lim, "code_error", "the code failed: KeyError: 'a'"},
		{"compile", outcome{answer: &answer{Error: "compile", Msg: "invalid syntax", Line: &line}}, lim, "compile", "the code doesn't compile: invalid syntax (line 4)"},
		{"no run", outcome{answer: &answer{Error: "no_run"}}, lim, "no_run", "the code defines a function run(**args) that the tool calls"},
		{"bad result", outcome{answer: &answer{Error: "bad_result"}}, lim, "bad_result", "the code's result isn't JSON"},
		{"too large", outcome{answerErr: errTooLarge}, lim, "bad_result", "the code's result is larger than 16 MiB"},
		{"crash", outcome{answerErr: errNoAnswer}, lim, "sandbox", "the sandbox stopped before the code returned a result"},
		{"cancelled", outcome{cancelled: true, timedOut: true}, lim, "cancelled", "the run was cancelled"},
	}
	for _, tc := range cases {
		res, err := classify(tc.o, tc.lim)
		if tc.code == "" {
			if err != nil || string(res) != tc.msg {
				t.Errorf("%s: %s, %v; want %s", tc.name, res, err, tc.msg)
			}
			continue
		}
		if err == nil || err.Code != tc.code || err.Message != tc.msg {
			t.Errorf("%s: %v; want %s %q", tc.name, err, tc.code, tc.msg)
		}
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pids != 64 || cfg.MaxMemoryMB != 1024 || cfg.WorkMB != 256 || cfg.TmpMB != 64 || cfg.MaxOutputBytes != 1<<20 ||
		cfg.Platform != "systrap" || cfg.SandboxPrefix != "toolhost-" || cfg.StateDir != "/run/toolhost" {
		t.Errorf("defaults = %+v", cfg)
	}
	_, err = parseConfig(json.RawMessage(`{"runsc": "bin/runsc", "pids": 2, "sandbox_prefix": "Bad Prefix", "extra_allowed_cidrs": ["10.1.2.3/8"], "max_memory_mb": 8}`))
	var fe sdk.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 5 {
		t.Fatalf("bad config = %v", err)
	}
	for _, want := range []string{"python.runsc:", "python.pids:", "python.sandbox_prefix:", "python.extra_allowed_cidrs[0]:", "python.max_memory_mb:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in %v", want, err)
		}
	}
	if _, err := parseConfig(json.RawMessage(`{"unknown": 1}`)); err == nil {
		t.Error("an unknown key passed")
	}

	// [python.pool]: defaults, the host's table, and what is refused.
	if cfg.pool.Size != 2 || cfg.pool.Max != 16 || cfg.pool.MaxIdleMinutes != 10 || cfg.pool.Preload != nil {
		t.Errorf("pool defaults = %+v", cfg.pool)
	}
	cfg, err = parseConfig(json.RawMessage(`{"pool": {"size": 0, "max": 4, "max_idle_minutes": 1, "preload": ["numpy", "xml.etree"]}}`))
	if err != nil || cfg.pool.Size != 0 || cfg.pool.Max != 4 || len(cfg.pool.Preload) != 2 {
		t.Errorf("pool table = %+v, %v", cfg.pool, err)
	}
	for raw, want := range map[string]string{
		`{"pool": {"size": 5, "max": 4}}`:           "python.pool.size: must be from 0 to python.pool.max (4), not 5",
		`{"pool": {"max": 0}}`:                      "python.pool.max: must be from 1 to 1024, not 0",
		`{"pool": {"max_idle_minutes": 0}}`:         "python.pool.max_idle_minutes: must be from 1 to 1440, not 0",
		`{"pool": {"max": 4, "ready_sessions": 5}}`: "python.pool.ready_sessions: must be from 0 to python.pool.max (4), not 5",
		`{"pool": {"ready_sessions": -1}}`:          "python.pool.ready_sessions: must be from 0 to python.pool.max (16), not -1",
		`{"pool": {"preload": ["os; import x"]}}`:   `python.pool.preload[0]: "os; import x" is not a Python module name like "numpy" or "xml.etree"`,
		`{"pool": {"size": 1, "warm": true}}`:       `python.pool.warm: is not a setting of [python.pool]: the settings are max, max_idle_minutes, preload, ready_sessions, size`,
	} {
		if _, err := parseConfig(json.RawMessage(raw)); err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %q", raw, err, want)
		}
	}
}

// TestParseConfigSessionRootfs: [python] session_rootfs and session_packages, their defaults
// (the rootfs's folder with -sessions, the scientific stack) and the errors of each.
func TestParseConfigSessionRootfs(t *testing.T) {
	cfg, err := parseConfig(json.RawMessage(`{}`))
	if err != nil || cfg.SessionRootfs != "/var/lib/toolhost/rootfs-sessions" ||
		!slices.Equal(cfg.SessionPackages, []string{"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-munkres"}) {
		t.Errorf("defaults: session_rootfs %q, session_packages %v, %v", cfg.SessionRootfs, cfg.SessionPackages, err)
	}
	cfg, err = parseConfig(json.RawMessage(`{"rootfs": "/srv/th/rootfs"}`))
	if err != nil || cfg.SessionRootfs != "/srv/th/rootfs-sessions" {
		t.Errorf("session_rootfs left out beside rootfs /srv/th/rootfs: %q, %v; want /srv/th/rootfs-sessions", cfg.SessionRootfs, err)
	}
	cfg, err = parseConfig(json.RawMessage(`{"session_rootfs": "/srv/sessions", "session_packages": ["python3-scipy"]}`))
	if err != nil || cfg.SessionRootfs != "/srv/sessions" || !slices.Equal(cfg.SessionPackages, []string{"python3-scipy"}) {
		t.Errorf("given: %q %v, %v", cfg.SessionRootfs, cfg.SessionPackages, err)
	}
	for raw, want := range map[string]string{
		`{"session_rootfs": "build/rootfs-sessions"}`:            `python.session_rootfs: must be an absolute path, not "build/rootfs-sessions"`,
		`{"rootfs": "/srv/r", "session_rootfs": "/srv/r"}`:       `python.session_rootfs: must be another folder than rootfs (/srv/r): the conversation sandboxes' rootfs is built with more packages`,
		`{"session_packages": ["python3-numpy", "Pandas!"]}`:     `python.session_packages[1]: "Pandas!" is not a Debian package name like "python3-numpy"`,
		`{"packages": ["python3 numpy"]}`:                        `python.packages[0]: "python3 numpy" is not a Debian package name like "python3-numpy"`,
		`{"session_packages": "python3-numpy"}`:                  `python: the [python] table can't be read: json: cannot unmarshal string into Go struct field Config.session_packages of type []string`,
		`{"session_rootfs": "/srv/s", "session_packges": ["x"]}`: `python.session_packges: is not a setting of [python]: the settings are `,
	} {
		_, err := parseConfig(json.RawMessage(raw))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v; want %q", raw, err, want)
		}
	}
}

func TestSizeText(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 3 << 20: "3 MiB", 512 << 10: "512 KiB", 1000: "1000 bytes"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q; want %q", n, got, want)
		}
	}
}
