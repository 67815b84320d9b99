package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The packages that drive sandboxes, run in the cgroup v2 VMs as they run here: built on this
// machine with `go test -c`, put on the VM's share disk with runsc, and run there as root in a
// delegated systemd scope (what the unit gives the host), against the VM's rootfs. A test that
// skips there fails: a run that skipped everything would pass having tested nothing.
//
// Each entry names what it leaves out and why. The VMs emulate their CPU (TCG, about ten times
// slower than this machine, one vCPU), so the entries are the tests that read or write cgroups
// — every limit and its stop, the pool's hand-out, kills, sweeps, the doctor — not those of the
// network or the protocol, which cgroups don't touch and which run here.
var vmPackages = []struct {
	name, pkg string
	// run selects the tests (-test.run); suites says in which VMs.
	run    string
	suites []string
	env    []string
}{
	{
		// Left out: the pool's growth and measurements (timing, not cgroups), the hanging-platform
		// probe (a minute of nothing), the network tests (iptables and veth, not cgroups). A
		// checkpoint restored into a prepared sandbox: its /work reaches the sandbox through a
		// mount propagated under systemd's shared mounts.
		name: "sandbox", pkg: "runsc/sandbox", suites: []string{"bookworm", "trixie"},
		run: "^(TestKillCgroup.*|TestCPUWeightIsRunscs|TestStatsCountFromTheBaseline|TestSandboxTakesOneRequest|TestSandboxProcessesAreTheOOMKillersFirst|TestExecIntoALongLivedSandbox|" +
			"TestStartFailureLeavesNothing|TestPoolHandOutSetsTheRunsLimits|TestPoolReplacesADeadSandbox|TestSweepRemovesLeftovers|TestSweepSparesLiveInstances|TestDoctorPassesOnThisMachine|" +
			"TestAPreparedSandboxResumesACheckpoint)$",
		env: []string{"TOOLHOST_TEST_EMULATED_CPU=1"},
	},
	{
		// Each limit's stop and its cause, a killed host and a restart's reconcile, the live
		// interpreter (names kept, interrupts and restarts, its rest between cells), ready sandboxes
		// for new sessions (the disk handed over under systemd's shared mounts), checkpoints of idle
		// sandboxes restored in a cgroup of their own (names kept across idle stops and a
		// manager's restart); left out: the network modes and the other measurements.
		name: "session", pkg: "plugins/python/session", suites: []string{"trixie"},
		run: "^(TestMemoryKillIsClassified|TestPidsLimitIsClassified|TestDiskCapStopsAWriter|TestTimeoutKillsTheRunNotTheSession|" +
			"TestKilledHostLeavesNoOrphan|TestRestartFindsFilesAndReconcileRemoves|TestExitCodeAndStreams|" +
			"TestTheInterpreterKeepsNamesAcrossRuns|TestACellPastItsTimeIsInterrupted|TestTheInterpreterRestsBetweenCells|" +
			"TestANewSessionTakesAReadySandbox|TestReadySandboxesLeaveNothing|TestAReadySandboxUnderASharedMount|" +
			"TestAnIdleStopKeepsTheInterpretersNames|TestTheNamesOutliveTheManager|TestMeasureResume)$",
		// TestMeasureResume: ten restores in a row, to see how often the emulated CPU refuses one
		// (see resumed in checkpoint_test.go).
		env: []string{"TOOLHOST_TEST_EMULATED_CPU=1", "TOOLHOST_MEASURE=1"},
	},
	{
		// The kind's limits and their words, the pool's fresh sandboxes with their limits, a
		// ready sandbox killed from outside, sessions on the session rootfs (pandas there, not in
		// a tool run); with the pool on (the pass that hands sandboxes out).
		name: "python", pkg: "plugins/python", suites: []string{"trixie"},
		run: "^(TestLimitsStopTheCodeAndOthersGoOn|TestPooledRunsAreFreshAndKeepTheirLimits|TestKilledReadySandboxIsNeverHandedOut|" +
			"TestNoSecretsOrHostFiles|TestSessionLimits|TestSessionsRunOnTheSessionRootfs)$",
		env: []string{"TOOLHOST_TEST_POOL=on"},
	},
	{
		// An editor's attack on every path at once, against the host and python kind built here
		// (TestMain's), with their sandboxes in the VM's cgroup v2 tree. Waits, a session run's
		// seconds and the checks' check_seconds are ten times this machine's (TCG).
		name: "abuse", pkg: "integration", suites: []string{"bookworm"},
		run: "^TestAnEditorCannotExhaustTheHost$",
		env: []string{"TOOLHOST_TEST_BINS=/mnt/share/integration-bins", "TOOLHOST_TEST_SLOWDOWN=10"},
	},
}

// vmPackageFiles builds the test binaries of suite's packages, and returns them and runsc as
// files for the VM's share disk.
func vmPackageFiles(t *testing.T, suite string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	runsc, _ := filepath.Abs("../build/bin/runsc")
	if _, err := os.Stat(runsc); err != nil {
		t.Fatalf("no runsc at %s: run make runsc (make test does)", runsc)
	}
	files["runsc"] = runsc
	for _, p := range vmPackages {
		if !contains(p.suites, suite) {
			continue
		}
		out := filepath.Join(dir, p.name+".test")
		cmd := exec.Command("go", "test", "-c", "-o", out, "./"+p.pkg)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the tests of %s for the VM: %v\n%s", p.pkg, err, b)
		}
		files[p.name+".test"] = out
		if p.pkg == "integration" {
			// Its host and the python kind, built by TestMain for this run: the package's
			// tests run there with TOOLHOST_TEST_BINS=/mnt/share/integration-bins.
			files["integration-bins/toolhost"] = bins.toolhost
			files["integration-bins/plugins/toolhost-plugin-python"] = filepath.Join(bins.plugins, "toolhost-plugin-python")
		}
	}
	return files
}

var testLine = regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+)`)

// vmPackagesStep runs suite's packages in the VM, each in a delegated scope of its own.
func vmPackagesStep(t *testing.T, v *vm) {
	for _, p := range vmPackages {
		if !contains(p.suites, v.suite) {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
			defer cancel()
			work := "/tmp/pkgtest-" + p.name
			args := []string{"sh", "-c", `mkdir -p "$1" && cd "$1" && shift && exec "$@"`, "sh", work,
				"systemd-run", "--scope", "-p", "Delegate=yes", "--quiet", "--collect", "--unit=thpkg-" + p.name, "--",
				"env", "TOOLHOST_RUNSC=/mnt/share/runsc", "TOOLHOST_ROOTFS=/var/lib/toolhost/rootfs",
				"TOOLHOST_SESSION_ROOTFS=/var/lib/toolhost/rootfs-sessions"}
			args = append(args, p.env...)
			args = append(args, "/mnt/share/"+p.name+".test", "-test.run", p.run, "-test.v", "-test.count=1", "-test.timeout=22m")
			out, err := v.command(ctx, args...)()
			v.note(fmt.Sprintf("go test %s in %s (%.0f s)", p.pkg, v.name(), time.Since(start).Seconds()), out, err)
			passed := 0
			for _, m := range testLine.FindAllStringSubmatch(out, -1) {
				switch m[1] {
				case "PASS":
					passed++
				case "SKIP":
					t.Errorf("%s skipped in %s: every test chosen for the VM must run there", m[2], v.name())
				}
			}
			if err != nil || passed == 0 {
				t.Errorf("the tests of %s in %s: %v (%d passed)\n%s", p.pkg, v.name(), err, passed, tail(out, 80))
			}
			t.Logf("%s: %d tests passed in %.0f s", p.pkg, passed, time.Since(start).Seconds())
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// vmTestNames lists the tests -test.run selects, so a name in vmPackages that matches nothing
// (a test renamed) is seen here, not as a silent gap in the VMs.
func TestVMPackagesNameRealTests(t *testing.T) {
	for _, p := range vmPackages {
		re := regexp.MustCompile(p.run)
		names := map[string]bool{}
		srcs, _ := filepath.Glob(filepath.Join("..", p.pkg, "*_test.go"))
		for _, f := range srcs {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`).FindAllStringSubmatch(string(b), -1) {
				names[m[1]] = true
			}
		}
		alts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(p.run, "^("), ")$"), "|")
		for _, alt := range alts {
			altRe := regexp.MustCompile("^(" + alt + ")$")
			found := false
			for n := range names {
				if altRe.MatchString(n) && re.MatchString(n) {
					found = true
				}
			}
			if !found {
				t.Errorf("vmPackages %s: %q matches no test of %s", p.name, alt, p.pkg)
			}
		}
	}
}
