package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/pelletier/go-toml/v2"
)

// The tools the canvas tests start with: an echo tool that prints, a graph
// that calls it (drawn with no layout, so the UI places it), and a prompt
// tool.
var canvasTools = map[string]string{
	"say.toml": `name = "say"
description = "Say each argument on its own line."
[[params]]
name = "greeting"
kind = "text"
required = true
[run]
type = "echo"
`,
	"relay.toml": `name = "relay"
description = "Pass the text to say, and return what it said."
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
id = "call"
type = "call_tool"
tool = "say"
args = { greeting = "text" }
[[run.nodes]]
id = "label"
type = "template"
text = "<img src=x onerror=\"window.__pwned=1\"> {{call}}"
[[run.nodes]]
id = "out"
type = "return"
value = "label"
`,
	"brief.toml": `name = "brief"
description = "Ask the model for a short answer."
[[params]]
name = "text"
kind = "text"
required = true
[run]
type = "prompt"
system = "Be brief."
prompt = "Answer in one line: {{text}}"
`,
}

// tab is a headless Chromium tab of a canvas test, which notes every
// exception the page throws.
type tab struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// thrown are the page's uncaught exceptions.
	thrown []string
}

func newTab(t *testing.T) *tab {
	b := &tab{t: t, ctx: browser(t)}
	msgs := chromedp.Console(b.ctx) // subscribes now, before the first action
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.thrown = append(b.thrown, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *tab) eval(what, js string) any {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](js))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

func (b *tab) text(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

func (b *tab) exceptions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.thrown...)
}

// waitJS waits until js is true in the page.
func (b *tab) waitJS(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for b.eval(what, js) != true {
		if time.Now().After(deadline) {
			b.t.Fatalf("the page never showed %s; the editor reads %q", what, b.text(`(document.getElementById("def-view") || {}).innerText || ""`))
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// pick chooses an option of a select as a person does: the value changes
// and the page hears "change".
func (b *tab) pick(sel, value string) {
	b.t.Helper()
	ok := b.eval("choosing "+value, fmt.Sprintf(`(() => {
		const s = document.querySelector(%q);
		if (!s || s.disabled || ![...s.options].some(o => o.value === %q)) return false;
		s.value = %q;
		s.dispatchEvent(new Event("change", {bubbles: true}));
		return true;
	})()`, sel, value, value))
	if ok != true {
		b.t.Fatalf("%s has no enabled option %q", sel, value)
	}
}

// center is the middle of the first element sel matches, in the viewport.
func (b *tab) center(sel string) (x, y float64) {
	b.t.Helper()
	box, err := chromedp.Run(b.ctx, chromedp.Dimensions(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("measuring %s: %v", sel, err)
	}
	q := box.Content
	return (q[0] + q[2]) / 2, (q[1] + q[5]) / 2
}

// shot writes a screenshot of the whole page into the artifacts folder.
func (b *tab) shot(name string) {
	b.t.Helper()
	// The toast of an earlier step would sit in the middle of a full-page
	// picture: the picture leaves it out.
	b.do("scrolling up", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0); document.getElementById("toast").hidden = true`), chromedp.Sleep(250*time.Millisecond))
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("taking a screenshot: %v", err)
	}
	if err := os.MkdirAll("artifacts", 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("artifacts", name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *tab) signIn(token, principal string) {
	b.t.Helper()
	b.do("signing in",
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#tools button[data-tool="say"]`)))
	b.waitJS("signed in as "+principal, fmt.Sprintf(`document.getElementById("who").textContent.startsWith(%q)`, principal+" "))
}

// top is where a node is drawn, from the top of the canvas.
func (b *tab) top(node string) float64 {
	b.t.Helper()
	return b.eval("reading where "+node+" is", fmt.Sprintf(`parseInt(document.querySelector('.gnode[data-node="%s"]').style.top)`, node)).(float64)
}

// wired is JS that says whether a wire goes from one node into a slot of
// another.
func wired(from, to, slot string) string {
	return fmt.Sprintf(`!!document.querySelector('[data-wire="%s->%s.%s"]')`, from, to, slot)
}

// TestCanvasAdminDrawsChecksSavesAndCalls: an admin draws a graph tool in
// the web UI (arg → template → return), sees a check error on the node it
// names, saves it, calls it and sees the result; a viewer sees the same
// drawing with no way to change it.
func TestCanvasAdminDrawsChecksSavesAndCalls(t *testing.T) {
	h := startHost(t, hostSpec{Config: tokensConfig(), Tools: canvasTools})
	b := newTab(t)
	// An admin starts a new graph tool: one arg wired to a return.
	b.do("opening the UI", chromedp.Navigate(h.URL("/")))
	b.signIn(adminToken, "ada")
	b.do("starting a new graph tool",
		chromedp.WaitVisible(chromedp.CSS("#new-graph")),
		chromedp.Click(chromedp.CSS("#new-graph")),
		chromedp.WaitVisible(chromedp.CSS(`.gnode[data-node="input"]`)))
	b.waitJS("the arg wired to the return", wired("input", "out", "value"))
	b.do("naming it",
		chromedp.SendKeys(chromedp.CSS("#def-name"), "greet"),
		chromedp.SendKeys(chromedp.CSS("#def-description"), "Greet someone by name."))

	// Add a template from the palette; its text wires the arg into it.
	b.do("adding a template node",
		chromedp.Click(chromedp.CSS(`#palette [data-add="template"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#node-panel [data-field="text"]`)),
		chromedp.SendKeys(chromedp.CSS(`#node-panel [data-field="text"]`), "Hello, {{input}}!"))
	b.waitJS("the arg wired into the template's placeholder", wired("input", "template1", "ph:input"))
	if got := b.text(`document.querySelector('#node-panel .ph-preview mark.ph:not(.bad)').textContent`); got != "{{input}}" {
		t.Errorf("the template's placeholder is marked %q", got)
	}

	// Check: the template reaches no return yet, and the host says so on it.
	b.do("checking", chromedp.Click(chromedp.CSS("#def-check")))
	b.waitJS("the check error on the template node", `!!document.querySelector('.gnode[data-node="template1"].has-error .gerror')`)
	nodeErr := b.text(`document.querySelector('.gnode[data-node="template1"] .gerror').textContent`)
	if !strings.Contains(nodeErr, "template1") || !strings.Contains(nodeErr, "never run") {
		t.Errorf("the template node shows %q", nodeErr)
	}
	if n := b.eval("counting nodes with errors", `document.querySelectorAll(".gnode.has-error").length`); n != float64(1) {
		t.Errorf("%v nodes are marked with errors, want only the template", n)
	}
	if top := b.text(`document.getElementById("def-errors").innerText`); !strings.Contains(top, "template1") {
		t.Errorf("the summary above the canvas reads %q", top)
	}
	b.shot("canvas-check-error.png")

	// Wire by dragging: the arg's output onto the return's input...
	b.do("dragging a wire from the arg to the return",
		chromedp.DragAndDrop(chromedp.CSS(`[data-port-out="input"]`), chromedp.CSS(`.gnode[data-node="out"] [data-port-slot="value"]`)))
	b.waitJS("the dragged wire", wired("input", "out", "value"))
	// ...and by the side panel's dropdown: the template into the return.
	b.do("selecting the return node", chromedp.Click(chromedp.CSS(`[data-node-head="out"]`)), chromedp.WaitVisible(chromedp.CSS(`#node-panel select[data-field="value"]`)))
	b.pick(`#node-panel select[data-field="value"]`, "template1")
	b.waitJS("the template wired into the return", wired("template1", "out", "value")+` && !document.querySelector('[data-wire="input->out.value"]')`)

	// Move the template down by dragging its head: only the layout changes.
	before := b.top("template1")
	cx, cy := b.center(`[data-node-head="template1"]`)
	b.do("moving the template", chromedp.DragAndDropXY(cx, cy, cx, cy+90))
	after := b.top("template1")
	if after < before+60 {
		t.Errorf("dragging the template 90 px down moved it from %v to %v", before, after)
	}

	b.do("checking again", chromedp.Click(chromedp.CSS("#def-check")))
	b.waitJS("a clean check", `document.getElementById("def-status").textContent === "Checked: no problems."`)
	if n := b.eval("counting errors", `document.querySelectorAll(".gnode.has-error").length + (document.getElementById("def-errors").hidden ? 0 : 1)`); n != float64(0) {
		t.Errorf("after a clean check %v errors are still shown", n)
	}
	b.shot("canvas-admin.png")

	// Save: the host writes the file and serves the tool at once; the page
	// opens it.
	b.do("saving", chromedp.Click(chromedp.CSS("#def-save")))
	b.do("waiting for the saved tool",
		chromedp.WaitVisible(chromedp.CSS(`#tools button[data-tool="greet"]`)),
		chromedp.WaitVisible(chromedp.CSS("#p-input")))
	file, err := os.ReadFile(filepath.Join(h.Dir, "tools", "greet.toml"))
	if err != nil {
		t.Fatalf("the saved tool's file: %v", err)
	}
	var saved struct {
		Name string
		Run  struct {
			Type   string
			Nodes  []map[string]any
			Layout map[string]struct{ X, Y int }
		}
	}
	if err := toml.Unmarshal(file, &saved); err != nil {
		t.Fatalf("the saved file is not TOML: %v\n%s", err, file)
	}
	texts := map[string]any{}
	for _, n := range saved.Run.Nodes {
		texts[fmt.Sprint(n["id"])] = n["text"]
	}
	left := int(b.eval("reading where template1 is", `parseInt(document.querySelector('.gnode[data-node="template1"]').style.left)`).(float64))
	if saved.Name != "greet" || saved.Run.Type != "graph" || len(saved.Run.Nodes) != 3 || texts["template1"] != "Hello, {{input}}!" ||
		saved.Run.Layout["template1"].Y != int(after) || saved.Run.Layout["template1"].X != left {
		t.Errorf("the saved file is not the drawing (template1 drawn at %d, %v):\n%s", left, after, file)
	}

	// Call it and see the result.
	b.do("running the saved tool",
		chromedp.SendKeys(chromedp.CSS("#p-input"), "Ada"),
		chromedp.Click(chromedp.CSS("#run-button")))
	b.waitJS("the result", `!document.getElementById("result-wrap").hidden || !document.getElementById("run-error").hidden`)
	if got := b.text(`document.getElementById("result").textContent`); got != "Hello, Ada!" {
		t.Errorf("the run shows the result %q (error: %q)", got, b.text(`document.getElementById("run-error").innerText`))
	}
	b.shot("canvas-saved-and-run.png")

	// A graph that calls a tool: its nested output is marked with the node.
	b.do("running relay",
		chromedp.Click(chromedp.CSS(`#tools button[data-tool="relay"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.gnode[data-node="call"]`)),
		chromedp.SendKeys(chromedp.CSS("#p-text"), "hi there"),
		chromedp.Click(chromedp.CSS("#run-button")))
	b.waitJS("relay's result", `document.getElementById("run-status").textContent !== "running" && document.getElementById("run-tool").textContent === "relay"`)
	if tag := b.text(`(document.querySelector("#output .line.stdout .node-tag") || {}).textContent || ""`); tag != "call" {
		t.Errorf("the nested output is marked %q, want the node call; output: %q", tag, b.text(`document.getElementById("output").innerText`))
	}
	if out := b.text(`document.getElementById("output").innerText`); !strings.Contains(out, "greeting=hi there") {
		t.Errorf("the output reads %q", out)
	}
	// The template's text is shown as text, never as markup.
	if b.eval("looking for injected markup", `!!window.__pwned || document.querySelectorAll("#def-view img, #output img, #result img").length > 0`) != false {
		t.Error("text of a tool became markup in the page")
	}
	// Drawn without a layout: the nodes stand in columns by dependency.
	xs := b.eval("reading the auto layout", `["text", "call", "label", "out"].map(id => parseInt(document.querySelector('.gnode[data-node="' + id + '"]').style.left))`).([]any)
	for i := 1; i < len(xs); i++ {
		if xs[i].(float64) <= xs[i-1].(float64) {
			t.Errorf("auto layout places the nodes at x %v: each should be right of what it reads", xs)
			break
		}
	}

	b.shot("canvas-nested-output.png")

	// A prompt tool is a form: its placeholders marked, an unknown one as
	// an error at once, and the host's check shown by the field it names.
	b.do("opening the prompt tool",
		chromedp.Click(chromedp.CSS(`#tools button[data-tool="brief"]`)),
		chromedp.WaitVisible(chromedp.CSS("#prompt-prompt")))
	b.waitJS("the placeholder marked", `[...document.querySelectorAll("#prompt-prompt-marks mark.ph:not(.bad)")].map(m => m.textContent).join() === "{{text}}"`)
	b.do("typing an unknown placeholder", chromedp.SendKeys(chromedp.CSS("#prompt-prompt"), " in {{lang}}"))
	b.waitJS("the unknown placeholder marked", `[...document.querySelectorAll("#prompt-prompt-marks mark.ph.bad")].map(m => m.textContent).join() === "{{lang}}"`)
	if p := b.text(`document.getElementById("prompt-problems").innerText`); !strings.Contains(p, `{{lang}} is not a parameter`) {
		t.Errorf("the prompt's problems read %q", p)
	}
	b.do("checking the prompt tool", chromedp.Click(chromedp.CSS("#def-check")))
	b.waitJS("the host's error under the prompt", `!document.querySelector('[data-error-for="run.prompt"]').hidden`)
	if e := b.text(`document.querySelector('[data-error-for="run.prompt"]').textContent`); !strings.Contains(e, "{{lang}}") {
		t.Errorf("the prompt field's error reads %q", e)
	}
	b.do("adding the parameter", chromedp.Click(chromedp.CSS("#add-param")), chromedp.WaitVisible(chromedp.CSS("#param-1-name")))
	b.do("naming it", chromedp.Clear(chromedp.CSS("#param-1-name")), chromedp.SendKeys(chromedp.CSS("#param-1-name"), "lang"))
	b.waitJS("the placeholder known now", `!document.querySelector("#prompt-prompt-marks mark.ph.bad")`)
	b.shot("canvas-prompt.png")
	b.do("saving the prompt tool", chromedp.Click(chromedp.CSS("#def-save")))
	b.do("waiting for the saved prompt tool", chromedp.WaitVisible(chromedp.CSS("#p-lang")))
	if file, err := os.ReadFile(filepath.Join(h.Dir, "tools", "brief.toml")); err != nil || !strings.Contains(string(file), "in {{lang}}") {
		t.Errorf("the prompt tool's file after saving (%v):\n%s", err, file)
	}

	// Nodes are deleted by the panel's button or the Delete key; an error
	// that names no node is shown above the canvas.
	b.do("starting another graph",
		chromedp.Click(chromedp.CSS("#new-graph")),
		chromedp.WaitVisible(chromedp.CSS(`.gnode[data-node="out"]`)),
		chromedp.SendKeys(chromedp.CSS("#def-name"), "draft"),
		chromedp.SendKeys(chromedp.CSS("#def-description"), "A draft."))
	b.do("deleting the return node with the panel's button",
		chromedp.Click(chromedp.CSS(`[data-node-head="out"]`)),
		chromedp.WaitVisible(chromedp.CSS("#delete-node")),
		chromedp.Click(chromedp.CSS("#delete-node")))
	b.do("adding a const node and deleting it with the Delete key",
		chromedp.Click(chromedp.CSS(`#palette [data-add="const"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-node-head="const1"]`)),
		chromedp.Focus(chromedp.CSS(`[data-node-head="const1"]`)),
		chromedp.KeyEvent(kb.Delete))
	b.waitJS("only the arg left, unwired", `[...document.querySelectorAll(".gnode")].map(n => n.dataset.node).join() === "input" && !document.querySelector("[data-wire]")`)
	b.do("checking the graph with no return", chromedp.Click(chromedp.CSS("#def-check")))
	b.waitJS("the error above the canvas", `[...document.querySelectorAll("#def-errors .top-error")].some(e => e.textContent.includes("no return node"))`)

	// A viewer sees the drawing and nothing to change it with.
	b.do("signing out", chromedp.Click(chromedp.CSS("#signout")))
	b.signIn(viewerToken, "vera")
	b.do("opening greet as a viewer",
		chromedp.Click(chromedp.CSS(`#tools button[data-tool="greet"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.gnode[data-node="template1"]`)))
	b.waitJS("the drawing's wires", wired("input", "template1", "ph:input")+" && "+wired("template1", "out", "value"))
	b.do("selecting a node", chromedp.Click(chromedp.CSS(`[data-node-head="template1"]`)), chromedp.WaitVisible(chromedp.CSS(`#node-panel [data-field="text"]`)))
	type controls struct {
		Palette, Save, Check, Delete, NewGraph, AddParam bool
		Enabled                                          []string
		Nodes                                            int
		Text                                             string
	}
	c, err := chromedp.Run(b.ctx, chromedp.Evaluate[controls](`(() => ({
		Palette: !!document.getElementById("palette"),
		Save: !!document.getElementById("def-save"),
		Check: !!document.getElementById("def-check"),
		Delete: !!document.getElementById("delete-node"),
		NewGraph: !document.getElementById("admin-actions").hidden,
		AddParam: !!document.getElementById("add-param"),
		Enabled: [...document.querySelectorAll("#def-view input, #def-view textarea, #def-view select")].filter(e => !e.disabled).map(e => e.id || e.dataset.field || e.tagName),
		Nodes: document.querySelectorAll(".gnode").length,
		Text: document.querySelector('#node-panel [data-field="text"]').value,
	}))()`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Palette || c.Save || c.Check || c.Delete || c.NewGraph || c.AddParam || len(c.Enabled) > 0 {
		t.Errorf("a viewer has edit controls: %+v", c)
	}
	if c.Nodes != 3 || c.Text != "Hello, {{input}}!" {
		t.Errorf("a viewer sees %d nodes and the template text %q", c.Nodes, c.Text)
	}
	top := b.top("template1")
	cx, cy = b.center(`[data-node-head="template1"]`)
	b.do("trying to move a node as a viewer", chromedp.DragAndDropXY(cx, cy, cx+60, cy+60))
	if now := b.top("template1"); now != top {
		t.Errorf("a viewer moved a node from %v to %v", top, now)
	}
	b.shot("canvas-viewer.png")
	b.do("going dark", colorScheme("dark"), chromedp.Sleep(200*time.Millisecond))
	b.shot("canvas-viewer-dark.png")
	b.do("back to light", colorScheme("light"))
	b.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.shot("canvas-phone.png")

	if ex := b.exceptions(); len(ex) > 0 {
		t.Errorf("the page threw: %v", ex)
	}
}
