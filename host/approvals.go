package host

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/runs"
)

// approvalPolicy is [approvals] for the dispatcher: a session with the web
// network reads outside text, which taints it.
func (h *Host) approvalPolicy(cfg *config.Config) runs.ApprovalPolicy {
	return runs.ApprovalPolicy{
		By:     cfg.Approvals.By,
		Auto:   cfg.Approvals.Change == "auto",
		Expire: time.Duration(cfg.Approvals.ExpireMinutes) * time.Minute,
		WebSession: func(ctx context.Context, principal, session string) bool {
			if h.sessions == nil || h.sessions.svc == nil {
				return false
			}
			se, err := h.sessions.svc.Get(ctx, principal, session)
			return err == nil && se.Network == config.SessionNetworkWeb
		},
	}
}
