package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/sessions"
)

// apiError is the error object of an answer's body.
func apiError(t *testing.T, body []byte) (code, message string) {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("not an error body: %s", body)
	}
	return b.Error.Code, b.Error.Message
}

// TestSessionCapsThroughTheAPI: a PUT or PATCH that would make a session
// past its principal's cap is 429 too_many_sessions with the sentence
// saying which cap, and leaves nothing behind: no record, no workspace,
// nothing read. The principal's own sessions keep working.
func TestSessionCapsThroughTheAPI(t *testing.T) {
	h := newSessionsHost(t, func(c *config.SessionsConfig) { c.MaxSessionsPerPrincipal = 1 })
	if status, body, _ := raw(t, h.testHost, "PUT", "/api/v1/sessions/conv-1/files/a.txt", "ed-token", strings.NewReader("a")); status != 200 {
		t.Fatalf("the first upload: %d %s", status, body)
	}
	writes := h.back.Writes()
	want := `the session "conv-2" can't be started: the token "ed" already has 1 sessions, the most one token may have ` +
		`([sessions] max_sessions_per_principal in the config); delete one it no longer needs (DELETE /api/v1/sessions/ID), ` +
		`or wait for one to go unused for 24 hours`
	for _, e := range []struct{ method, path, body string }{
		{"PUT", "/api/v1/sessions/conv-2/files/a.txt", strings.Repeat("b", 1<<20)},
		{"PATCH", "/api/v1/sessions/conv-2", `{"network":"web"}`},
	} {
		status, body, hdr := raw(t, h.testHost, e.method, e.path, "ed-token", strings.NewReader(e.body))
		code, msg := apiError(t, body)
		if status != 429 || code != "too_many_sessions" || msg != want || hdr.Get("Retry-After") != "" {
			t.Errorf("%s %s: %d %s (Retry-After %q)", e.method, e.path, status, body, hdr.Get("Retry-After"))
		}
	}
	if h.back.Writes() != writes || h.back.Has(sessions.BackendID("ed", "conv-2")) {
		t.Error("a refused upload reached the backend")
	}
	if status, _, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/conv-2", "ed-token", nil); status != 404 {
		t.Errorf("the refused session: %d", status)
	}
	if _, list, _ := do(t, h.testHost, "GET", "/api/v1/sessions", "ed-token", ""); len(list["sessions"].([]any)) != 1 {
		t.Errorf("ed's sessions: %v", list)
	}
	if status, body, _ := raw(t, h.testHost, "PUT", "/api/v1/sessions/conv-1/files/b.txt", "ed-token", strings.NewReader("b")); status != 200 {
		t.Errorf("ed's own session at his cap: %d %s", status, body)
	}
	// Another token has its own cap.
	if status, body, _ := raw(t, h.testHost, "PUT", "/api/v1/sessions/conv-2/files/a.txt", "eve-token", strings.NewReader("a")); status != 200 {
		t.Errorf("eve's first session: %d %s", status, body)
	}
	if got := h.svc.Refusals()[sessions.CapSessionsPerPrincipal]; got != 2 {
		t.Errorf("refusals counted: %d", got)
	}
}

// TestTransferCapsThroughTheAPI: while a caller's upload holds its one
// place, its next upload and download are 429 too_many_transfers with
// Retry-After at once, and make nothing; listing files is no transfer;
// another token has its own places until the host's are taken; once the
// upload ends, its place is free again.
func TestTransferCapsThroughTheAPI(t *testing.T) {
	h := newSessionsHost(t, func(c *config.SessionsConfig) { c.MaxTransfersPerPrincipal, c.MaxTransfers = 1, 2 })
	if _, err := h.svc.WriteFile(context.Background(), "ed", "conv", "a.txt", strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	entered, proceed := make(chan struct{}), make(chan struct{})
	h.back.BeforeTransfer = func(_, path string) {
		if path == "slow.bin" {
			entered <- struct{}{}
			<-proceed
		}
	}
	slow := make(chan int, 2)
	upload := func(token, session string) {
		status, _, _ := raw(t, h.testHost, "PUT", "/api/v1/sessions/"+session+"/files/slow.bin", token, strings.NewReader("slow"))
		slow <- status
	}
	// started waits for an upload to hold its place in the backend, or
	// fails the test when it ended before.
	started := func() {
		t.Helper()
		select {
		case <-entered:
		case status := <-slow:
			t.Fatalf("a slow upload ended before it wrote: %d", status)
		}
	}
	go upload("ed-token", "conv")
	started()

	wantEd := `the token "ed" already has 1 file transfers going, the most one token may have at once ` +
		`([sessions] max_transfers_per_principal in the config); try again once one has finished`
	for _, e := range []struct{ method, path string }{
		{"PUT", "/api/v1/sessions/conv/files/b.txt"},
		{"GET", "/api/v1/sessions/conv/files/a.txt"},
		{"PUT", "/api/v1/sessions/new/files/b.txt"},
	} {
		status, body, hdr := raw(t, h.testHost, e.method, e.path, "ed-token", strings.NewReader("b"))
		code, msg := apiError(t, body)
		if status != 429 || code != "too_many_transfers" || msg != wantEd || hdr.Get("Retry-After") != "1" {
			t.Errorf("%s %s while ed's upload goes on: %d %s (Retry-After %q)", e.method, e.path, status, body, hdr.Get("Retry-After"))
		}
	}
	if h.back.Has(sessions.BackendID("ed", "new")) {
		t.Error("a refused upload made its session's workspace")
	}
	if status, _, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/new", "ed-token", nil); status != 404 {
		t.Errorf("a refused upload made its session: %d", status)
	}
	if status, body, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/conv/files", "ed-token", nil); status != 200 {
		t.Errorf("listing files while ed's upload goes on: %d %s", status, body)
	}

	// eve takes the host's second place; then the host is full for ada.
	go upload("eve-token", "other")
	started()
	status, body, hdr := raw(t, h.testHost, "GET", "/api/v1/sessions/conv/files/a.txt?principal=ed", "ada-token", nil)
	code, msg := apiError(t, body)
	wantHost := `this host already has 2 file transfers going, the most it allows at once ([sessions] max_transfers in the config); try again in a moment`
	if status != 429 || code != "too_many_transfers" || msg != wantHost || hdr.Get("Retry-After") != "1" {
		t.Errorf("ada's download with the host's places taken: %d %s (Retry-After %q)", status, body, hdr.Get("Retry-After"))
	}

	close(proceed)
	for range 2 {
		if status := <-slow; status != 200 {
			t.Errorf("a slow upload: %d", status)
		}
	}
	status, data, _ := raw(t, h.testHost, "GET", "/api/v1/sessions/conv/files/a.txt", "ed-token", nil)
	if status != 200 || string(data) != "a" {
		t.Errorf("ed's download once his upload ended: %d %s", status, data)
	}
	if mine, all := h.svc.Transfers("ed"); mine != 0 || all != 0 {
		t.Errorf("places still taken: ed %d, all %d", mine, all)
	}
	got := h.svc.Refusals()
	if got[sessions.CapTransfersPerPrincipal] != 3 || got[sessions.CapTransfers] != 1 {
		t.Errorf("refusals counted: %v", got)
	}
}

// TestAdminStopsAndDeletesAPrincipalsSessions: an admin lists one
// principal's sessions, stops the sandbox of one and deletes another with
// ?principal=; an editor naming another principal gets the answer of a
// session that is not there, and a viewer is forbidden.
func TestAdminStopsAndDeletesAPrincipalsSessions(t *testing.T) {
	h := newSessionsHost(t)
	ctx := context.Background()
	for _, s := range []string{"c1", "c2"} {
		if _, err := h.svc.WriteFile(ctx, "ed", s, "a.txt", strings.NewReader("a")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.svc.WriteFile(ctx, "eve", "c1", "a.txt", strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	_, list, _ := do(t, h.testHost, "GET", "/api/v1/sessions?principal=ed", "ada-token", "")
	got, _ := list["sessions"].([]any)
	if len(got) != 2 || got[0].(map[string]any)["principal"] != "ed" || got[1].(map[string]any)["principal"] != "ed" {
		t.Errorf("ada's listing of ed's sessions: %v", list)
	}

	// eve naming ed, or naming nothing of hers: the same not_found.
	status, body, _ := raw(t, h.testHost, "POST", "/api/v1/sessions/c2/stop?principal=ed", "eve-token", nil)
	mStatus, mBody, _ := raw(t, h.testHost, "POST", "/api/v1/sessions/c2/stop", "eve-token", nil)
	if status != 404 || mStatus != 404 || string(body) != string(mBody) {
		t.Errorf("eve stopping ed's c2: %d %s; her own missing c2: %d %s", status, body, mStatus, mBody)
	}
	if status, body, _ := raw(t, h.testHost, "POST", "/api/v1/sessions/c1/stop?principal=ed", "vic-token", nil); status != 403 {
		t.Errorf("vic stopping: %d %s", status, body)
	}
	if n := len(h.back.Stopped()); n != 0 {
		t.Fatalf("refused stops stopped %v", h.back.Stopped())
	}

	if status, body, _ := raw(t, h.testHost, "POST", "/api/v1/sessions/c1/stop?principal=ed", "ada-token", nil); status != 204 {
		t.Fatalf("ada stopping ed's c1: %d %s", status, body)
	}
	if stopped := h.back.Stopped(); len(stopped) != 1 || stopped[0] != sessions.BackendID("ed", "c1") {
		t.Errorf("stopped %v, want ed's c1 only", stopped)
	}
	if data, err := h.back.ReadFile(ctx, sessions.BackendID("ed", "c1"), "a.txt", 0); err != nil || string(data) != "a" {
		t.Errorf("ed's files after the stop: %q, %v", data, err)
	}
	if status, _, _ := raw(t, h.testHost, "POST", "/api/v1/sessions/c1/stop", "ed-token", nil); status != 204 {
		t.Errorf("ed stopping his own c1: %d", status)
	}

	if status, body, _ := raw(t, h.testHost, "DELETE", "/api/v1/sessions/c2?principal=ed", "eve-token", nil); status != 404 {
		t.Errorf("eve deleting ed's c2: %d %s", status, body)
	}
	if status, body, _ := raw(t, h.testHost, "DELETE", "/api/v1/sessions/c2?principal=ed", "ada-token", nil); status != 204 {
		t.Fatalf("ada deleting ed's c2: %d %s", status, body)
	}
	_, list, _ = do(t, h.testHost, "GET", "/api/v1/sessions?principal=ed", "ada-token", "")
	if got, _ := list["sessions"].([]any); len(got) != 1 || got[0].(map[string]any)["session"] != "c1" {
		t.Errorf("ed's sessions after ada's delete: %v", list)
	}
	if _, err := h.svc.Get(ctx, "eve", "c1"); err != nil {
		t.Errorf("eve's c1 after ada's work on ed's: %v", err)
	}
}
