package config

// ApprovalsConfig is [approvals]: who approves the runs of tools with
// effect "change", and how long an approval waits.
type ApprovalsConfig struct {
	// By is who decides: "caller" (the default: the principal who started
	// the run, or an admin) or "admins".
	By string
	// Change is "ask" (the default: every run of a change tool waits for a
	// person) or "auto" (change tools run at once, except in a
	// conversation that read outside text, which still asks).
	Change string
	// ExpireMinutes is how long an approval waits before the run ends with
	// approval_expired. Default 10, 1..1440.
	ExpireMinutes int
}

func defaultApprovals() ApprovalsConfig {
	return ApprovalsConfig{By: "caller", Change: "ask", ExpireMinutes: 10}
}

// decodeApprovals reads [approvals] into a.
func (d *decoder) decodeApprovals(v any, a *ApprovalsConfig) {
	t := d.table("approvals", v)
	if t.str("by", &a.By) {
		d.oneOf(t.at("by"), a.By, "caller", "admins")
	}
	if t.str("change", &a.Change) {
		d.oneOf(t.at("change"), a.Change, "ask", "auto")
	}
	t.int("expire_minutes", &a.ExpireMinutes, 1, 1440)
	t.done()
}
