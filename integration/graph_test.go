package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/host/model/modeltest"
	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
)

// modelIdle is longer than every idle timeout between the host, its
// plugins and the model: the host's HTTP client keeps idle connections
// 90 s by default, go-plugin's broker forgets an offer after 5 s.
const modelIdle = 65 * time.Second

// graphTools are the tools of a graph calling an http tool, a python tool
// and the model, a prompt tool, and a graph that calls itself.
func graphTools(itemURL string) map[string]string {
	return map[string]string{
		"get_item.toml": fmt.Sprintf(`name = "get_item"
description = "Read an item."
[[params]]
name = "id"
kind = "text"
required = true
[run]
type = "http"
url = "%s/items/{{id}}"
`, itemURL),
		"count_words.toml": `name = "count_words"
description = "Count the words of a text."
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "python"
code = '''
def run(text):
    print("counting in a sandbox")
    return len(text.split())
'''
`,
		"slow_words.toml": `name = "slow_words"
description = "Count the words of a text, slowly."
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "python"
seconds = 60
code = '''
import time
def run(text):
    print("started", flush=True)
    time.sleep(50)
    return 0
'''
`,
		"brief.toml": `name = "brief"
description = "Summarise a text."
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "prompt"
system = "Be brief."
prompt = "Summarise: {{text}}"
`,
		"item_report.toml": `name = "item_report"
description = "Read an item, count its words and ask the model about it."
[[params]]
name = "id"
kind = "text"
required = true
[run]
type = "graph"
[[run.nodes]]
id = "item_id"
type = "arg"
param = "id"
[[run.nodes]]
id = "fetch"
type = "call_tool"
tool = "get_item"
args = { id = "item_id" }
[[run.nodes]]
id = "title"
type = "pick"
from = "fetch"
path = "body.title"
[[run.nodes]]
id = "count"
type = "call_tool"
tool = "count_words"
args = { text = "title" }
[[run.nodes]]
id = "question"
type = "template"
text = "{{title}} has {{count}} words"
[[run.nodes]]
id = "answer"
type = "ask_model"
prompt = "question"
[[run.nodes]]
id = "out"
type = "return"
value = "answer"
`,
		"slow_report.toml": `name = "slow_report"
description = "Counts slowly, to be cancelled."
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "graph"
[[run.nodes]]
id = "text"
type = "arg"
param = "text"
[[run.nodes]]
id = "count"
type = "call_tool"
tool = "slow_words"
args = { text = "text" }
[[run.nodes]]
id = "out"
type = "return"
value = "count"
`,
		"forever.toml": `name = "forever"
description = "Calls itself."
[run]
type = "graph"
[[run.nodes]]
id = "again"
type = "call_tool"
tool = "forever"
[[run.nodes]]
id = "out"
type = "return"
value = "again"
`,
	}
}

// exampleToolFiles are the example tools, served beside the test's own.
var exampleToolFiles = []string{"get_json.toml", "word_count.toml", "summarise.toml", "post_report.toml"}

// itemServer serves {"title": ...} for /items/{id}.
func itemServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/items/")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"title": "the item %s of four words"}`, id)
	}))
	t.Cleanup(srv.Close)
	return srv
}

type graphHost struct {
	*Host
	model  *modeltest.Server
	rt     *runsc.Runtime
	sweep  sandbox.SweepOptions
	prefix string
}

func startGraphHost(t *testing.T) *graphHost {
	t.Helper()
	_, runscBin, rootfs := sandboxBuild(t)
	model := modeltest.New(t, modeltest.Options{})
	items := itemServer(t)
	stateDir, err := os.MkdirTemp("", "thgraph")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(stateDir) })
	prefix := fmt.Sprintf("thgr%d-", os.Getpid()%10000)
	tools := graphTools(items.URL)
	for _, name := range exampleToolFiles {
		b, err := os.ReadFile(filepath.Join("../examples/tools", name))
		if err != nil {
			t.Fatal(err)
		}
		tools["example_"+name] = string(b)
	}
	h := startHost(t, hostSpec{Tools: tools, Config: fmt.Sprintf(`
[model]
base_url = %q
model = %q

[http]
allow_private = true

[python]
runsc = %q
rootfs = %q
state_dir = %q
sandbox_prefix = %q
[python.pool]
size = 0
`, model.URL, modeltest.DefaultModel, runscBin, rootfs, stateDir, prefix)})
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: runscBin, Root: filepath.Join(stateDir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	return &graphHost{Host: h, model: model, rt: rt, prefix: prefix,
		sweep: sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: stateDir}}
}

// sandboxes are the host's sandboxes that runsc still lists.
func (g *graphHost) sandboxes(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	states, err := g.rt.List(ctx)
	if err != nil {
		t.Fatalf("runsc list: %v", err)
	}
	var out []string
	for _, st := range states {
		if strings.HasPrefix(st.ID, g.prefix) {
			out = append(out, st.ID+" "+st.Status)
		}
	}
	return out
}

// reportOf calls item_report over the websocket and checks what came back:
// the nested output marked with its nodes, the model's answer streamed
// (marked "answer") before the result, and the result.
func reportOf(t *testing.T, g *graphHost, phase string) {
	t.Helper()
	ws := g.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "c1", "tool": "item_report", "args": map[string]any{"id": "7"}})
	frames := ws.UntilEnd("c1", 2*time.Minute)
	last := frames[len(frames)-1]
	question := "the item 7 of four words has 6 words"
	if last.Str("type") != "result" || last["result"] != modeltest.Echo(question) {
		t.Fatalf("%s: item_report ended with %v\nhost log:\n%s", phase, last, g.Stderr())
	}
	byNode := map[string]string{}
	answerPieces := 0
	for _, f := range frames {
		if f.Str("type") == "stdout" {
			byNode[f.Str("node")] += f.Str("data")
			if f.Str("node") == "answer" {
				answerPieces++
			}
		}
	}
	if !strings.Contains(byNode["count"], "counting in a sandbox") {
		t.Errorf("%s: the python tool's output is not marked with its node: %q", phase, byNode)
	}
	if byNode["answer"] != modeltest.Echo(question) || answerPieces < 2 {
		t.Errorf("%s: the model's answer came as %d pieces marked answer: %q", phase, answerPieces, byNode["answer"])
	}
	if byNode[""] != "" {
		t.Errorf("%s: output not marked with a node: %q", phase, byNode[""])
	}
}

// TestAGraphCallsToolsAndTheModelThroughTheHost: a graph → http + python
// + ask_model on the real host with real plugins, its nested output
// marked with node ids and the model's answer streamed; the same after
// the host sat idle longer than every idle timeout in the stack.
func TestAGraphCallsToolsAndTheModelThroughTheHost(t *testing.T) {
	g := startGraphHost(t)
	reportOf(t, g, "at once")
	if n := len(g.model.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want 1", n)
	}
	if testing.Short() {
		return
	}
	time.Sleep(modelIdle)
	reportOf(t, g, fmt.Sprintf("after %s idle", modelIdle))
}

// TestAGraphThatCallsItselfIsStopped: the depth cap stops it, and the
// error names the node and the cap.
func TestAGraphThatCallsItselfIsStopped(t *testing.T) {
	g := startGraphHost(t)
	code, body := postJSON(t, g.URL("/api/v1/tools/forever/call"), `{}`)
	e, _ := body["error"].(map[string]any)
	msg := fmt.Sprint(e["message"])
	if code == http.StatusOK || e == nil || !strings.Contains(msg, `"again"`) || !strings.Contains(msg, "deep") {
		t.Fatalf("forever = %d %v", code, body)
	}
	// The host serves on.
	reportOf(t, g, "after the recursion")
}

// TestCancellingAGraphStopsItsSandboxes: cancel while a nested python run
// sleeps; the graph ends cancelled and no sandbox is left.
func TestCancellingAGraphStopsItsSandboxes(t *testing.T) {
	g := startGraphHost(t)
	ws := g.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "c1", "tool": "slow_report", "args": map[string]any{"text": "a b"}})
	for {
		f := ws.Read(2 * time.Minute)
		if f.Str("type") == "stdout" && strings.Contains(f.Str("data"), "started") {
			if f.Str("node") != "count" {
				t.Errorf("the nested output is marked %q, want count", f.Str("node"))
			}
			break
		}
		if f.Str("type") == "result" || f.Str("type") == "error" {
			t.Fatalf("slow_report ended before it was cancelled: %v\n%s", f, g.Stderr())
		}
	}
	if len(g.sandboxes(t)) == 0 {
		t.Fatal("no sandbox runs the nested python call")
	}
	ws.Send(map[string]any{"type": "cancel", "id": "c1"})
	frames := ws.UntilEnd("c1", time.Minute)
	if last := frames[len(frames)-1]; last.ErrorCode() != "cancelled" {
		t.Fatalf("the cancelled graph ended with %v", last)
	}
	var left []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if left = g.sandboxes(t); len(left) == 0 {
			return
		}
	}
	t.Fatalf("sandboxes left 30 s after the graph was cancelled: %v", left)
}

// TestAPromptToolStreamsTheModelsAnswer: the answer arrives token by
// token before the result; a model that can't be reached, or refuses the
// key, is said plainly.
func TestAPromptToolStreamsTheModelsAnswer(t *testing.T) {
	g := startGraphHost(t)
	held := make(chan struct{})
	release := make(chan struct{})
	g.model.Script(modeltest.Reply{Chunks: []string{"Short ", "and ", "sweet."}, BeforeChunk: func(i int) {
		if i == 2 {
			close(held)
			<-release
		}
	}})
	ws := g.Dial(t)
	ws.Send(map[string]any{"type": "call", "id": "p1", "tool": "brief", "args": map[string]any{"text": "a long text"}})
	var got string
	for got != "Short and " {
		f := ws.Read(time.Minute)
		if f.Str("type") == "result" || f.Str("type") == "error" {
			t.Fatalf("the prompt tool ended before the answer did: %v", f)
		}
		if f.Str("type") == "stdout" {
			got += f.Str("data")
		}
	}
	<-held
	close(release)
	frames := ws.UntilEnd("p1", time.Minute)
	if last := frames[len(frames)-1]; last["result"] != "Short and sweet." {
		t.Fatalf("brief ended with %v", last)
	}
	req := g.model.Requests()[0]
	if len(req.Messages) != 2 || req.Messages[0].Content != "Be brief." || req.Messages[1].Content != "Summarise: a long text" || !req.Stream {
		t.Fatalf("the model was asked %+v", req)
	}

	g.model.Script(modeltest.Error(http.StatusUnauthorized, "Incorrect API key provided"))
	code, body := postJSON(t, g.URL("/api/v1/tools/brief/call"), `{"text":"x"}`)
	e, _ := body["error"].(map[string]any)
	if code == http.StatusOK || e["code"] != "model_unauthorized" {
		t.Fatalf("a refused key: %d %v", code, body)
	}

	g.model.Close()
	code, body = postJSON(t, g.URL("/api/v1/tools/brief/call"), `{"text":"x"}`)
	e, _ = body["error"].(map[string]any)
	if code == http.StatusOK || e["code"] != "model_unreachable" || !strings.Contains(fmt.Sprint(e["message"]), "base_url") {
		t.Fatalf("no model server: %d %v", code, body)
	}
}

// TestTheExampleToolsAreServed: the example prompt tool and graph pass
// their kinds' checks with the other examples beside them, and the graph
// runs to the node that needs the internet, which it names.
func TestTheExampleToolsAreServed(t *testing.T) {
	g := startGraphHost(t)
	resp, err := http.Get(g.URL("/api/v1/tools"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct {
			Function struct{ Name string }
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, tl := range list.Tools {
		served[tl.Function.Name] = true
	}
	for _, name := range []string{"get_json", "word_count", "summarise", "post_report"} {
		if !served[name] {
			t.Errorf("the example tool %s is not served\nhost log:\n%s", name, g.Stderr())
		}
	}
	code, body := postJSON(t, g.URL("/api/v1/tools/summarise/call"), `{"text":"one two three four","words":2}`)
	if code != http.StatusOK || body["result"] != modeltest.Echo("Summarise this in at most 2 words:\n\none two three four") {
		t.Errorf("summarise = %d %v", code, body)
	}
	code, body = postJSON(t, g.URL("/api/v1/tools/post_report/call"), `{"id":1}`)
	e, _ := body["error"].(map[string]any)
	if code == http.StatusOK || !strings.Contains(fmt.Sprint(e["message"]), `"fetch"`) {
		t.Errorf("post_report without the internet = %d %v", code, body)
	}
}
