package main

import (
	"context"
	"fmt"

	"github.com/toolhost/toolhost/client"
)

// typeApprovalRequired is the event of a run that waits for a person.
const typeApprovalRequired = "approval_required"

// approve says the call waits; answering it from here follows.
func (c *chat) approve(_ context.Context, e client.Event) {
	fmt.Fprintf(c.out, "[%s waits for approval: approve it in toolhost's web UI]\n", e.Tool)
}
