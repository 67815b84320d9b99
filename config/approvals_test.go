package config

import (
	"strings"
	"testing"
)

func TestApprovalsDefaultsAndSettings(t *testing.T) {
	for _, src := range []string{"# nothing\n", "[approvals]\n"} {
		c, err := Parse("/etc/toolhost/toolhost.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if want := (ApprovalsConfig{By: "caller", Change: "ask", ExpireMinutes: 10, TaintUploads: true}); c.Approvals != want {
			t.Errorf("%q: [approvals] = %+v, want %+v", src, c.Approvals, want)
		}
	}
	c, err := Parse("/etc/toolhost/toolhost.toml", []byte("[approvals]\nby = \"admins\"\nchange = \"auto\"\nexpire_minutes = 1\ntaint_uploads = false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ApprovalsConfig{By: "admins", Change: "auto", ExpireMinutes: 1, TaintUploads: false}); c.Approvals != want {
		t.Errorf("[approvals] = %+v, want %+v", c.Approvals, want)
	}
}

func TestApprovalsBadValuesAreReportedAtTheirLine(t *testing.T) {
	_, err := Parse("/etc/toolhost/toolhost.toml", []byte("[approvals]\nby = \"anyone\"\nchange = \"never\"\nexpire_minutes = 0\nwho = \"x\"\ntaint_uploads = \"yes\"\n"))
	if err == nil {
		t.Fatal("bad [approvals] taken")
	}
	for _, want := range []string{"toolhost.toml:2: approvals.by", "toolhost.toml:3: approvals.change", "toolhost.toml:4: approvals.expire_minutes", "toolhost.toml:5:", "toolhost.toml:6: approvals.taint_uploads"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestApproverTokens: approver = true on a [[tokens]] entry is read; by =
// "approvers" is taken when a token is an approver.
func TestApproverTokens(t *testing.T) {
	src := `[approvals]
by = "approvers"

[[tokens]]
name = "agent"
sha256 = "` + strings.Repeat("a", 64) + `"
role = "editor"

[[tokens]]
name = "alice"
sha256 = "` + strings.Repeat("b", 64) + `"
role = "viewer"
approver = true
`
	c, err := Parse("/etc/toolhost/toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.Approvals.By != "approvers" || len(c.Tokens) != 2 || c.Tokens[0].Approver || !c.Tokens[1].Approver {
		t.Errorf("by %q, tokens %+v", c.Approvals.By, c.Tokens)
	}
}

// TestApproverTokensBad: approver must be a boolean, and by =
// "approvers" with no approver token is refused at its line.
func TestApproverTokensBad(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`[[tokens]]
name = "alice"
sha256 = "` + strings.Repeat("b", 64) + `"
role = "viewer"
approver = "yes"
`, `toolhost.toml:5: tokens[0].approver`},
		{`[approvals]
by = "approvers"

[[tokens]]
name = "agent"
sha256 = "` + strings.Repeat("a", 64) + `"
role = "editor"
`, `toolhost.toml:2: approvals.by: is "approvers", but no [[tokens]] has approver = true`},
	} {
		_, err := Parse("/etc/toolhost/toolhost.toml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}
