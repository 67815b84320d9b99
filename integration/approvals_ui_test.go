package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// approvalsUI is what the approvals panel shows, read in the page.
type approvalsUI struct {
	Visible bool     `json:"visible"`
	Items   []string `json:"items"` // approval ids
	Args    []string `json:"args"`
	Tools   []string `json:"tools"`
	Why     []string `json:"why"`
	Imgs    int      `json:"imgs"`
}

const readApprovals = `(() => {
  const root = document.getElementById("approvals");
  const items = [...root.querySelectorAll("li.approval")];
  return {
    visible: !root.hidden,
    items: items.map((li) => li.dataset.approval),
    args: items.map((li) => li.querySelector(".approval-args").textContent),
    tools: items.map((li) => li.querySelector(".approval-tool").textContent),
    why: items.map((li) => li.querySelector(".approval-why").textContent),
    imgs: root.querySelectorAll("img").length,
  };
})()`

// TestApprovalsPanelInTheBrowser: a change call made over HTTP waits; the
// caller's page shows it with its exact arguments (markup in them shown
// as text); Approve makes the run finish with its result; the panel
// empties. A decline from the page ends the next run declined.
func TestApprovalsPanelInTheBrowser(t *testing.T) {
	h, posted := approvalsHost(t, "")
	ctx := browser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	read := func() approvalsUI {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[approvalsUI](readApprovals))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return s
	}
	waitFor := func(what string, ok func(approvalsUI) bool) approvalsUI {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			s := read()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed %s; it shows %+v", what, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	do("signing in", chromedp.Navigate(h.URL("/")), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), editorToken), chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view")))
	if s := read(); s.Visible {
		t.Errorf("the panel shows with nothing waiting: %+v", s)
	}

	text := `<img src=x onerror="document.title='owned'"> and "quotes"`
	body, _ := json.Marshal(map[string]any{"text": text})
	code, answer := request(t, "POST", h.URL("/api/v1/tools/post_note/call"), editorToken, string(body))
	a, _ := answer["approval"].(map[string]any)
	run, _ := answer["run"].(string)
	if code != 202 || a == nil {
		t.Fatalf("call: %d %v", code, answer)
	}
	s := waitFor("the approval", func(s approvalsUI) bool { return s.Visible && len(s.Items) == 1 })
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{"text": text})
	wantArgs := strings.TrimSuffix(buf.String(), "\n")
	if s.Items[0] != a["id"] || s.Tools[0] != "post_note" || s.Args[0] != wantArgs || s.Imgs != 0 || !strings.Contains(s.Why[0], "post_note changes things") {
		t.Fatalf("the panel shows %+v; want args\n%s", s, wantArgs)
	}
	if err := os.MkdirAll("artifacts", 0o755); err == nil {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join("artifacts", "approvals.png"), png, 0o644)
		}
	}
	if posted.Load() != 0 {
		t.Fatal("posted before the approval")
	}
	do("approving", chromedp.Click(chromedp.CSS("#approvals li.approval .approval-approve")))
	rec := waitRun(t, h, run)
	if res, _ := json.Marshal(rec["result"]); string(res) != string(mustJSON(map[string]any{"text": text})) || posted.Load() != 1 {
		t.Fatalf("the run after Approve: %v, posted %d", rec, posted.Load())
	}
	waitFor("the panel emptied", func(s approvalsUI) bool { return !s.Visible && len(s.Items) == 0 })
	if title, _ := chromedp.Run(ctx, chromedp.Title()); title == "owned" {
		t.Fatal("markup in the arguments ran in the page")
	}

	// Decline from the page.
	_, answer = request(t, "POST", h.URL("/api/v1/tools/post_note/call"), editorToken, `{"text":"no"}`)
	run, _ = answer["run"].(string)
	waitFor("the second approval", func(s approvalsUI) bool { return len(s.Items) == 1 })
	do("declining", chromedp.Click(chromedp.CSS("#approvals li.approval .approval-decline")))
	rec = waitRun(t, h, run)
	if e, _ := rec["error"].(map[string]any); e["code"] != "declined" || posted.Load() != 1 {
		t.Fatalf("the run after Decline: %v", rec)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestApproverOnlyTokenApprovesInTheBrowser: under [approvals] by =
// "approvers", a person signed in with an approver-only token (role
// viewer, approver = true) sees the editor's waiting call in the panel and
// approves it there; the note is posted once.
func TestApproverOnlyTokenApprovesInTheBrowser(t *testing.T) {
	const approverToken = "apr-Ui7-token-for-tests"
	h, posted := approvalsHost(t, fmt.Sprintf("\n[approvals]\nby = \"approvers\"\n\n[[tokens]]\nname = \"alice\"\nsha256 = %q\nrole = \"viewer\"\napprover = true\n", sha(approverToken)))
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(h.URL("/")), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), approverToken), chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view"))); err != nil {
		t.Fatalf("signing in: %v", err)
	}
	code, answer := request(t, "POST", h.URL("/api/v1/tools/post_note/call"), editorToken, `{"text":"by alice"}`)
	a, _ := answer["approval"].(map[string]any)
	run, _ := answer["run"].(string)
	if code != 202 || a == nil {
		t.Fatalf("call: %d %v", code, answer)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[approvalsUI](readApprovals))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		if s.Visible && len(s.Items) == 1 && s.Items[0] == a["id"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approver's panel never showed the call; it shows %+v", s)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#approvals li.approval .approval-approve"))); err != nil {
		t.Fatalf("approving: %v", err)
	}
	rec := waitRun(t, h, run)
	if res, _ := json.Marshal(rec["result"]); string(res) != `{"text":"by alice"}` || posted.Load() != 1 {
		t.Fatalf("the run after the approver's Approve: %v, posted %d", rec, posted.Load())
	}
}
