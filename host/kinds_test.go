package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// builtinPlugins builds the http and python kinds' plugins into one folder, once per test
// binary, and returns the config lines that use them, pinned.
var builtinPlugins = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolhost-kinds-test-")
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("[plugins]\ndir = %q\n[plugins.sha256]\n", dir)
	for _, kind := range []string{"http", "python"} {
		bin := filepath.Join(dir, "toolhost-plugin-"+kind)
		if out, err := exec.Command("go", "build", "-o", bin, "../plugins/"+kind).CombinedOutput(); err != nil {
			return "", fmt.Errorf("building the %s plugin: %v\n%s", kind, err, out)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		head += fmt.Sprintf("%s = %q\n", kind, hex.EncodeToString(sum[:]))
	}
	return head, nil
})

func withBuiltins(t *testing.T, text string) string {
	t.Helper()
	head, err := builtinPlugins()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if dir, _, ok := strings.Cut(strings.TrimPrefix(head, "[plugins]\ndir = \""), "\""); ok && t.Failed() {
			t.Logf("plugins in %s", dir)
		}
	})
	return head + text
}

// TestAKindsBadValueIsReportedAtItsLine: [http] and [python] are the kinds' own tables; a value
// their plugin refuses is reported at its file and line, as the host's own tables' are.
func TestAKindsBadValueIsReportedAtItsLine(t *testing.T) {
	head := withBuiltins(t, "")
	lines := strings.Count(head, "\n")
	cfg := loadConfig(t, t.TempDir(), head+"[http]\nallow_private = true\ntimeout_seconds = 0\n\n[python]\nmax_memory_mb = 8\n[python.pool]\nmax = 0\n")
	h := New(cfg, hclog.NewNullLogger())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr := h.Start(ctx)
	defer h.Stop()
	got := pr.Config.Error()
	for _, want := range []string{
		fmt.Sprintf("%s:%d: http.timeout_seconds: must be a whole number of seconds from 1 to 600, not 0", cfg.File, lines+3),
		fmt.Sprintf("%s:%d: python.max_memory_mb: must be from 16 to 65536, not 8", cfg.File, lines+6),
		fmt.Sprintf("%s:%d: python.pool.max: must be from 1 to 1024, not 0", cfg.File, lines+8),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the config's problems:\n%s\nwant a line\n%s", got, want)
		}
	}
	if len(pr.Plugins) != 0 {
		t.Errorf("refused values are the config's problems, not the plugins': %v", pr.Plugins)
	}
}

// TestATableNamingNoKindIsAnError: a top-level table that is not the host's is a kind's; one that
// names no kind says which kinds there are.
func TestATableNamingNoKindIsAnError(t *testing.T) {
	head := withBuiltins(t, "")
	cfg := loadConfig(t, t.TempDir(), head+"[pyton]\nmax_memory_mb = 512\n[kinds.weather]\nx = 1\n")
	h := New(cfg, hclog.NewNullLogger())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr := h.Start(ctx)
	defer h.Stop()
	got := pr.Config.Error()
	n := strings.Count(head, "\n")
	for _, want := range []string{
		fmt.Sprintf("%s:%d: pyton: [pyton] names no kind of this host: the kinds are ", cfg.File, n+1),
		"(did you mean [python]?)",
		fmt.Sprintf("%s:%d: kinds.weather: [kinds.weather] names no kind of this host", cfg.File, n+3),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the config's problems:\n%s\nwant\n%s", got, want)
		}
	}
}

// TestReloadWithAValueAKindRefusesKeepsTheConfig: a reload whose [http] has a bad value is
// refused whole, as one with a bad host value is: the tokens and the kinds keep the old config.
func TestReloadWithAValueAKindRefusesKeepsTheConfig(t *testing.T) {
	th := newTestHost(t, "# --\n"+tokensTOML("ed", "editor"), true)
	before := th.h.config()
	old, err := os.ReadFile(th.file)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(old), "# --\n")
	cfg := loadConfig(t, th.dir, strings.Replace(head, "allow_private = true\n", "allow_private = true\nmax_bytes = 0\n", 1)+"# --\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr := th.h.Reload(ctx, cfg)
	if !strings.Contains(pr.Config.Error(), "http.max_bytes: must be a whole number of bytes from 1 to 1073741824, not 0") {
		t.Fatalf("the reload's problems: %+v", pr)
	}
	if th.h.config() != before {
		t.Fatal("a reload with a value the http kind refused was applied")
	}
	if status, _ := th.do(t, "GET", "/api/v1/tools", "", ""); status != 401 {
		t.Errorf("the tokens of the refused config apply: a call without a token got %d", status)
	}
}

// TestDoctorAsksEachKindOverTheProtocol: toolhost doctor's lines come from the kinds' plugins,
// with the kinds' tables of the config, paths resolved against its folder.
func TestDoctorAsksEachKindOverTheProtocol(t *testing.T) {
	dir := t.TempDir()
	cfg := loadConfig(t, dir, withBuiltins(t, "[python]\nrunsc = \"nowhere/runsc\"\n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reports, problems := Doctor(ctx, cfg, hclog.NewNullLogger())
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	byKind := map[string]KindReport{}
	for _, r := range reports {
		byKind[r.Kind] = r
	}
	if r, ok := byKind["http"]; !ok || len(r.Checks) != 0 {
		t.Errorf("the http kind has nothing to check: %+v", r)
	}
	found := false
	for _, c := range byKind["python"].Checks {
		if c.Name == "runsc" {
			found = true
			if c.OK || !strings.Contains(c.Detail, filepath.Join(dir, "nowhere/runsc")) || c.Fix == "" {
				t.Errorf("the runsc line: %+v; want a failure at %s with a fix", c, filepath.Join(dir, "nowhere/runsc"))
			}
		}
	}
	if !found {
		t.Errorf("the python kind's checks have no runsc line: %+v", byKind["python"])
	}
}
