package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/model/modeltest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// client makes a Client of srv's endpoint, with change applied to its
// config.
func client(t *testing.T, baseURL string, change func(*config.ModelConfig)) *Client {
	t.Helper()
	cfg := config.ModelConfig{BaseURL: baseURL, Model: modeltest.DefaultModel, TimeoutSeconds: 20, MaxTokens: 100}
	if change != nil {
		change(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// assertFails checks that err is an *errcode.Error of code whose message
// holds every one of want.
func assertFails(t *testing.T, err error, code string, want ...string) {
	t.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v, want an *errcode.Error of code %s", err, err, code)
	}
	if e.Code != code {
		t.Errorf("code %s, want %s (message: %s)", e.Code, code, e.Message)
	}
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Errorf("message %q\ndoes not say %q", e.Message, w)
		}
	}
}

func TestAskEchoes(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	c := client(t, srv.URL, nil)
	ans, err := c.Ask(t.Context(), sdk.ModelRequest{System: "Be brief.", Prompt: "hello there"})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "echo: hello there" || ans.Model != modeltest.DefaultModel {
		t.Errorf("answer %+v", ans)
	}
	if ans.InputTokens != 4 || ans.OutputTokens != 3 {
		t.Errorf("tokens in %d, out %d; want the server's usage, 4 and 3", ans.InputTokens, ans.OutputTokens)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	want := []modeltest.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hello there"}}
	if fmt.Sprint(r.Messages) != fmt.Sprint(want) || r.Model != modeltest.DefaultModel || !r.Stream || !r.IncludeUsage ||
		r.MaxTokens != 100 || r.ResponseFormat != "" || r.Path != "/v1/chat/completions" {
		t.Errorf("request %+v", r)
	}
	if r.Authorization != "" {
		t.Errorf("with no key configured, the request carried Authorization %q", r.Authorization)
	}
}

func TestAskMaxTokensAndJSON(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	c := client(t, srv.URL, nil)
	ans, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "a list", JSON: true, MaxTokens: 7})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != modeltest.EchoJSON("a list") {
		t.Errorf("answer %q", ans.Text)
	}
	r := srv.Requests()[0]
	if r.ResponseFormat != "json_object" || r.MaxTokens != 7 {
		t.Errorf("response_format %q, max_tokens %d; want json_object and 7", r.ResponseFormat, r.MaxTokens)
	}
	if len(r.Messages) != 1 {
		t.Errorf("with no system text, messages %+v", r.Messages)
	}
}

// TestAskStreamsPieces: the first piece reaches OnText while the server
// holds the rest of the answer.
func TestAskStreamsPieces(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	firstSeen := make(chan struct{})
	heldInVain := false
	srv.Script(modeltest.Reply{Chunks: []string{"one ", "two ", "three"}, BeforeChunk: func(i int) {
		if i != 1 {
			return
		}
		select {
		case <-firstSeen:
		case <-time.After(15 * time.Second):
			heldInVain = true
		}
	}})
	c := client(t, srv.URL, nil)
	var pieces []string
	ans, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "count", OnText: func(s string) {
		if len(pieces) == 0 {
			close(firstSeen)
		}
		pieces = append(pieces, s)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if heldInVain {
		t.Error("the first piece did not reach OnText while the server held back the rest")
	}
	if ans.Text != "one two three" || strings.Join(pieces, "|") != "one |two |three" {
		t.Errorf("answer %q in pieces %q", ans.Text, pieces)
	}
}

func TestAPIKeyFromEnv(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{Key: "k-123"})
	t.Setenv("TH_TEST_MODEL_KEY", "  k-123\n")
	c := client(t, srv.URL, func(m *config.ModelConfig) { m.APIKeyEnv = "TH_TEST_MODEL_KEY" })
	if _, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Authorization; got != "Bearer k-123" {
		t.Errorf("Authorization %q, want the key as a bearer token", got)
	}
}

func TestAPIKeyFromFile(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{Key: "k-456"})
	file := filepath.Join(t.TempDir(), "model.key")
	if err := os.WriteFile(file, []byte("k-456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := client(t, srv.URL, func(m *config.ModelConfig) { m.APIKeyFile = file })
	if _, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Authorization; got != "Bearer k-456" {
		t.Errorf("Authorization %q, want the key as a bearer token", got)
	}
}

func TestAPIKeyProblems(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := write("open.key", "k", 0o644)
	empty := write("empty.key", " \n", 0o600)
	lines := write("lines.key", "k1\nk2\n", 0o600)
	t.Setenv("TH_TEST_EMPTY_KEY", "")
	os.Unsetenv("TH_TEST_UNSET_KEY")
	tests := []struct {
		name   string
		change func(*config.ModelConfig)
		want   string
	}{
		{"env unset", func(m *config.ModelConfig) { m.APIKeyEnv = "TH_TEST_UNSET_KEY" },
			"[model] api_key_env names the environment variable TH_TEST_UNSET_KEY, which is not set: set it to the API key in the host's environment"},
		{"env empty", func(m *config.ModelConfig) { m.APIKeyEnv = "TH_TEST_EMPTY_KEY" },
			"the environment variable TH_TEST_EMPTY_KEY ([model] api_key_env) is empty: it should hold the API key"},
		{"file missing", func(m *config.ModelConfig) { m.APIKeyFile = filepath.Join(dir, "none.key") },
			"can't read the API key file " + filepath.Join(dir, "none.key") + " ([model] api_key_file): no such file or directory"},
		{"file others read", func(m *config.ModelConfig) { m.APIKeyFile = open },
			"the API key file " + open + " ([model] api_key_file) can be read by every user of this machine: run `chmod 600 " + open + "`"},
		{"file empty", func(m *config.ModelConfig) { m.APIKeyFile = empty },
			"the API key file " + empty + " ([model] api_key_file) is empty"},
		{"file of lines", func(m *config.ModelConfig) { m.APIKeyFile = lines },
			"the API key file " + lines + " ([model] api_key_file) holds more than the key"},
		{"both", func(m *config.ModelConfig) { m.APIKeyEnv, m.APIKeyFile = "X", open }, "[model] sets both api_key_env and api_key_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.ModelConfig{Model: "m"}
			tt.change(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "k1") {
				t.Errorf("the error quotes the key: %v", err)
			}
		})
	}
}

// TestEnvironmentIsNotRead: OPENAI_API_KEY and OPENAI_BASE_URL, which the
// library's client reads by default, neither send a key nor move calls.
func TestEnvironmentIsNotRead(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	elsewhere := modeltest.New(t, modeltest.Options{})
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", elsewhere.URL)
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	c := client(t, srv.URL, nil)
	if _, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	if n := len(elsewhere.Requests()); n != 0 {
		t.Errorf("OPENAI_BASE_URL got %d requests", n)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Authorization != "" {
		t.Errorf("requests %+v, want one without Authorization", reqs)
	}
}

// TestKeyNotSentElsewhere: an endpoint that redirects to another server
// does not hand it the key.
func TestKeyNotSentElsewhere(t *testing.T) {
	other := modeltest.New(t, modeltest.Options{})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/chat/completions", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	t.Setenv("TH_TEST_MODEL_KEY", "k-789")
	c := client(t, redirector.URL+"/v1", func(m *config.ModelConfig) { m.APIKeyEnv = "TH_TEST_MODEL_KEY" })
	_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	for _, r := range other.Requests() {
		if strings.Contains(r.Authorization, "k-789") {
			t.Errorf("the key went to the server redirected to (the call's error: %v)", err)
		}
	}
	assertFails(t, err, wire.CodeModelFailed, "the model at "+redirector.URL+"/v1 sent the call on to "+
		strings.TrimSuffix(other.URL, "/v1")+", another server, where the host does not follow it (it would take the API key along): if the model is there, set [model] base_url to it")
}

func TestNotConfigured(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	c := client(t, srv.URL, func(m *config.ModelConfig) { m.Model = "" })
	if c.Configured() {
		t.Error("configured with no model")
	}
	_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeUnsupported, "no model is configured: set [model] model in the host's config", srv.URL)
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests made", n)
	}
}

func TestUnreachable(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	srv.Close()
	c := client(t, srv.URL, nil)
	_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelUnreachable, "the model at "+srv.URL+" can't be reached: the connection was refused",
		"Is the model server running (Ollama: `ollama serve`, then `ollama pull "+modeltest.DefaultModel+"`)?",
		"Set [model] base_url to where it listens and [model] model to a model it serves")
}

func TestUnresolvable(t *testing.T) {
	c := client(t, "http://no-such-host.invalid/v1", nil)
	_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelUnreachable, "the model at http://no-such-host.invalid/v1 can't be reached: the name no-such-host.invalid does not resolve")
}

func TestUnauthorized(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{Key: "right"})
	t.Run("wrong key", func(t *testing.T) {
		t.Setenv("TH_TEST_MODEL_KEY", "wrong")
		c := client(t, srv.URL, func(m *config.ModelConfig) { m.APIKeyEnv = "TH_TEST_MODEL_KEY" })
		_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		assertFails(t, err, wire.CodeModelUnauthorized, "the model at "+srv.URL+" refused the API key from the environment variable TH_TEST_MODEL_KEY ([model] api_key_env) (HTTP 401 Unauthorized: Incorrect API key provided.): check that key")
	})
	t.Run("no key", func(t *testing.T) {
		c := client(t, srv.URL, nil)
		_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		assertFails(t, err, wire.CodeModelUnauthorized, "the model at "+srv.URL+" wants an API key (HTTP 401 Unauthorized: Incorrect API key provided.), and none is configured: set [model] api_key_env")
	})
	t.Run("forbidden, key file", func(t *testing.T) {
		srv := modeltest.New(t, modeltest.Options{})
		srv.Script(modeltest.Error(http.StatusForbidden, "You are not allowed to use this model."))
		file := filepath.Join(t.TempDir(), "k")
		if err := os.WriteFile(file, []byte("k"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := client(t, srv.URL, func(m *config.ModelConfig) { m.APIKeyFile = file })
		_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		assertFails(t, err, wire.CodeModelUnauthorized, "refused access with the API key from the file "+file+" ([model] api_key_file) (HTTP 403 Forbidden: You are not allowed to use this model.)")
	})
	t.Run("key echoed back", func(t *testing.T) {
		srv := modeltest.New(t, modeltest.Options{})
		srv.Script(modeltest.Error(http.StatusUnauthorized, "Incorrect API key provided: sk-secret-1."))
		t.Setenv("TH_TEST_MODEL_KEY", "sk-secret-1")
		c := client(t, srv.URL, func(m *config.ModelConfig) { m.APIKeyEnv = "TH_TEST_MODEL_KEY" })
		_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		assertFails(t, err, wire.CodeModelUnauthorized, "Incorrect API key provided: [the API key].")
		if strings.Contains(err.Error(), "sk-secret-1") {
			t.Errorf("the error quotes the key: %v", err)
		}
	})
}

func TestModelNotFound(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{Models: []string{"llama3.2", "qwen2.5"}})
	c := client(t, srv.URL, func(m *config.ModelConfig) { m.Model = "gpt-5" })
	_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelNotFound, `the model "gpt-5" is not served by `+srv.URL+
		" (HTTP 404 Not Found: The model `gpt-5` does not exist or you do not have access to it.): set [model] model to one it serves: \"llama3.2\", \"qwen2.5\"")
}

func TestWrongBaseURL(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	root := strings.TrimSuffix(srv.URL, "/v1")
	c := client(t, root, nil)
	_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelFailed, root+"/chat/completions does not exist (HTTP 404 Not Found: 404 page not found): is [model] base_url right?")
}

func TestRateLimited(t *testing.T) {
	limited := func(after string) modeltest.Reply {
		r := modeltest.Error(http.StatusTooManyRequests, "Rate limit reached.")
		r.RetryAfter = after
		return r
	}
	t.Run("twice", func(t *testing.T) {
		srv := modeltest.New(t, modeltest.Options{})
		srv.Script(limited("1"), limited("1"))
		_, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		assertFails(t, err, wire.CodeModelRateLimited, "the model at "+srv.URL+" is refusing calls for now (HTTP 429 Too Many Requests: Rate limit reached.), still after waiting 1 s as it asked: try again later")
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%d requests, want 2: the call and its one retry", n)
		}
	})
	t.Run("then answered", func(t *testing.T) {
		srv := modeltest.New(t, modeltest.Options{})
		srv.Script(limited("1"))
		ans, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		if err != nil || ans.Text != "echo: hi" {
			t.Fatalf("answer %+v, error %v", ans, err)
		}
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
	t.Run("as an HTTP date", func(t *testing.T) {
		srv := modeltest.New(t, modeltest.Options{})
		srv.Script(limited(time.Now().Add(time.Second).UTC().Format(http.TimeFormat)))
		if _, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("without Retry-After", func(t *testing.T) {
		srv := modeltest.New(t, modeltest.Options{})
		srv.Script(limited(""))
		_, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		assertFails(t, err, wire.CodeModelRateLimited, "(HTTP 429 Too Many Requests: Rate limit reached.), without saying when to try again")
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("longer than the call may wait", func(t *testing.T) {
		srv := modeltest.New(t, modeltest.Options{})
		srv.Script(limited("3600"))
		_, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
		assertFails(t, err, wire.CodeModelRateLimited, "and asked to wait 3600 s, longer than this call can wait")
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

func TestServerErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply modeltest.Reply
		want  string
	}{
		{"500", modeltest.Error(500, "The server had an error while processing your request."),
			"failed (HTTP 500 Internal Server Error: The server had an error while processing your request.)"},
		{"503 ollama's shape", modeltest.Reply{Status: 503, Body: `{"error":"server busy, please try again.  maximum pending requests exceeded"}`},
			"failed (HTTP 503 Service Unavailable: server busy, please try again. maximum pending requests exceeded)"},
		{"502 not json", modeltest.Reply{Status: 502, Body: "<html>\n<h1>502 Bad Gateway</h1></html>"},
			"failed (HTTP 502 Bad Gateway: <html> <h1>502 Bad Gateway</h1></html>)"},
		{"500 empty", modeltest.Reply{Status: 500}, "failed (HTTP 500 Internal Server Error)"},
		{"400", modeltest.Error(400, "This model's maximum context length is 8192 tokens."),
			"refused the request (HTTP 400 Bad Request: This model's maximum context length is 8192 tokens.)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.New(t, modeltest.Options{})
			srv.Script(tt.reply)
			_, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
			assertFails(t, err, wire.CodeModelFailed, "the model at "+srv.URL+" "+tt.want)
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1: no retries", n)
			}
		})
	}
}

func TestStreamError(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	srv.Script(modeltest.Reply{Chunks: []string{"Half an "}, StreamError: "The model is overloaded."})
	_, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelFailed, "the model at "+srv.URL+" stopped with an error after 8 characters of the answer, in 1 piece: The model is overloaded.")
}

func TestCutOff(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	srv.Script(modeltest.Reply{Chunks: []string{"Once ", "upon "}, Cut: true})
	var got []string
	_, err := client(t, srv.URL, nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi", OnText: func(s string) { got = append(got, s) }})
	assertFails(t, err, wire.CodeModelCutOff, "the model at "+srv.URL+" stopped answering midway", "after 10 characters of the answer, in 2 pieces")
	if len(got) != 2 {
		t.Errorf("pieces %q before the cut", got)
	}
}

// TestCutOffCleanly: a stream that ends in good order but without a
// finish_reason or [DONE] was cut off too.
func TestCutOffCleanly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Once"},"finish_reason":null}]}`+"\n\n")
	}))
	t.Cleanup(srv.Close)
	_, err := client(t, srv.URL+"/v1", nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelCutOff, "its stream ended without saying it had finished, after 4 characters of the answer, in 1 piece")
}

// TestDoneWithoutFinishReason: [DONE] ends an answer whose chunks named
// no finish_reason.
func TestDoneWithoutFinishReason(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Once"}}]}`+"\n\n")
		fmt.Fprint(w, ": a comment\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	ans, err := client(t, srv.URL+"/v1", nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	if err != nil || ans.Text != "Once" || ans.Model != "m" {
		t.Errorf("answer %+v, error %v", ans, err)
	}
}

// TestWholeAnswer: a server that ignores "stream": true and answers with
// one JSON document is read all the same.
func TestWholeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"All at once."}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`)
	}))
	t.Cleanup(srv.Close)
	var pieces []string
	ans, err := client(t, srv.URL+"/v1", nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi", OnText: func(s string) { pieces = append(pieces, s) }})
	if err != nil || ans.Text != "All at once." || ans.InputTokens != 3 || ans.OutputTokens != 4 || len(pieces) != 1 {
		t.Errorf("answer %+v, pieces %q, error %v", ans, pieces, err)
	}
}

// TestNotAnAPI: a server that answers with something else says so.
func TestNotAnAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {not json\n\n")
	}))
	t.Cleanup(srv.Close)
	_, err := client(t, srv.URL+"/v1", nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelFailed, "sent a piece of its answer that is not JSON")
}

// TestEndlessAnswer: a server that streams without end is stopped at the
// bound on an answer's size, not when the host runs out of memory.
func TestEndlessAnswer(t *testing.T) {
	piece := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 64 && r.Context().Err() == nil; i++ {
			fmt.Fprintf(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"%s"}}]}`+"\n\n", piece)
		}
	}))
	t.Cleanup(srv.Close)
	_, err := client(t, srv.URL+"/v1", nil).Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeModelFailed, "sent an answer over 16 MiB")
}

// hold scripts a reply whose second chunk waits until the test ends.
func hold(t *testing.T, srv *modeltest.Server) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the server's Close
	srv.Script(modeltest.Reply{Chunks: []string{"first ", "second"}, BeforeChunk: func(i int) {
		if i == 1 {
			<-release
		}
	}})
}

func TestTimeout(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	hold(t, srv)
	c := client(t, srv.URL, func(m *config.ModelConfig) { m.TimeoutSeconds = 1 })
	_, err := c.Ask(t.Context(), sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeTimeout, "the model at "+srv.URL+" did not finish answering within 1 s ([model] timeout_seconds), after 6 characters of the answer, in 1 piece: raise timeout_seconds")
}

func TestCallerDeadline(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	hold(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := client(t, srv.URL, nil).Ask(ctx, sdk.ModelRequest{Prompt: "hi"})
	assertFails(t, err, wire.CodeTimeout, "the call's time ran out while the model at "+srv.URL+" was answering, after 6 characters of the answer, in 1 piece")
}

func TestCallerCancels(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{})
	hold(t, srv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := client(t, srv.URL, nil).Ask(ctx, sdk.ModelRequest{Prompt: "hi", OnText: func(string) { cancel() }})
	var e *errcode.Error
	if !errors.Is(err, context.Canceled) || errors.As(err, &e) {
		t.Errorf("error %T %v, want context.Canceled", err, err)
	}
}
