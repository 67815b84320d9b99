package host

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/tools"
)

// approvalPolicy is [approvals] for the dispatcher. The session tools
// (run_python, run_bash) change only their conversation's own sandbox, so
// they run at once unless the conversation read outside text and its
// sandbox has a network; a session with the web network reads outside
// text itself.
func (h *Host) approvalPolicy(cfg *config.Config) runs.ApprovalPolicy {
	return runs.ApprovalPolicy{
		By:     cfg.Approvals.By,
		Auto:   cfg.Approvals.Change == "auto",
		Expire: time.Duration(cfg.Approvals.ExpireMinutes) * time.Minute,
		SessionNetwork: func(ctx context.Context, principal, session string) string {
			if h.sessions == nil || h.sessions.svc == nil {
				return ""
			}
			se, err := h.sessions.svc.Get(ctx, principal, session)
			if err != nil {
				return ""
			}
			return se.Network
		},
		InSandbox: func(tool *tools.Tool) bool {
			_, ok := sessions.Language(tool.Run)
			return ok
		},
	}
}
