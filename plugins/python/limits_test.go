package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/sdk/sdktest"
)

// TestLimitsStopTheCodeAndOthersGoOn: every limit stops its run with its own message while a
// trivial call made at the same time still works.
func TestLimitsStopTheCodeAndOthersGoOn(t *testing.T) {
	c := conn(t, false)
	cases := limitCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				wg      sync.WaitGroup
				trivial = make(chan error, 1)
			)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := invoke(t, c, "def run():\n    return 'still here'\n", nil, nil)
				if r.Err != nil || string(r.Result) != `"still here"` {
					trivial <- fmt.Errorf("a trivial call beside it failed: %v %s", r.Err, r.Result)
				}
				close(trivial)
			}()
			r := tc.run(t, func() *sdktest.Run { return invoke(t, c, tc.code, tc.extra, nil) })
			wg.Wait()
			wantError(t, r, tc.errCode, tc.message)
			if err := <-trivial; err != nil {
				t.Error(err)
			}
			if tc.name == "output" {
				if n := len(r.Stdout()); n != env.outputB || strings.Trim(r.Stdout(), "x") != "" {
					t.Errorf("printed %d bytes; want exactly the cap, %d", n, env.outputB)
				}
			}
		})
	}
}

// limitCase is a run that one limit stops, and what the user reads then.
type limitCase struct {
	name, code string
	extra      map[string]any
	errCode    string
	message    string
}

// busyTries is how many times a CPU-limit case runs while it ends on the clock instead.
const busyTries = 3

// run runs one case: once, or for the CPU limit until a run ends there, busyTries at most. The
// code gets as many CPU seconds as seconds on the clock (and one more on the clock): on a machine
// busy with other work it may get less than its CPU seconds before the clock stops it, and the
// timeout is then the right answer, but not the one this case is about.
func (tc limitCase) run(t *testing.T, once func() *sdktest.Run) *sdktest.Run {
	t.Helper()
	for try := 1; ; try++ {
		r := once()
		if tc.errCode != codeCPU || r.ErrorCode() != codeTimeout || try == busyTries {
			return r
		}
		t.Logf("try %d of %d ended on the clock (%v): the machine is busy; again", try, busyTries, r.Err)
	}
}

// limitCases are a run for every limit.
func limitCases() []limitCase {
	return []limitCase{
		{"memory", "def run():\n    hog = []\n    while True:\n        hog.append(b'x' * (16 << 20))\n",
			map[string]any{"memory_mb": 64}, "memory", "the code used more memory than its limit (64 MiB)"},
		{"cpu", "def run():\n    while True:\n        pass\n",
			map[string]any{"seconds": 1}, "cpu", "the code used more CPU time than its limit"},
		{"processes", "import os\ndef run():\n    while True:\n        os.fork()\n",
			nil, "processes", "the code started more processes than its limit"},
		{"disk", "def run():\n    with open('/work/big', 'wb') as f:\n        for _ in range(1024):\n            f.write(b'\\0' * (1 << 20))\n",
			nil, "disk", fmt.Sprintf("the code wrote more than its disk limit (%d MiB)", env.workMB)},
		{"disk tmp", "def run():\n    with open('/tmp/big', 'wb') as f:\n        for _ in range(1024):\n            f.write(b'\\0' * (1 << 20))\n",
			nil, "disk", "the code wrote more than its disk limit (32 MiB)"},
		{"output", "import sys\ndef run():\n    for _ in range(100):\n        sys.stdout.write('x' * (1 << 20))\n",
			nil, "output_cut", "the code printed more than its output limit (1 MiB) and was stopped; what it printed is cut there"},
	}
}
