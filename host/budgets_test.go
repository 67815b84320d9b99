package host

import (
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
)

// TestBudgetsOfTokens: a token's own budgets win over [runs]'s, which
// every other token and the local caller get; messages name where each
// is set.
func TestBudgetsOfTokens(t *testing.T) {
	hex := strings.Repeat("a", 64)
	cfg, err := config.Parse("toolhost.toml", []byte(`[runs]
runs_per_hour_per_token = 100
sandbox_cpu_seconds_per_hour_per_token = 60

[[tokens]]
name = "ed"
sha256 = "`+hex+`"
role = "editor"
runs_per_hour = 5
sandbox_cpu_seconds_per_hour = 7

[[tokens]]
name = "eve"
sha256 = "`+strings.Repeat("b", 64)+`"
role = "editor"
`))
	if err != nil {
		t.Fatal(err)
	}
	b := budgets(cfg)
	if ed := b("ed"); ed.RunsPerHour != 5 || ed.SandboxSecondsPerHour != 7 || ed.RunsSetting != "its runs_per_hour" || ed.Who != `the token "ed"` {
		t.Errorf("ed: %+v", ed)
	}
	if eve := b("eve"); eve.RunsPerHour != 100 || eve.SandboxSecondsPerHour != 60 || eve.RunsSetting != "[runs] runs_per_hour_per_token" {
		t.Errorf("eve: %+v", eve)
	}
	if _, err := config.Parse("toolhost.toml", []byte("[runs]\nruns_per_hour_per_token = -1\n")); err == nil {
		t.Errorf("a negative budget was taken")
	}
	local := budgets(config.Default())("local")
	if local.RunsPerHour != 0 || !strings.Contains(local.Who, `"local"`) {
		t.Errorf("local: %+v", local)
	}
}
