package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// budgetToken is the token of multihostConfig with a budget of multihostBudget runs an hour.
const (
	budgetToken     = "bud-R4w-token-for-tests"
	multihostBudget = 7
)

// multihostConfig is tokensConfig, a token with a budget, and [store] at url: what each host of
// TestHostsOnOnePostgreSQL shares.
func multihostConfig(url string) string {
	return tokensConfig() + fmt.Sprintf(`
[[tokens]]
name = "bud"
sha256 = %q
role = "editor"
runs_per_hour = %d

[store]
url = %q
`, sha(budgetToken), multihostBudget, url)
}

// TestHostsOnOnePostgreSQL runs three hosts on one real PostgreSQL behind a real HAProxy
// (examples/haproxy/haproxy.cfg), each with its own port and state_dir: a budget of N runs an
// hour allows exactly N across the hosts under concurrent calls through HAProxy; one
// idempotency key sent to the three hosts at once runs once, and a retry through HAProxy gets
// that run's answer; an approval asked on one host is listed and decided on another, once; while PostgreSQL is stopped every host's /healthz says so (HAProxy takes
// them out) and a call gets store_unavailable, and once it is back they serve again, with no
// restart.
func TestHostsOnOnePostgreSQL(t *testing.T) {
	bin := haproxyBinary(t)
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), slow(5*time.Minute))
	defer cancel()
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := hostSpec{
		Config: multihostConfig(url),
		Tools: map[string]string{
			"say.toml":      echoTool("say", 1, 20),
			"slow_say.toml": echoTool("slow_say", 1, 1500),
			"note.toml":     strings.Replace(echoTool("note", 1, 20), "[[params]]", "effect = \"change\"\n[[params]]", 1),
		},
	}
	hosts := []*Host{startHost(t, spec), startHost(t, spec), startHost(t, spec)}
	front := freePort(t)
	hp := startHAProxy(t, bin, front, hosts)

	t.Run("a budget is spent once across the hosts", func(t *testing.T) {
		const calls = 3 * multihostBudget
		codes := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				status, body := toolCall(ctx, front, budgetToken, "say", fmt.Sprintf(`{"p00":"call %d"}`, i), "")
				mu.Lock()
				defer mu.Unlock()
				codes[fmt.Sprintf("%d %s", status, body.code())]++
			})
		}
		wg.Wait()
		if codes["200 "] != multihostBudget || codes["429 budget"] != calls-multihostBudget {
			t.Errorf("%d calls through HAProxy with a budget of %d runs an hour: %v; want %d ran (200) and %d refused (429 budget)",
				calls, multihostBudget, codes, multihostBudget, calls-multihostBudget)
		}
	})

	t.Run("an idempotency key runs once across the hosts", func(t *testing.T) {
		const key = "msg-7-tool-0"
		type answer struct {
			status int
			body   callAnswer
		}
		answers := make([]answer, len(hosts))
		var wg sync.WaitGroup
		for i, h := range hosts {
			wg.Go(func() {
				status, body := toolCall(ctx, h.Addr, editorToken, "slow_say", `{"p00":"once"}`, key)
				answers[i] = answer{status, body}
			})
		}
		wg.Wait()
		runs := map[string]bool{}
		for i, a := range answers {
			switch {
			case a.status == http.StatusOK:
				runs[a.body.Run] = true
			case a.status == http.StatusConflict && a.body.code() == "in_progress":
				// Its run was going on another host, which holds its lease: the answer names it.
				named := false
				for j, other := range hosts {
					named = named || j != i && strings.Contains(string(a.body.raw), other.Addr)
				}
				if !named {
					t.Errorf("the key sent to host%d: in_progress %s names no other host's address", i+1, a.body.raw)
				}
			default:
				t.Errorf("the key sent to host%d: %d %s; want 200, or 409 in_progress while it ran on another host", i+1, a.status, a.body.raw)
			}
		}
		if len(runs) != 1 {
			t.Fatalf("one key sent to three hosts at once ran %d times (runs %v); want once", len(runs), runs)
		}
		status, retry := toolCall(ctx, front, editorToken, "slow_say", `{"p00":"once"}`, key)
		if status != http.StatusOK || !runs[retry.Run] {
			t.Errorf("a retry through HAProxy once the run ended: %d %s; want 200 and the run of the first answer (%v)", status, retry.raw, runs)
		}
	})

	t.Run("an approval asked on one host is decided on another", func(t *testing.T) {
		// An HTTP call that must be approved answers 202 at once, naming its run.
		status, asked := toolCall(ctx, hosts[0].Addr, editorToken, "note", `{"p00":"approved elsewhere"}`, "")
		if status != http.StatusAccepted || asked.Run == "" {
			t.Fatalf("a change call on host1: %d %s; want 202 naming its run, waiting for approval", status, asked.raw)
		}
		var id string
		for deadline := time.Now().Add(slow(30 * time.Second)); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			_, list := request(t, "GET", hosts[2].URL("/api/v1/approvals"), adminToken, "")
			if pending, _ := list["approvals"].([]any); len(pending) == 1 {
				id, _ = pending[0].(map[string]any)["id"].(string)
			}
		}
		if id == "" {
			t.Fatalf("the approval asked on host1 was never listed on host3")
		}
		if code, body := request(t, "POST", hosts[2].URL("/api/v1/approvals/"+id), adminToken, `{"decision":"approve"}`); code != http.StatusOK {
			t.Fatalf("approving on host3: %d %v", code, body)
		}
		if code, body := request(t, "POST", hosts[1].URL("/api/v1/approvals/"+id), adminToken, `{"decision":"decline"}`); code != http.StatusConflict {
			t.Errorf("declining on host2 what host3 approved: %d %v; want 409 already_decided", code, body)
		}
		var run map[string]any
		for deadline := time.Now().Add(slow(30 * time.Second)); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if _, run = request(t, "GET", hosts[0].URL("/api/v1/runs/"+asked.Run), editorToken, ""); run["done"] == true {
				break
			}
		}
		if run["done"] != true || !strings.Contains(fmt.Sprint(run["result"]), "approved elsewhere") {
			t.Errorf("the run on host1, approved on host3: %v; want it done with its result", run)
		}
	})

	t.Run("PostgreSQL stopped, then back", func(t *testing.T) {
		if err := pg.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for i, h := range hosts {
			hp.waitStatus(t, fmt.Sprintf("host%d", i+1), "DOWN", h)
			code, health := request(t, "GET", h.URL("/healthz"), "", "")
			if code != http.StatusServiceUnavailable || health["store"] != "unavailable" {
				t.Errorf("host%d's /healthz with its database stopped: %d %v; want 503, store unavailable", i+1, code, health)
			}
		}
		status, body := toolCall(ctx, hosts[0].Addr, editorToken, "say", `{"p00":"while down"}`, "")
		if status != http.StatusServiceUnavailable || body.code() != "store_unavailable" {
			t.Errorf("a call with the database stopped: %d %s; want 503 store_unavailable", status, body.raw)
		}
		if err := pg.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		for i, h := range hosts {
			hp.waitStatus(t, fmt.Sprintf("host%d", i+1), "UP", h)
		}
		if status, body := toolCall(ctx, front, editorToken, "say", `{"p00":"back"}`, ""); status != http.StatusOK {
			t.Errorf("a call through HAProxy once the database is back: %d %s; want 200", status, body.raw)
		}
	})
}

// callAnswer is the JSON answer of POST /api/v1/tools/{name}/call.
type callAnswer struct {
	Run   string `json:"run"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
	raw []byte
}

func (a callAnswer) code() string {
	if a.Error == nil {
		return ""
	}
	return a.Error.Code
}

// toolCall calls tool at addr over HTTP with token and args, and key as its Idempotency-Key
// when not "".
func toolCall(ctx context.Context, addr, token, tool, args, key string) (int, callAnswer) {
	var a callAnswer
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/api/v1/tools/"+tool+"/call", bytes.NewReader([]byte(args)))
	if err != nil {
		a.raw = []byte(err.Error())
		return 0, a
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.raw = []byte(err.Error())
		return 0, a
	}
	defer resp.Body.Close()
	a.raw, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(a.raw, &a)
	return resp.StatusCode, a
}
