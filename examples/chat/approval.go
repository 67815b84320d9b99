package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"

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
	if err := c.sendDecision(ctx, e.Approval, decision); err != nil {
		fmt.Fprintf(c.out, "[the answer could not be sent: %v]\n", err)
	}
}

// sendDecision sends {"type":"approve","approval":…,"decision":…} on a
// websocket of its own (the client package has no way to send it yet)
// and waits for the host's "decided".
func (c *chat) sendDecision(ctx context.Context, approval, decision string) error {
	h := http.Header{}
	if c.o.Token != "" {
		h.Set("Authorization", "Bearer "+c.o.Token)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, wsURL(c.o.Toolhost), h)
	if err != nil {
		return fmt.Errorf("can't reach toolhost at %s: %w", c.o.Toolhost, err)
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()
	m := client.Message{Type: "approve", ID: "approve-1", Approval: approval, Decision: decision}
	if err := ws.WriteJSON(m); err != nil {
		return fmt.Errorf("can't send the answer to toolhost: %w", err)
	}
	for {
		var reply struct {
			Type  string        `json:"type"`
			ID    string        `json:"id"`
			Error *client.Error `json:"error"`
		}
		if err := ws.ReadJSON(&reply); err != nil {
			return fmt.Errorf("toolhost did not confirm the answer: %w", err)
		}
		switch {
		case reply.ID != m.ID:
		case reply.Type == "decided":
			return nil
		case reply.Error != nil:
			return reply.Error
		}
	}
}

// wsURL is toolhost's websocket URL, from its websocket or base URL.
func wsURL(addr string) string {
	addr = strings.TrimSuffix(strings.TrimSuffix(addr, "/"), "/api/v1/ws")
	if rest, ok := strings.CutPrefix(addr, "http"); ok {
		addr = "ws" + rest
	}
	return addr + "/api/v1/ws"
}
