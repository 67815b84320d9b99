package host

import (
	"context"
	"fmt"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
)

// budgets says what each principal may use per hour under cfg: its
// token's budgets, or [runs]'s for tokens without their own and for the
// local caller.
func budgets(cfg *config.Config) runs.Budgets {
	byName := make(map[string]config.Token, len(cfg.Tokens))
	for _, t := range cfg.Tokens {
		byName[t.Name] = t
	}
	def := cfg.Runs
	return func(principal string) runs.Budget {
		b := runs.Budget{
			RunsPerHour: def.RunsPerHourPerToken, SandboxSecondsPerHour: def.SandboxCPUSecondsPerHourPerToken,
			Who: fmt.Sprintf("the token %q", principal), RunsSetting: "[runs] runs_per_hour_per_token",
			SecondsSetting: "[runs] sandbox_cpu_seconds_per_hour_per_token",
		}
		if principal == auth.LocalName && len(byName) == 0 {
			b.Who = `the caller "local" (every caller on this machine, as no tokens are configured)`
		}
		if tok, ok := byName[principal]; ok {
			if tok.RunsPerHour > 0 {
				b.RunsPerHour, b.RunsSetting = tok.RunsPerHour, "its runs_per_hour"
			}
			if tok.SandboxCPUSecondsPerHour > 0 {
				b.SandboxSecondsPerHour, b.SecondsSetting = tok.SandboxCPUSecondsPerHour, "its sandbox_cpu_seconds_per_hour"
			}
		}
		return b
	}
}

// openLedger gives the dispatcher the host's store as the ledger of
// budgets and idempotency keys and as the keeper of taint (and, on
// PostgreSQL, of approvals: shareApprovals), so a restart
// forgets none of them: the sessions' store when [sessions] opened it, or
// the same database opened here. When it can't be opened they are kept in
// memory, and the log says so. A PostgreSQL database that can't be reached
// at start is no failure to open: the store is used all the same, its
// calls refused (store_unavailable) until the database is back. Budgets and keys are counted by the store's
// clock: the database's own on PostgreSQL, so that hosts sharing it count
// the same hour.
func (h *Host) openLedger(ctx context.Context, stateDir string) {
	h.sessions.mu.Lock()
	st := h.sessions.store
	h.sessions.mu.Unlock()
	if st == nil {
		var err error
		st, err = sessions.Open(ctx, h.config().Store, stateDir)
		if err != nil {
			h.log.Error("budgets and idempotency keys are kept in memory only: a restart forgets them", "error", err)
			return
		}
		h.ownLedger = st
	}
	h.runs.SetLedger(st, st.Clock())
	h.runs.SetTaintStore(st, st.Clock())
	h.store.Store(st)
	h.shareApprovals(st)
	h.startLease(st)
	h.startRouting(st)
}

// shareApprovals gives the dispatcher the store's approvals when the store
// is PostgreSQL: the hosts sharing it list and decide each other's, and
// they expire by the database's clock. A SQLite store is one host's, and
// the runs its approvals wait for live in this process, ended by a
// restart: they stay in memory, where they were, as nothing would read
// them from the file.
func (h *Host) shareApprovals(st *sessions.Store) {
	if !h.config().Store.Postgres() {
		return
	}
	h.runs.SetApprovalStore(st.Approvals(), st.Clock())
}

// closeLedger closes the store openLedger opened itself.
func (h *Host) closeLedger() {
	if h.ownLedger == nil {
		return
	}
	if err := h.ownLedger.Close(); err != nil {
		h.log.Warn("the store of budgets and idempotency keys did not close cleanly", "error", err)
	}
	h.ownLedger = nil
}
