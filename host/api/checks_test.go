package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
)

// heldCheck is a Checker whose checks of tools named "slow…" wait until
// it is let go, as a python kind's check waits for its sandbox; the other
// checks pass at once.
type heldCheck struct {
	mu      sync.Mutex
	waiting int
	release chan struct{}
}

func (c *heldCheck) check(ctx context.Context, def config.Tool) (*tools.Tool, error) {
	if strings.HasPrefix(def.Name, "slow") {
		c.mu.Lock()
		c.waiting++
		c.mu.Unlock()
		select {
		case <-c.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return fakeCheck(ctx, def)
}

func (c *heldCheck) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// checkOnce POSTs a python tool's definition to /api/v1/tools/check, giving
// up after a few seconds: a check that would wait for a place is a
// failure, not a hang.
func checkOnce(t *testing.T, h *testHost, token, name string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	def := fmt.Sprintf("name = %q\ndescription = \"x\"\n[run]\ntype = \"python\"\ncode = \"print(1)\"\n", name)
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/api/v1/tools/check", strings.NewReader(def))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, map[string]any{"transport": err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// TestChecksHoldPlacesLikeRuns: an editor that fires more concurrent
// checks than its max_running gets too_many_runs (429) for the excess;
// another token's checks and calls go on; once the checks end, the
// places are free again.
func TestChecksHoldPlacesLikeRuns(t *testing.T) {
	hc := &heldCheck{release: make(chan struct{})}
	h := newTestHost(t, Options{Check: hc.check, Tokens: tokens("ed", "editor", "eve", "editor")})
	h.runs.SetCallers(func(p string) runs.Caller {
		return runs.Caller{MaxRunning: 2, Who: fmt.Sprintf("the token %q", p), Setting: "its max_running"}
	})
	var wg sync.WaitGroup
	held := make([]int, 2)
	for i := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i], _ = checkOnce(t, h, "ed-token", fmt.Sprintf("slow%d", i))
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); hc.held() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the two checks never both waited: %d held, %d places", hc.held(), h.runs.Going("ed"))
		}
	}
	for i := range 3 {
		status, body := checkOnce(t, h, "ed-token", fmt.Sprintf("slow%d", 10+i))
		if status != http.StatusTooManyRequests || errCode(body) != "too_many_runs" {
			t.Errorf("a check past max_running: %d %v", status, body)
		}
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`); status != http.StatusTooManyRequests || errCode(body) != "too_many_runs" {
		t.Errorf("a call while the checks hold the places: %d %v", status, body)
	}
	if status, body := checkOnce(t, h, "eve-token", "quick"); status != 200 {
		t.Errorf("another token's check: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "eve-token", `{"n":1}`); status != 200 {
		t.Errorf("another token's call: %d %v", status, body)
	}
	close(hc.release)
	wg.Wait()
	if held[0] != 200 || held[1] != 200 {
		t.Errorf("the held checks ended %v", held)
	}
	if g := h.runs.Going("ed"); g != 0 {
		t.Errorf("ed holds %d places after its checks", g)
	}
	if status, body := checkOnce(t, h, "ed-token", "quick"); status != 200 {
		t.Errorf("a check once the places are free: %d %v", status, body)
	}
}

// TestChecksCountAgainstTheBudget: each check counts as a run against
// runs_per_hour; past it a check is refused with budget (429), saying it
// was the check, and another token's checks go on.
func TestChecksCountAgainstTheBudget(t *testing.T) {
	h := newTestHost(t, Options{Check: fakeCheck, Tokens: tokens("ed", "editor", "eve", "editor")})
	h.runs.SetBudgets(func(p string) runs.Budget {
		return runs.Budget{RunsPerHour: 2, Who: fmt.Sprintf("the token %q", p), RunsSetting: "its runs_per_hour"}
	})
	for range 2 {
		if status, body := checkOnce(t, h, "ed-token", "quick"); status != 200 {
			t.Fatalf("a check under the budget: %d %v", status, body)
		}
	}
	status, body := checkOnce(t, h, "ed-token", "quick")
	e, _ := body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if status != http.StatusTooManyRequests || errCode(body) != "budget" || !strings.Contains(msg, "the check of quick was refused") {
		t.Errorf("a check past the budget: %d %v", status, body)
	}
	if status, body, _ := do(t, h, "POST", "/api/v1/tools/lines/call", "ed-token", `{"n":1}`); status != http.StatusTooManyRequests || errCode(body) != "budget" {
		t.Errorf("a call after the checks used the budget: %d %v", status, body)
	}
	if status, body := checkOnce(t, h, "eve-token", "quick"); status != 200 {
		t.Errorf("another token's check: %d %v", status, body)
	}
}

// TestAFloodOfRefusalsIsPaced: a token refused again and again, faster
// than its pace, gets each refusal (the right one, 429 budget) only after
// its turn, counted as paced; another token's refusal within its own pace
// is written at once.
func TestAFloodOfRefusalsIsPaced(t *testing.T) {
	h := newTestHost(t, Options{Check: fakeCheck, Tokens: tokens("ed", "editor", "eve", "editor")})
	h.api.pace.rate, h.api.pace.burst = 10, 5
	h.runs.SetBudgets(func(p string) runs.Budget {
		return runs.Budget{RunsPerHour: 1, Who: fmt.Sprintf("the token %q", p), RunsSetting: "its runs_per_hour"}
	})
	for _, token := range []string{"ed-token", "eve-token"} {
		if status, body := checkOnce(t, h, token, "quick"); status != 200 {
			t.Fatalf("a check under the budget: %d %v", status, body)
		}
	}
	for i := range 20 {
		if status, body := checkOnce(t, h, "ed-token", "quick"); status != http.StatusTooManyRequests || errCode(body) != "budget" {
			t.Fatalf("refusal %d of the flood: %d %v, want 429 budget", i, status, body)
		}
	}
	paced := h.api.PacedRefusals()
	if paced == 0 {
		t.Fatal("20 refusals at once, past a burst of 5, and none waited for its turn")
	}
	if status, body := checkOnce(t, h, "eve-token", "quick"); status != http.StatusTooManyRequests || errCode(body) != "budget" {
		t.Fatalf("eve's refusal: %d %v", status, body)
	}
	if h.api.PacedRefusals() != paced {
		t.Error("another token's first refusal waited for the flooding token's pace")
	}
}
