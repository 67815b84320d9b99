package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

const chromiumPath = "/usr/bin/chromium"

// colorScheme makes the page see a light or dark system theme.
func colorScheme(v string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}},
		})
		return err
	})
}

// ensureChromium installs Chromium with apt when it is missing.
func ensureChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return
	}
	if os.Geteuid() != 0 {
		t.Fatalf("the browser test needs %s; install it (apt-get install chromium) or run the tests as root so they can", chromiumPath)
	}
	t.Log("installing chromium with apt")
	cmd := exec.Command("sh", "-c", "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing chromium: %v\n%s", err, out)
	}
}

// uiState is what the page shows of a run, read in the page.
type uiState struct {
	Lines   int    `json:"lines"`
	Result  bool   `json:"result"`
	Status  string `json:"status"`
	Run     string `json:"run"`
	Error   string `json:"error"`
	Recent  int    `json:"recent"`
	Output  string `json:"output"`
	SignIn  bool   `json:"signin"`
	Visible bool   `json:"visible"`
}

const readUI = `(() => ({
  lines: document.querySelectorAll("#output .line.stdout").length,
  result: !document.getElementById("result-wrap").hidden,
  status: document.getElementById("run-status").textContent,
  run: document.getElementById("run-id").textContent,
  error: document.getElementById("run-error").hidden ? "" : document.getElementById("run-error").innerText,
  recent: document.querySelectorAll("#recent button").length,
  output: document.getElementById("output").textContent,
  signin: !document.getElementById("signin-view").hidden,
  visible: !document.getElementById("run-view").hidden,
}))()`

// browser starts a headless Chromium for the test and returns its tab.
func browser(t *testing.T) context.Context {
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
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

func TestBrowserSignInRunWatchCancelReopen(t *testing.T) {
	h := startHost(t, hostSpec{Config: tokensConfig(), Tools: map[string]string{
		"say.toml": `name = "say"
description = "Say each argument on its own line, slowly, and return them all."
[[params]]
name = "greeting"
kind = "text"
required = true
description = "What to say first."
[[params]]
name = "times"
kind = "integer"
[[params]]
name = "loud"
kind = "bool"
[[params]]
name = "mood"
kind = "text"
options = ["calm", "cheerful", "grumpy"]
[[params]]
name = "extra"
kind = "json"
description = "Anything else, as JSON."
[run]
type = "echo"
delay_ms = 400
`,
		"wait.toml": `name = "wait_long"
description = "Takes ten seconds per line: a run to cancel."
[[params]]
name = "what"
kind = "text"
[run]
type = "echo"
delay_ms = 10000
`,
	}})

	ctx := browser(t)

	state := func() uiState {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[uiState](readUI))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return s
	}
	waitFor := func(what string, ok func(uiState) bool) uiState {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			s := state()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed %s; it shows %+v", what, s)
			}
			time.Sleep(30 * time.Millisecond)
		}
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	screenshot := func() []byte {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`), chromedp.Sleep(300*time.Millisecond)); err != nil {
			t.Fatalf("scrolling up: %v", err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("taking a screenshot: %v", err)
		}
		return png
	}

	// Sign in: a wrong token is refused, the right one lets us in.
	run("opening the UI", chromedp.Navigate(h.URL("/")), chromedp.WaitVisible(chromedp.CSS("#token")))
	run("signing in with a wrong token",
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#signin-error")))
	msg := text("#signin-error")
	if err := os.MkdirAll("artifacts", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("artifacts", "signin.png"), screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "not one this host knows") {
		t.Errorf("the sign-in error says %q", msg)
	}
	run("signing in",
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), editorToken),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#tools button[data-tool="say"]`)))
	who := text("#who")
	if !strings.Contains(who, "eddie") {
		t.Errorf("signed in as %q, want eddie", who)
	}

	// The form is made from the params: the right input for each kind.
	run("opening the tool", chromedp.Click(chromedp.CSS(`#tools button[data-tool="say"]`)), chromedp.WaitVisible(chromedp.CSS("#p-greeting")))
	kinds, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll("[data-param]")].map(e => [e.dataset.param, e.tagName.toLowerCase() + ":" + (e.type || "") + ":" + (e.required ? "required" : "")]))`))
	if err != nil {
		t.Fatalf("reading the form: %v", err)
	}
	want := map[string]string{
		"greeting": "textarea:textarea:required", "times": "input:number:", "loud": "input:checkbox:",
		"mood": "select:select-one:", "extra": "textarea:textarea:",
	}
	for k, v := range want {
		if kinds[k] != v {
			t.Errorf("param %s is a %q, want %q", k, kinds[k], v)
		}
	}
	if form := text("#fields"); strings.Contains(form, "null") || !strings.Contains(form, "What to say first.") {
		t.Errorf("the form reads %q", form)
	}

	// Bad JSON is caught in the page, before anything runs.
	run("filling the form with bad JSON",
		chromedp.SendKeys(chromedp.CSS("#p-greeting"), "hello there"),
		chromedp.SendKeys(chromedp.CSS("#p-times"), "3"),
		chromedp.Click(chromedp.CSS("#p-loud")),
		chromedp.SetValue(chromedp.CSS("#p-mood"), `"cheerful"`),
		chromedp.SendKeys(chromedp.CSS("#p-extra"), `{"a": `),
		chromedp.Click(chromedp.CSS("#run-button")),
		chromedp.WaitVisible(chromedp.CSS(`[data-field="extra"] .field-error`)))
	if s := state(); s.Visible {
		t.Fatal("a form with bad JSON was run")
	}

	// Run it: lines appear one by one, before the result.
	run("fixing the JSON and running",
		chromedp.SetValue(chromedp.CSS("#p-extra"), `{"a": [1, 2]}`),
		chromedp.Click(chromedp.CSS("#run-button")))
	streaming := waitFor("a streamed line before the result", func(s uiState) bool { return s.Lines >= 1 && !s.Result })
	if streaming.Status != "running" {
		t.Errorf("while lines stream the status is %q", streaming.Status)
	}
	done := waitFor("the result", func(s uiState) bool { return s.Result })
	if done.Lines != 5 || done.Status != "done" || !strings.Contains(done.Output, "greeting=hello there") || !strings.Contains(done.Output, "loud=true") {
		t.Errorf("after the run the page shows %+v", done)
	}
	result := text("#result")
	if !strings.Contains(result, `"echoed": {`) || !strings.Contains(result, `"mood": "cheerful"`) {
		t.Errorf("the result shown is %q", result)
	}
	firstRun := done.Run

	// The screenshots, light and dark, for a person to judge.
	dir := "artifacts"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png := screenshot()
	if err := os.WriteFile(filepath.Join(dir, "ui.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	run("going dark", colorScheme("dark"), chromedp.Sleep(200*time.Millisecond))
	png = screenshot()
	if err := os.WriteFile(filepath.Join(dir, "ui-dark.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	run("back to light", colorScheme("light"))
	run("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if err := os.WriteFile(filepath.Join(dir, "ui-phone.png"), screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}
	run("back to a desktop screen", chromedp.EmulateViewport(1280, 900))

	// Cancel a long run.
	run("starting a long run",
		chromedp.Click(chromedp.CSS(`#tools button[data-tool="wait_long"]`)),
		chromedp.WaitVisible(chromedp.CSS("#p-what")),
		chromedp.SendKeys(chromedp.CSS("#p-what"), "never printed"),
		chromedp.Click(chromedp.CSS("#run-button")))
	waitFor("the long run started", func(s uiState) bool { return s.Run != "" && s.Run != firstRun && s.Status == "running" })
	run("cancelling", chromedp.Click(chromedp.CSS("#cancel-button")))
	cancelled := waitFor("the run cancelled", func(s uiState) bool { return s.Status == "cancelled" })
	if !strings.Contains(cancelled.Error, "Cancelled") || cancelled.Lines != 0 || cancelled.Recent != 2 {
		t.Errorf("after cancelling the page shows %+v", cancelled)
	}

	// Re-open the first run from the recent list: it is attached again.
	run("re-opening the first run", chromedp.Click(chromedp.CSS(`#recent button[data-run="`+firstRun+`"]`)))
	again := waitFor("the first run replayed", func(s uiState) bool { return s.Run == firstRun && s.Result })
	if again.Lines != 5 || again.Status != "done" {
		t.Errorf("the re-opened run shows %+v", again)
	}
}

// With no tokens configured the UI skips signing in.
func TestBrowserWithoutTokensNeedsNoSignIn(t *testing.T) {
	h := startHost(t, hostSpec{Tools: map[string]string{"say.toml": echoTool("say", 1, 0)}})
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(h.URL("/")), chromedp.WaitVisible(chromedp.CSS(`#tools button[data-tool="say"]`))); err != nil {
		t.Fatalf("the tool list did not show: %v", err)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("signin-view").hidden && document.getElementById("signout").hidden`))
	if err != nil || !hidden {
		t.Fatalf("a host without tokens asks to sign in (%v)", err)
	}
}
