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
		if want := (ApprovalsConfig{By: "caller", Change: "ask", ExpireMinutes: 10}); c.Approvals != want {
			t.Errorf("%q: [approvals] = %+v, want %+v", src, c.Approvals, want)
		}
	}
	c, err := Parse("/etc/toolhost/toolhost.toml", []byte("[approvals]\nby = \"admins\"\nchange = \"auto\"\nexpire_minutes = 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ApprovalsConfig{By: "admins", Change: "auto", ExpireMinutes: 1}); c.Approvals != want {
		t.Errorf("[approvals] = %+v, want %+v", c.Approvals, want)
	}
}

func TestApprovalsBadValuesAreReportedAtTheirLine(t *testing.T) {
	_, err := Parse("/etc/toolhost/toolhost.toml", []byte("[approvals]\nby = \"anyone\"\nchange = \"never\"\nexpire_minutes = 0\nwho = \"x\"\n"))
	if err == nil {
		t.Fatal("bad [approvals] taken")
	}
	for _, want := range []string{"toolhost.toml:2: approvals.by", "toolhost.toml:3: approvals.change", "toolhost.toml:4: approvals.expire_minutes", "toolhost.toml:5:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
