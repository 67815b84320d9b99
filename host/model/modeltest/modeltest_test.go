package modeltest

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestNotStreamed(t *testing.T) {
	s := New(t, Options{})
	res := post(t, s.URL, `{"model":"test-model","max_completion_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"two words"}]}]}`)
	var got struct {
		Model   string
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct{ Content string }
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || got.Model != DefaultModel || len(got.Choices) != 1 || got.Choices[0].Message.Content != "echo: two words" ||
		got.Choices[0].FinishReason != "stop" || got.Usage.PromptTokens != 2 {
		t.Errorf("status %d, answer %+v", res.StatusCode, got)
	}
	r := s.Requests()[0]
	if r.MaxTokens != 9 || r.Stream || r.Authorization != "Bearer k" || r.Messages[0].Content != "two words" {
		t.Errorf("recorded %+v", r)
	}
}

func TestStreamed(t *testing.T) {
	s := New(t, Options{})
	s.Script(Text("a", "b"))
	res := post(t, s.URL, `{"model":"test-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var lines []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 7 || lines[0] != ": modeltest" || !strings.Contains(lines[2], `"content":"a"`) ||
		!strings.Contains(lines[4], `"finish_reason":"stop"`) || !strings.Contains(lines[5], `"usage"`) || lines[6] != "data: [DONE]" {
		t.Errorf("stream:\n%s", strings.Join(lines, "\n"))
	}
}

func TestCutAndErrors(t *testing.T) {
	s := New(t, Options{Models: []string{"m"}})
	limited := Error(429, "slow down")
	limited.RetryAfter = "2"
	s.Script(Reply{Chunks: []string{"a"}, Cut: true}, limited)

	res := post(t, s.URL, `{"model":"m","stream":true,"messages":[]}`)
	if _, err := io.ReadAll(res.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut stream read to the end with %v, want an unexpected EOF", err)
	}
	res = post(t, s.URL, `{"model":"m","messages":[]}`)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "2" || !strings.Contains(string(body), `"message":"slow down"`) {
		t.Errorf("status %d, Retry-After %q, body %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	res = post(t, s.URL, `{"model":"other","messages":[]}`)
	if res.StatusCode != 404 {
		t.Errorf("an unknown model: status %d", res.StatusCode)
	}
	res, err := http.Get(s.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ = io.ReadAll(res.Body)
	if !strings.Contains(string(body), `"id":"m"`) {
		t.Errorf("models: %s", body)
	}
}

func TestKey(t *testing.T) {
	s := New(t, Options{Key: "right"})
	res := post(t, s.URL, `{"model":"test-model","messages":[]}`)
	if res.StatusCode != 401 {
		t.Errorf("a wrong key: status %d", res.StatusCode)
	}
}
