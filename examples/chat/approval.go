package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost/client"
)

// approve asks on the terminal whether a waiting call may run, and sends
// the answer to toolhost.
func (c *chat) approve(ctx context.Context, e client.Event) {
	fmt.Fprintf(c.out, "[approval needed: %s %s", e.Tool, e.Args)
	if e.Why != "" {
		fmt.Fprintf(c.out, " (%s)", e.Why)
	}
	fmt.Fprint(c.out, "]\nrun it? [y/N] ")
	decision := "decline"
	if line, _ := c.readLine(ctx); strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y") {
		decision = "approve"
	}
	if _, err := c.conn.Approve(ctx, e.Approval, decision); err != nil {
		fmt.Fprintf(c.out, "[the answer could not be sent: %v]\n", err)
	}
}
