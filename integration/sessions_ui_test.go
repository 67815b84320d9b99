package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
)

// evil is a file name that is markup if a page ever puts it in as HTML.
const evil = `<img src=x onerror=alert(1)>.txt`

// sessionsUIHost starts a real host with the real python plugin, runsc and
// rootfs, [sessions] on with small workspaces, and the tokens of
// tokensConfig. When the test ends the host is stopped and nothing of its
// sandboxes may be left: no runsc sandbox of its prefix, no workspace
// mounted, no loop device on a workspace image.
func sessionsUIHost(t *testing.T) (h *Host, left func() []string) {
	t.Helper()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"text": "outside text"}`)
	}))
	t.Cleanup(page.Close)
	_, runscBin, rootfs := sandboxBuild(t)
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	prefix := "thui" + hex.EncodeToString(b) + "-"
	pyState := filepath.Join(t.TempDir(), "py")
	h = startHost(t, hostSpec{Tools: map[string]string{"read_page.toml": fmt.Sprintf(`name = "read_page"
description = "Read a page from outside."
[run]
type = "http"
url = %q
`, page.URL)}, Config: tokensConfig() + fmt.Sprintf(`
[python]
runsc = %q
rootfs = %q
state_dir = %q
sessions_dir = %q
sandbox_prefix = %q

[python.pool]
size = 0

[sessions]
enabled = true
disk_mb = 16
memory_mb = 256
seconds = 60

[approvals]
change = "ask"
by = "caller"

[http]
allow_private = true
`, runscBin, rootfs, pyState, filepath.Join(pyState, "sessions"), prefix)})
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: runscBin, Root: filepath.Join(pyState, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	opts := sandbox.SweepOptions{Runtime: rt, Prefix: prefix, StateDir: pyState}
	// left is every sandbox, workspace mount and loop device of the host's.
	left = func() []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		boxes, err := sandbox.Leftovers(ctx, opts)
		if err != nil {
			t.Errorf("looking for the host's sandboxes: %v", err)
		}
		return append(append(boxes, mountsUnder(t, pyState)...), loopsOn(pyState)...)
	}
	t.Cleanup(func() {
		h.Stop(t)
		if l := left(); len(l) > 0 {
			t.Errorf("the stopped host left sandboxes, mounts or loop devices behind: %v", l)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = sandbox.Sweep(ctx, opts)
		}
	})
	return h, left
}

// mountsUnder are the mount points under dir.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	return out
}

// loopsOn are the loop devices whose backing file is under dir.
func loopsOn(dir string) []string {
	var out []string
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(f)))+" on "+strings.TrimSpace(string(b)))
		}
	}
	return out
}

// apiJSON is an HTTP request with a token, its answer decoded.
func apiJSON(t *testing.T, h *Host, method, path, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, h.URL(path), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// sessionsTab is a headless Chromium tab like newTab's, with room for a
// slow machine: starting a conversation's first sandbox may take a while.
func sessionsTab(t *testing.T) *tab {
	t.Helper()
	ensureChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0],
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 10*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	b := &tab{t: t, ctx: ctx}
	msgs := chromedp.Console(ctx) // subscribes now, before the first action
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

// convWait waits, for as long as a run may take, until js is true in the
// page, and says what the conversation shows if it never is.
func (b *tab) convWait(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for b.eval(what, js) != true {
		if time.Now().After(deadline) {
			b.t.Fatalf("the page never showed %s; the conversation reads %q", what, b.text(`(document.getElementById("conv-main") || {}).innerText || ""`))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// convAsk types code into the run box and runs it, when the host asks for
// an approval first: the page shows the code waiting and why, and decision
// ("approve" or "decline"; "" for none yet) is clicked. It returns why.
func (b *tab) convAsk(code, decision string) string {
	b.t.Helper()
	b.do("typing the code", chromedp.SetValue(chromedp.CSS("#conv-code"), code), chromedp.Click(chromedp.CSS("#conv-run")))
	b.convWait("the run waiting for approval", `!document.getElementById("conv-approval").hidden`)
	if got := b.text(`document.getElementById("conv-approval-args").textContent`); got != code {
		b.t.Errorf("the approval shows %q, not the code waiting", got)
	}
	if st := b.text(`document.getElementById("conv-run-status").textContent`); st != "waiting for approval" {
		b.t.Errorf("while it waits the run says %q", st)
	}
	why := b.text(`document.getElementById("conv-approval-why").textContent`)
	if decision != "" {
		b.do(decision, chromedp.Click(chromedp.CSS("#conv-"+decision)))
	}
	return why
}

// convRun runs code and waits for its end, which must be want ("done",
// "failed", "cancelled"); it returns the output the page shows.
func (b *tab) convRun(code, want string) string {
	b.t.Helper()
	b.do("typing the code", chromedp.SetValue(chromedp.CSS("#conv-code"), code), chromedp.Click(chromedp.CSS("#conv-run")))
	return b.convEnd(want)
}

// convEnd waits for the run's end, which must be want, and returns the
// output the page shows.
func (b *tab) convEnd(want string) string {
	b.t.Helper()
	b.convWait("the run's end", `(() => { const s = document.getElementById("conv-run-status"); return !s.hidden && s.textContent !== "running" && s.textContent !== "waiting for approval"; })()`)
	out := b.text(`document.getElementById("conv-output").textContent`)
	if st := b.text(`document.getElementById("conv-run-status").textContent`); st != want {
		b.t.Fatalf("the run ended %q, want %q; the page shows output %q and error %q", st, want, out, b.text(`document.getElementById("conv-run-error").innerText`))
	}
	return out
}

// download clicks a file's Download button and returns the file saved in
// dir under name.
func (b *tab) download(path, dir, name string) []byte {
	b.t.Helper()
	b.do("downloading "+path, chromedp.Evaluate[chromedp.Void](fileRow(path)+`.querySelector("button.dl").click()`))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// Chromium writes into name.crdownload and renames it when done.
		if d, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			return d
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(dir)
			b.t.Fatalf("%s was not downloaded; the folder holds %v", path, entries)
		}
	}
}

// fileRow is JS that finds the files panel's row of a path (compared as a
// string, so any name can be asked for).
func fileRow(path string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#conv-files tbody tr")].find(r => r.dataset.path === %q)`, path)
}

// TestSessionsUIFilesPanel: in headless Chromium against a real host with
// conversation sandboxes (real python plugin, real runsc), an editor opens
// Conversations, starts one by running run_python that writes out.txt, sees
// it in the files panel and downloads it (and one in a folder); uploads
// files (one named as markup, shown as text) which the next run reads; runs
// bash that fails and a run it cancels; deletes a file; changes the
// network; sees the run history. An admin sees the conversation but can't
// run in it. Once the conversation read outside text and reaches the web,
// a run waits for approval in the page (approved: it runs; declined: it
// never does). The editor deletes the conversation. A viewer does not see
// Conversations at all. No sandbox, mount or loop device is left once the
// host stops.
func TestSessionsUIFilesPanel(t *testing.T) {
	h, left := sessionsUIHost(t)
	b := sessionsTab(t)
	downloads := t.TempDir()
	b.do("opening the UI", chromedp.Navigate(h.URL("/")),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
				Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads,
			})
			return err
		}))
	signIn := func(token, name string) {
		t.Helper()
		b.do("signing in as "+name,
			chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), token),
			chromedp.Click(chromedp.CSS("#signin-submit")))
		b.waitJS("signed in as "+name, fmt.Sprintf(`document.getElementById("who").textContent.startsWith(%q)`, name+" "))
	}
	openConv := func(id, principal string) {
		t.Helper()
		b.waitJS("Conversations offered", `!document.getElementById("views").hidden`)
		b.do("opening Conversations", chromedp.Click(chromedp.CSS(`#views button[data-view="conversations"]`)))
		// Found and clicked in one step in the page: the list is drawn anew
		// when the host's answer comes, and a click by a node id found just
		// before could meet a node that is gone ("Could not find node").
		item := fmt.Sprintf(`#conv-list button[data-session=%q][data-principal=%q]`, id, principal)
		b.waitJS("opening "+id, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e || e.offsetParent === null) return false; e.click(); return true; })()`, item))
		b.waitJS(id+"'s files", `!!`+fileRow("out.txt"))
	}
	signIn(editorToken, "eddie")
	b.waitJS("Conversations offered to the editor", `!document.getElementById("views").hidden`)

	// Open a new conversation by its id and run code that writes a file.
	const conv = "ui-conv-1"
	b.do("opening Conversations with a bad id",
		chromedp.Click(chromedp.CSS(`#views button[data-view="conversations"]`)),
		chromedp.WaitVisible(chromedp.CSS("#conv-new-id")),
		chromedp.SendKeys(chromedp.CSS("#conv-new-id"), "no spaces/here"),
		chromedp.Click(chromedp.CSS("#conv-new-open")),
		chromedp.WaitVisible(chromedp.CSS("#conv-new-error")))
	if b.eval("looking for a conversation view", `!!document.getElementById("conv-view")`) != false {
		t.Error("a bad id opened a conversation")
	}
	b.do("opening the conversation",
		chromedp.SetValue(chromedp.CSS("#conv-new-id"), conv),
		chromedp.Click(chromedp.CSS("#conv-new-open")),
		chromedp.WaitVisible(chromedp.CSS("#conv-code")))
	if title := b.text(`document.getElementById("conv-title").textContent`); title != conv {
		t.Errorf("the conversation's title is %q", title)
	}
	out := b.convRun("import os\nwith open('out.txt', 'w') as f:\n    f.write('made in the sandbox\\n' * 3)\n"+
		"os.makedirs('results')\nopen('results/table.csv', 'w').write('a,b\\n1,2\\n')\nprint('wrote out.txt')", "done")
	if !strings.Contains(out, "wrote out.txt") {
		t.Errorf("the run's output reads %q", out)
	}
	b.waitJS("out.txt, results/ and results/table.csv in the files panel", `!!`+fileRow("out.txt")+` && !!`+fileRow("results/table.csv")+` && `+fileRow("results")+`.dataset.dir === "true"`)
	if size := b.text(fileRow("out.txt") + `.children[1].textContent`); size != "60 B" {
		t.Errorf("out.txt's size reads %q, want 60 B", size)
	}
	b.waitJS("the conversation in the list", fmt.Sprintf(`!!document.querySelector('#conv-list button[data-session=%q]')`, conv))
	b.shot("sessions-files.png")

	// Download them: the page fetches each with the token and saves it.
	if got := b.download("out.txt", downloads, "out.txt"); string(got) != strings.Repeat("made in the sandbox\n", 3) {
		t.Errorf("the downloaded out.txt reads %q", got)
	}
	if got := b.download("results/table.csv", downloads, "table.csv"); string(got) != "a,b\n1,2\n" {
		t.Errorf("the downloaded results/table.csv reads %q", got)
	}

	// Upload two files, one named as markup: both listed, the name as text.
	up := t.TempDir()
	for name, body := range map[string]string{"numbers.txt": "1\n2\n3\n", evil: "not markup\n"} {
		if err := os.WriteFile(filepath.Join(up, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.do("watching for alerts", chromedp.Evaluate[chromedp.Void](`window.alert = () => { window.__pwned = 1; }`))
	b.do("uploading", chromedp.SetUploadFiles(chromedp.CSS("#conv-upload"), []string{filepath.Join(up, "numbers.txt"), filepath.Join(up, evil)}))
	b.waitJS("both uploads listed", `!!`+fileRow("numbers.txt")+` && !!`+fileRow(evil))
	if name := b.text(fileRow(evil) + `.querySelector(".fname").textContent`); name != evil {
		t.Errorf("the markup-named file reads %q in the panel", name)
	}
	if b.eval("looking for injected markup", `!!window.__pwned || document.querySelectorAll("#conv-main img, #conv-side img").length > 0`) != false {
		t.Error("a file's name became markup in the page")
	}
	if s := b.text(`document.getElementById("conv-upload-status").textContent`); s != "Uploaded 2 files." {
		t.Errorf("the upload says %q", s)
	}
	out = b.convRun(fmt.Sprintf("import os\nprint('sum', sum(int(x) for x in open('numbers.txt')))\nprint('evil', open(%q).read().strip())\nnumbers = open('numbers.txt').read().split()", evil), "done")
	if !strings.Contains(out, "sum 6") || !strings.Contains(out, "evil not markup") {
		t.Errorf("the next run read the uploads as %q", out)
	}
	// The cells share an interpreter: the next reads a name of this one, and its last
	// expression's value is shown as the notebook's Out, as text.
	b.convRun("numbers + ['<b>bold</b>']", "done")
	if v := b.text(`[...document.querySelectorAll("#conv-output .line.value")].map(l => l.textContent).join("")`); v != "['1', '2', '3', '<b>bold</b>']\n" {
		t.Errorf("the value of a cell ending in an expression reads %q", v)
	}
	if b.eval("looking for markup from the value", `document.querySelectorAll("#conv-output b").length`) != float64(0) {
		t.Error("a cell's value became markup in the page")
	}

	// A figure: matplotlib's plt.show() between two prints is drawn in the output as an
	// image, in order, from the run's display event; a cell's last expression that is a figure
	// is drawn too, not printed.
	b.convRun("import matplotlib.pyplot as plt\nprint('before')\nplt.plot([1, 3, 2])\nplt.show()\nprint('after')", "done")
	b.convWait("the figure drawn", `(() => { const i = document.querySelector("#conv-output img.shown"); return !!i && i.complete && i.naturalWidth > 100; })()`)
	if got := b.text(`[...document.querySelectorAll("#conv-output .line")].map(l => l.tagName === "IMG" ? "[figure " + l.src.slice(0, 21) + "]" : l.textContent).join("")`); got != "before\n[figure data:image/png;base64]after\n" {
		t.Errorf("the run with a figure shows %q; want the figure between the two lines", got)
	}
	b.shot("sessions-figure.png")
	b.convRun("fig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5])\nfig", "done")
	b.convWait("the figure of the last expression drawn", `(() => { const i = document.querySelector("#conv-output img.shown"); return !!i && i.complete && i.naturalWidth > 100; })()`)
	if n := b.eval("counting what the cell shows", `document.querySelectorAll("#conv-output img.shown").length + document.querySelectorAll("#conv-output .line.value").length`); n != float64(1) {
		t.Errorf("a cell ending in a figure shows %v images and values; want the figure alone", n)
	}

	// A bash run that fails says its exit code, its stderr marked; a run
	// cancelled from the page ends cancelled.
	b.pick("#conv-lang", "bash")
	b.convRun("wc -l < numbers.txt; echo 'no such thing' >&2; exit 3", "failed")
	if e := b.text(`document.getElementById("conv-exit").textContent`); !strings.HasPrefix(e, "exit code 3") {
		t.Errorf("the failed run says %q", e)
	}
	if e := b.text(`[...document.querySelectorAll("#conv-output .line.stderr")].map(l => l.textContent).join("")`); e != "no such thing\n" {
		t.Errorf("the failed run's stderr reads %q", e)
	}
	b.pick("#conv-lang", "python")
	b.do("starting a long run", chromedp.SetValue(chromedp.CSS("#conv-code"), "import time\nprint('waiting', flush=True)\ntime.sleep(300)"),
		chromedp.Click(chromedp.CSS("#conv-run")))
	b.convWait("the long run printing", `document.getElementById("conv-output").textContent.includes("waiting")`)
	b.do("cancelling it", chromedp.Click(chromedp.CSS("#conv-cancel")))
	b.convWait("the run cancelled", `document.getElementById("conv-run-status").textContent === "cancelled"`)

	// While it is used the conversation has a sandbox and a mounted
	// workspace, which the checks at the end look for.
	if l := left(); len(l) < 2 {
		t.Errorf("a conversation in use has only %v", l)
	} else {
		t.Logf("the conversation in use has %v", l)
	}

	// Delete a file, after saying yes in the page's dialog.
	b.do("deleting numbers.txt", chromedp.Evaluate[chromedp.Void](fileRow("numbers.txt")+`.querySelector("button.rm").click()`))
	b.waitJS("the confirmation", `document.getElementById("confirm-dialog").open`)
	if q := b.text(`document.getElementById("confirm-title").textContent`); q != "Delete numbers.txt?" {
		t.Errorf("the confirmation asks %q", q)
	}
	b.shot("sessions-confirm.png")
	b.do("saying yes", chromedp.Click(chromedp.CSS("#confirm-yes")))
	b.waitJS("numbers.txt gone from the panel", `!`+fileRow("numbers.txt")+` && !!`+fileRow("out.txt"))
	if status, body := apiJSON(t, h, "GET", "/api/v1/sessions/"+conv+"/files", editorToken); status != 200 || strings.Contains(fmt.Sprint(body), "numbers.txt") {
		t.Errorf("the host's files after the delete: %d %v", status, body)
	}

	// The run history, newest first: each run's tool, exit code and end.
	b.waitJS("seven runs in the history", `document.querySelectorAll("#conv-runs tbody tr").length === 7`)
	rows := b.eval("reading the history", `[...document.querySelectorAll("#conv-runs tbody tr")].map(r => [...r.children].map(c => c.textContent))`).([]any)
	want := [][3]string{{"run_python", "—", "cancelled"}, {"run_bash", "3", "ran to its end"}, {"run_python", "0", "ran to its end"}, {"run_python", "0", "ran to its end"}, {"run_python", "0", "ran to its end"}, {"run_python", "0", "ran to its end"}, {"run_python", "0", "ran to its end"}}
	for i, r := range rows {
		cells := r.([]any)
		if !strings.HasPrefix(cells[1].(string), want[i][0]) || cells[3] != want[i][1] || cells[4] != want[i][2] || !strings.Contains(cells[5].(string), " / ") {
			t.Errorf("history row %d reads %v, want %v", i, cells, want[i])
		}
	}

	// The network: web is taken, and said to give the next run a new
	// sandbox; packages, with no package hosts, is refused and the select
	// goes back.
	b.pick("#conv-network", "web")
	b.waitJS("the network changed", `document.getElementById("conv-network-note").textContent.includes("next run gets a new sandbox")`)
	if status, body := apiJSON(t, h, "GET", "/api/v1/sessions/"+conv, editorToken); status != 200 || body["network"] != "web" {
		t.Errorf("the host's session after choosing web: %d %v", status, body)
	}
	b.pick("#conv-network", "packages")
	b.waitJS("packages refused", `document.getElementById("conv-network-note").classList.contains("bad") && document.getElementById("conv-network").value === "web"`)
	b.shot("sessions-conversation.png")
	b.do("going dark", colorScheme("dark"), chromedp.Sleep(200*time.Millisecond))
	b.shot("sessions-conversation-dark.png")
	b.do("back to light", colorScheme("light"))
	b.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.shot("sessions-phone.png")
	b.do("back to a desktop screen", chromedp.EmulateViewport(1280, 900))

	// An admin sees the editor's conversation, its files and history, and
	// may not run code in it.
	b.do("signing out", chromedp.Click(chromedp.CSS("#signout")))
	signIn(adminToken, "ada")
	openConv(conv, "eddie")
	if meta := b.text(`document.getElementById("conv-meta").textContent`); !strings.HasPrefix(meta, "eddie's") {
		t.Errorf("the admin's view of eddie's conversation says %q", meta)
	}
	b.waitJS("the history for the admin", `document.querySelectorAll("#conv-runs tbody tr").length === 7`)
	if b.eval("the run box", `document.getElementById("conv-run").disabled && document.getElementById("conv-code").disabled`) != true {
		t.Error("an admin may run code in someone else's conversation from the page")
	}
	b.shot("sessions-admin.png")
	b.do("signing out", chromedp.Click(chromedp.CSS("#signout")))
	signIn(editorToken, "eddie")
	openConv(conv, "eddie")

	// Once the conversation read outside text (an http tool's answer, called
	// in it by the test) and its sandbox reaches the web, the host asks
	// before a run ([approvals]): the page shows why and the code, and
	// runs it once approved, in a new sandbox with the web network.
	ws := h.Dial(t)
	ws.Send(map[string]any{"type": "hello", "id": "h", "protocol": 1, "token": editorToken})
	ws.Send(map[string]any{"type": "call", "id": "taint", "tool": "read_page", "session": conv})
	if end := ws.UntilEnd("taint", time.Minute); end[len(end)-1].Str("type") != "result" {
		t.Fatalf("read_page in the conversation: %v", end)
	}
	why := b.convAsk("print('approved')", "")
	if !strings.Contains(why, "outside text") || !strings.Contains(why, "web") {
		t.Errorf("the approval says why as %q", why)
	}
	b.shot("sessions-approval.png")
	b.do("approving", chromedp.Click(chromedp.CSS("#conv-approve")))
	// It runs in a new sandbox (the network changed): the page says the names of before are gone.
	if out := b.convEnd("done"); !strings.HasPrefix(out, "approved\n") || !strings.Contains(out, "names defined in earlier runs are gone") {
		t.Errorf("the approved run printed %q; want its output, and the note of a new interpreter", out)
	}

	// A run declined never runs.
	b.convAsk("print('never printed')", "decline")
	b.convWait("the declined run's end", `document.getElementById("conv-run-status").textContent === "failed"`)
	if out := b.text(`document.getElementById("conv-output").textContent`); out != "" {
		t.Errorf("a declined run printed %q", out)
	}
	if e := b.text(`document.getElementById("conv-run-error").innerText`); e == "" {
		t.Error("a declined run says nothing")
	}

	// Delete the conversation: its files go with it.
	b.do("deleting the conversation", chromedp.Click(chromedp.CSS("#conv-delete")))
	b.waitJS("the confirmation", `document.getElementById("confirm-dialog").open`)
	b.do("saying yes", chromedp.Click(chromedp.CSS("#confirm-yes")))
	b.waitJS("the conversation gone", fmt.Sprintf(`!!document.getElementById("conv-empty") && !document.querySelector('#conv-list button[data-session=%q]')`, conv))
	if status, _ := apiJSON(t, h, "GET", "/api/v1/sessions/"+conv, editorToken); status != 404 {
		t.Errorf("the deleted conversation answers %d", status)
	}
	b.shot("sessions-deleted.png")

	// A viewer sees no Conversations, even when the address asks for it.
	b.do("signing out", chromedp.Click(chromedp.CSS("#signout")))
	signIn(viewerToken, "vera")
	b.do("asking for Conversations by address", chromedp.Navigate(h.URL("/#conversations")))
	b.waitJS("signed in again as vera", `!document.getElementById("app-view").hidden && document.getElementById("who").textContent.startsWith("vera ")`)
	time.Sleep(time.Second) // room for a wrong answer to show
	type viewerSees struct {
		Views, Side, Main bool
		Nodes             int
		Tools             []string
	}
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[viewerSees](`(() => ({
		Views: !document.getElementById("views").hidden,
		Side: !document.getElementById("conv-side").hidden,
		Main: !document.getElementById("conv-main").hidden,
		Nodes: document.querySelectorAll("#conv-side *, #conv-main *").length,
		Tools: [...document.querySelectorAll("#tools button")].map(b => b.dataset.tool),
	}))()`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Views || v.Side || v.Main || v.Nodes > 0 {
		t.Errorf("a viewer sees Conversations: %+v", v)
	}
	for _, name := range v.Tools {
		if name == "run_python" || name == "run_bash" {
			t.Errorf("a viewer is offered %s", name)
		}
	}
	b.shot("sessions-viewer.png")

	if ex := b.exceptions(); len(ex) > 0 {
		t.Errorf("the page threw: %v", ex)
	}
}
