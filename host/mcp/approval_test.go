package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/host/runs"
)

// A run that waits for approval answers at once, naming the approval and
// the run, and says where to decide it and read the result.
func TestAwaitingApproval(t *testing.T) {
	for _, ev := range []string{
		`{"type":"approval_required","approval":"a7","tool":"wipe"}`,
	} {
		var e runs.Event
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatal(err)
		}
		res := awaiting("r1", "wipe", e)
		text := res.Content[0].(interface{ MarshalJSON() ([]byte, error) })
		b, _ := text.MarshalJSON()
		if !res.IsError || !strings.Contains(string(b), "awaits approval a7") || !strings.Contains(string(b), "/api/v1/runs/r1") {
			t.Errorf("%s: %v %s", ev, res.IsError, b)
		}
	}
}
