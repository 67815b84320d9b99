package host

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
)

// approvalPolicy is [approvals] for the dispatcher. The session tools
// (run_python, run_bash) change only their conversation's own sandbox, so
// they run at once unless the conversation read outside text and its
// sandbox has a network; a session whose sandbox reaches the network
// reads outside text itself, and so does a tool whose kind says so.
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
			kind, _ := h.kindInfo(tool.Kind)
			_, ok := sessions.Language(kind, tool.Run)
			return ok
		},
		OutsideText:  h.outsideText,
		TaintUploads: cfg.Approvals.TaintUploads,
	}
}

// outsideText says whether a run of the tool brings outside text, as its
// kind said in Describe. A plugin built before kinds said
// (sdk.OutsideTextUnsaid) counts as one that brings it: the host can't
// tell what its tools read, and the cost of a wrong yes is a question to
// a person, while a wrong no lets a page's instructions reach a change
// call unasked. A kind that is not running runs nothing.
func (h *Host) outsideText(tool *tools.Tool) bool {
	p, ok := h.plugins.Kind(tool.Kind)
	if !ok {
		return false
	}
	return bringsOutsideText(p.Info(), tool.Run)
}

// bringsOutsideText says whether a run of a tool with the run table run
// brings outside text, by its kind's word (info): always, never, or when
// the run table's setting info.OutsideTextWhen is true. A run table that
// can't be read counts as one that brings it.
func bringsOutsideText(info sdk.Info, run json.RawMessage) bool {
	if info.OutsideText != sdk.OutsideTextNone {
		return true
	}
	if info.OutsideTextWhen == "" {
		return false
	}
	var table map[string]json.RawMessage
	if err := json.Unmarshal(run, &table); err != nil {
		return true
	}
	v, ok := table[info.OutsideTextWhen]
	return ok && string(v) != "false" && string(v) != "null"
}
