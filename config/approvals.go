package config

import "slices"

// ApprovalsConfig is [approvals]: who approves the runs of tools with
// effect "change", and how long an approval waits.
type ApprovalsConfig struct {
	// By is who decides: "caller" (the default: the principal who started
	// the run, an admin or an approver token; no second factor, since an
	// agent holding the caller's token approves its own runs), "admins"
	// (admins only) or "approvers" (tokens with approver = true only).
	// Under "admins" and "approvers" the token that started a run never
	// decides it.
	By string
	// Change is "ask" (the default: every run of a change tool waits for a
	// person) or "auto" (change tools run at once, except in a
	// conversation that read outside text, which still asks).
	Change string
	// ExpireMinutes is how long an approval waits before the run ends with
	// approval_expired. Default 10, 1..1440.
	ExpireMinutes int
	// TaintUploads says a file uploaded into a session (PUT
	// /api/v1/sessions/ID/files/PATH) is outside text: the session is
	// tainted, so its change calls ask first. Default true; false only for
	// a host whose callers upload nothing but their own files.
	TaintUploads bool
}

func defaultApprovals() ApprovalsConfig {
	return ApprovalsConfig{By: "caller", Change: "ask", ExpireMinutes: 10, TaintUploads: true}
}

// decodeApprovals reads [approvals] into a; tokens are the [[tokens]]
// read already, of which by = "approvers" needs an approver.
func (d *decoder) decodeApprovals(v any, a *ApprovalsConfig, tokens []Token) {
	t := d.table("approvals", v)
	if t.str("by", &a.By) {
		d.oneOf(t.at("by"), a.By, "caller", "admins", "approvers")
		if a.By == "approvers" && !slices.ContainsFunc(tokens, func(tok Token) bool { return tok.Approver }) {
			d.addf(t.at("by"), "is \"approvers\", but no [[tokens]] has approver = true, so nobody could approve a run: add approver = true to the token of the person who approves")
		}
	}
	if t.str("change", &a.Change) {
		d.oneOf(t.at("change"), a.Change, "ask", "auto")
	}
	t.int("expire_minutes", &a.ExpireMinutes, 1, 1440)
	t.boolean("taint_uploads", &a.TaintUploads)
	t.done()
}
