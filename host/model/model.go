// Package model is the host's client of its model: the one
// OpenAI-compatible chat endpoint of [model] in the config (Ollama, vLLM,
// llama.cpp's server, OpenAI …), which the host asks for every model call a
// kind makes through sdk.Host.AskModel.
//
// A call streams: each piece of the answer reaches the caller as the model
// writes it. A model that can't answer is an *errcode.Error in plain words
// naming the endpoint and the fix, with one of the codes model_unreachable,
// model_unauthorized, model_not_found, model_rate_limited, model_failed,
// model_cut_off, timeout, or unsupported when no model is configured. The
// one retry is after an HTTP 429 whose Retry-After the call can wait for.
//
// The wire protocol is openai/openai-go's (request building, server-sent
// events, answer chunks), with its own retries off and the environment's
// OPENAI_* variables not read: the config alone says where calls go and
// which key they carry.
package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

const (
	// maxRetryWait is the longest a call waits for a Retry-After before
	// its one retry; a longer wait is reported instead of waited for.
	maxRetryWait = 30 * time.Second
	// maxAnswerBytes bounds the text of one answer, whatever the server
	// sends.
	maxAnswerBytes = 16 << 20
	// maxErrorBody is how much of an error response is read.
	maxErrorBody = 64 << 10
	// listTimeout bounds the listing of served models that a 404 makes.
	listTimeout = 5 * time.Second
)

// Client asks the configured model. It is safe for concurrent use.
type Client struct {
	cfg config.ModelConfig
	key string
	// keyFrom says where the key comes from, for messages: "the
	// environment variable X ([model] api_key_env)".
	keyFrom string
	chat    openai.ChatCompletionService
	models  openai.ModelService
}

// New makes the client of cfg, reading the API key from the environment
// variable or file cfg names. A variable that is not set, or a file that
// can't be read, is empty, or that other users may read, is an error
// saying so. A cfg with no model is a client whose every call is refused
// with wire.CodeUnsupported.
func New(cfg config.ModelConfig) (*Client, error) {
	c := &Client{cfg: cfg}
	if c.cfg.BaseURL == "" {
		c.cfg.BaseURL = config.DefaultModelBaseURL
	}
	c.cfg.BaseURL = strings.TrimRight(c.cfg.BaseURL, "/")
	if c.cfg.TimeoutSeconds <= 0 {
		c.cfg.TimeoutSeconds = 120
	}
	if c.cfg.MaxTokens <= 0 {
		c.cfg.MaxTokens = 1024
	}
	var err error
	switch {
	case cfg.APIKeyEnv != "" && cfg.APIKeyFile != "":
		return nil, errors.New("[model] sets both api_key_env and api_key_file: keep one")
	case cfg.APIKeyEnv != "":
		c.keyFrom = fmt.Sprintf("the environment variable %s ([model] api_key_env)", cfg.APIKeyEnv)
		c.key, err = keyFromEnv(cfg.APIKeyEnv)
	case cfg.APIKeyFile != "":
		c.keyFrom = fmt.Sprintf("the file %s ([model] api_key_file)", cfg.APIKeyFile)
		c.key, err = keyFromFile(cfg.APIKeyFile)
	}
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithBaseURL(c.cfg.BaseURL + "/"),
		option.WithHTTPClient(&http.Client{CheckRedirect: sameOrigin}),
		// The one retry is Ask's own, after a 429.
		option.WithMaxRetries(0),
	}
	if c.key != "" {
		opts = append(opts, option.WithAPIKey(c.key))
	}
	// The services, not openai.NewClient: that one adds OPENAI_API_KEY,
	// OPENAI_BASE_URL and other variables of the environment, which would
	// send a key the config does not name to a server it does not name.
	c.chat = openai.NewChatCompletionService(opts...)
	c.models = openai.NewModelService(opts...)
	return c, nil
}

func keyFromEnv(name string) (string, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("[model] api_key_env names the environment variable %s, which is not set: "+
			"set it to the API key in the host's environment (for systemd, Environment= or EnvironmentFile= in the unit)", name)
	}
	return checkKey(strings.TrimSpace(v), "the environment variable "+name+" ([model] api_key_env)")
}

func keyFromFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("can't read the API key file %s ([model] api_key_file): %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("can't read the API key file %s ([model] api_key_file): %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("the API key file %s ([model] api_key_file) is not a regular file", path)
	}
	if st.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("the API key file %s ([model] api_key_file) can be read by every user of this machine: "+
			"run `chmod 600 %s` (and chown it to the host's user)", path, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxErrorBody+1))
	if err != nil {
		return "", fmt.Errorf("can't read the API key file %s ([model] api_key_file): %w", path, err)
	}
	if len(data) > maxErrorBody {
		return "", fmt.Errorf("the API key file %s ([model] api_key_file) is over 64 KiB: it should hold the key alone", path)
	}
	return checkKey(strings.TrimSpace(string(data)), "the API key file "+path+" ([model] api_key_file)")
}

// checkKey refuses an empty key, and one that can't be a header value
// (several lines, spaces, control characters). The key is never quoted.
func checkKey(key, from string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%s is empty: it should hold the API key", from)
	}
	for _, r := range key {
		if r <= ' ' || r == 0x7f || r > '~' {
			return "", fmt.Errorf("%s holds more than the key (spaces, several lines or characters that can't be sent): it should hold the API key alone", from)
		}
	}
	return key, nil
}

// Configured says whether a model is configured.
func (c *Client) Configured() bool { return c.cfg.Configured() }

// Ask asks the model req.Prompt (after req.System, when set) and returns
// the whole answer. Each piece of the answer is passed to req.OnText as it
// arrives, in order, from the calling goroutine. The call as a whole,
// the one wait after a 429 included, takes at most [model]
// timeout_seconds.
//
// The error is an *errcode.Error (see the package's doc), or ctx.Err()
// when ctx was cancelled; a ctx whose deadline passed is wire.CodeTimeout.
func (c *Client) Ask(ctx context.Context, req sdk.ModelRequest) (sdk.ModelAnswer, error) {
	if !c.Configured() {
		return sdk.ModelAnswer{}, errcode.Errorf(wire.CodeUnsupported,
			"no model is configured: set [model] model in the host's config to a model the endpoint at %s serves "+
				"(e.g. model = \"llama3.2\" after `ollama pull llama3.2`), and [model] base_url if the model is not Ollama on this machine",
			c.cfg.BaseURL)
	}
	limit := time.Duration(c.cfg.TimeoutSeconds) * time.Second
	callCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	a := &attempt{c: c, req: req}
	err := a.run(callCtx)
	var st *statusError
	if errors.As(err, &st) && st.status == http.StatusTooManyRequests {
		wait, asked := retryAfter(st.header.Get("Retry-After"), time.Now())
		deadline, _ := callCtx.Deadline()
		switch {
		case !asked:
			return sdk.ModelAnswer{}, c.rateLimited(st, "without saying when to try again")
		case wait > maxRetryWait || time.Now().Add(wait).After(deadline):
			return sdk.ModelAnswer{}, c.rateLimited(st, fmt.Sprintf("and asked to wait %s, longer than this call can wait", seconds(wait)))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			a = &attempt{c: c, req: req}
			err = a.run(callCtx)
			if errors.As(err, &st) && st.status == http.StatusTooManyRequests {
				return sdk.ModelAnswer{}, c.rateLimited(st, fmt.Sprintf("still after waiting %s as it asked", seconds(wait)))
			}
		case <-callCtx.Done():
			t.Stop()
			err = callCtx.Err()
		}
	}
	if err == nil {
		return a.answer(), nil
	}
	switch {
	case ctx.Err() == context.Canceled:
		return sdk.ModelAnswer{}, ctx.Err()
	case ctx.Err() == context.DeadlineExceeded:
		return sdk.ModelAnswer{}, errcode.Errorf(wire.CodeTimeout,
			"the call's time ran out while the model at %s was answering, %s", c.cfg.BaseURL, a.arrived())
	case callCtx.Err() == context.DeadlineExceeded:
		return sdk.ModelAnswer{}, errcode.Errorf(wire.CodeTimeout,
			"the model at %s did not finish answering within %d s ([model] timeout_seconds), %s: "+
				"raise timeout_seconds, or ask for a shorter answer", c.cfg.BaseURL, c.cfg.TimeoutSeconds, a.arrived())
	}
	return sdk.ModelAnswer{}, c.describe(callCtx, a, err)
}

// attempt is one request and its answer.
type attempt struct {
	c   *Client
	req sdk.ModelRequest

	responded bool         // the server sent a response's head
	sawDone   bool         // the stream's data: [DONE] went past
	whole     []byte       // a 200 answer that is JSON, not a stream
	text      bytes.Buffer // the answer so far
	pieces    int          // how many pieces of text arrived
	finished  bool         // a choice had a finish_reason
	model     string       // the model named in the answer
	usage     *openai.CompletionUsage
}

func (a *attempt) params() openai.ChatCompletionNewParams {
	var msgs []openai.ChatCompletionMessageParamUnion
	if a.req.System != "" {
		msgs = append(msgs, openai.SystemMessage(a.req.System))
	}
	msgs = append(msgs, openai.UserMessage(a.req.Prompt))
	maxTokens := a.req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = a.c.cfg.MaxTokens
	}
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(a.c.cfg.Model),
		Messages:      msgs,
		MaxTokens:     openai.Int(int64(maxTokens)),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if a.req.JSON {
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	}
	return p
}

// watch is the attempt's middleware: it takes an error response whole
// (as a *statusError, so the library's parsing of it does not stand
// between the status and the message), takes a 200 that is one JSON
// answer rather than a stream, and watches the stream for its [DONE].
func (a *attempt) watch(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil {
		return res, err
	}
	a.responded = true
	if res.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		res.Body.Close()
		return nil, &statusError{status: res.StatusCode, header: res.Header, body: body}
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
		body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes+1))
		res.Body.Close()
		if err != nil {
			return nil, err
		}
		a.whole = body
		return nil, errWhole
	}
	res.Body = &doneWatcher{ReadCloser: res.Body, done: &a.sawDone}
	return res, nil
}

// errWhole stops the library when the answer came whole, as JSON.
var errWhole = errors.New("the answer is one JSON document")

func (a *attempt) run(ctx context.Context) error {
	stream := a.c.chat.NewStreaming(ctx, a.params(), option.WithMiddleware(a.watch))
	defer stream.Close()
	for stream.Next() {
		chunk := stream.Current()
		if a.model == "" {
			a.model = chunk.Model
		}
		if chunk.Usage.JSON.CompletionTokens.Valid() || chunk.Usage.JSON.PromptTokens.Valid() {
			u := chunk.Usage
			a.usage = &u
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if err := a.add(ch.Delta.Content + ch.Delta.Refusal); err != nil {
				return err
			}
			if ch.FinishReason != "" {
				a.finished = true
			}
		}
	}
	err := stream.Err()
	if errors.Is(err, errWhole) {
		return a.takeWhole()
	}
	if err != nil {
		return err
	}
	if !a.finished && !a.sawDone {
		return errCutOff
	}
	return nil
}

var errCutOff = errors.New("the stream ended without the model saying it had finished")

// add takes one piece of the answer.
func (a *attempt) add(s string) error {
	if s == "" {
		return nil
	}
	if a.text.Len()+len(s) > maxAnswerBytes {
		return errTooLong
	}
	a.text.WriteString(s)
	a.pieces++
	if a.req.OnText != nil {
		a.req.OnText(s)
	}
	return nil
}

var errTooLong = fmt.Errorf("the answer grew past %d MiB", maxAnswerBytes>>20)

// takeWhole reads an answer that came as one JSON document.
func (a *attempt) takeWhole() error {
	if len(a.whole) > maxAnswerBytes {
		return errTooLong
	}
	var cc openai.ChatCompletion
	if err := json.Unmarshal(a.whole, &cc); err != nil {
		return &protocolError{err: err}
	}
	a.model = cc.Model
	if cc.Usage.JSON.CompletionTokens.Valid() {
		u := cc.Usage
		a.usage = &u
	}
	for _, ch := range cc.Choices {
		if ch.Index == 0 {
			a.finished = true
			return a.add(ch.Message.Content + ch.Message.Refusal)
		}
	}
	return &protocolError{err: errors.New("it holds no answer (no choices)")}
}

func (a *attempt) answer() sdk.ModelAnswer {
	ans := sdk.ModelAnswer{Text: a.text.String(), Model: a.model}
	if ans.Model == "" {
		ans.Model = a.c.cfg.Model
	}
	if a.usage != nil {
		ans.InputTokens, ans.OutputTokens = int(a.usage.PromptTokens), int(a.usage.CompletionTokens)
	}
	return ans
}

// arrived says how much of the answer arrived: "after 12 characters of
// the answer, in 3 pieces".
func (a *attempt) arrived() string {
	n := utf8.RuneCount(a.text.Bytes())
	switch {
	case n == 0:
		return "before any of the answer arrived"
	case a.pieces == 1:
		return fmt.Sprintf("after %d %s of the answer, in 1 piece", n, plural(n, "character"))
	}
	return fmt.Sprintf("after %d %s of the answer, in %d pieces", n, plural(n, "character"), a.pieces)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// describe turns a failed attempt's error into the user's words.
func (c *Client) describe(ctx context.Context, a *attempt, err error) error {
	var st *statusError
	var pe *protocolError
	switch {
	case errors.As(err, &st):
		return c.statusFailure(ctx, st)
	case errors.Is(err, errTooLong):
		return errcode.Errorf(wire.CodeModelFailed, "the model at %s sent an answer over %d MiB: ask for a shorter one (max_tokens)",
			c.cfg.BaseURL, maxAnswerBytes>>20)
	case errors.As(err, &pe):
		return errcode.Errorf(wire.CodeModelFailed, "the model at %s sent something that is not an OpenAI-compatible answer (%s): "+
			"is [model] base_url the endpoint's API (it usually ends in /v1)?", c.cfg.BaseURL, pe.err)
	case errors.Is(err, errCutOff):
		return errcode.Errorf(wire.CodeModelCutOff, "the model at %s stopped answering midway: its stream ended without saying it had finished, "+
			"%s; try again", c.cfg.BaseURL, a.arrived())
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		said := providerMessage(streamErr.Event.Data)
		if said == "" {
			said = clip(streamErr.Message)
		}
		return errcode.Errorf(wire.CodeModelFailed, "the model at %s stopped with an error %s: %s",
			c.cfg.BaseURL, a.arrived(), c.redact(said))
	}
	var re *redirectError
	if errors.As(err, &re) {
		return errcode.Errorf(wire.CodeModelFailed, "the model at %s sent the call on to %s, another server, where the host "+
			"does not follow it (it would take the API key along): if the model is there, set [model] base_url to it", c.cfg.BaseURL, re.to)
	}
	if !a.responded {
		return errcode.Errorf(wire.CodeModelUnreachable, "the model at %s can't be reached: %s. Is the model server running (Ollama: `ollama serve`, "+
			"then `ollama pull %s`)? Set [model] base_url to where it listens and [model] model to a model it serves", c.cfg.BaseURL, c.redact(transportReason(err)), c.cfg.Model)
	}
	var synErr *json.SyntaxError
	if errors.As(err, &synErr) {
		return errcode.Errorf(wire.CodeModelFailed, "the model at %s sent a piece of its answer that is not JSON (%s): "+
			"is [model] base_url an OpenAI-compatible API?", c.cfg.BaseURL, err)
	}
	return errcode.Errorf(wire.CodeModelCutOff, "the model at %s stopped answering midway (%s), %s; try again",
		c.cfg.BaseURL, c.redact(transportReason(err)), a.arrived())
}

// statusFailure says what an HTTP error status means.
func (c *Client) statusFailure(ctx context.Context, st *statusError) error {
	said := c.redact(st.said())
	switch {
	case st.status == http.StatusUnauthorized || st.status == http.StatusForbidden:
		verb := "refused the API key"
		if st.status == http.StatusForbidden {
			verb = "refused access with the API key"
		}
		if c.key == "" {
			return errcode.Errorf(wire.CodeModelUnauthorized, "the model at %s wants an API key (%s), and none is configured: "+
				"set [model] api_key_env to the name of an environment variable holding the key, or api_key_file to a file holding it",
				c.cfg.BaseURL, said)
		}
		return errcode.Errorf(wire.CodeModelUnauthorized, "the model at %s %s from %s (%s): check that key", c.cfg.BaseURL, verb, c.keyFrom, said)
	case st.status == http.StatusNotFound:
		served, listed := c.served(ctx)
		switch {
		case listed && !slices.Contains(served, c.cfg.Model), st.hasJSONError():
			msg := fmt.Sprintf("the model %q is not served by %s (%s): set [model] model to one it serves", c.cfg.Model, c.cfg.BaseURL, said)
			if listed && len(served) > 0 {
				msg += ": " + strings.Join(served, ", ")
			}
			return errcode.New(wire.CodeModelNotFound, msg)
		}
		return errcode.Errorf(wire.CodeModelFailed, "%s/chat/completions does not exist (%s): is [model] base_url right? "+
			"OpenAI-compatible servers usually serve their API under /v1, e.g. http://127.0.0.1:11434/v1", c.cfg.BaseURL, said)
	case st.status >= 500:
		return errcode.Errorf(wire.CodeModelFailed, "the model at %s failed (%s)", c.cfg.BaseURL, said)
	}
	return errcode.Errorf(wire.CodeModelFailed, "the model at %s refused the request (%s)", c.cfg.BaseURL, said)
}

func (c *Client) rateLimited(st *statusError, how string) error {
	return errcode.Errorf(wire.CodeModelRateLimited, "the model at %s is refusing calls for now (%s), %s: "+
		"try again later, or raise the rate limits of the account", c.cfg.BaseURL, c.redact(st.said()), how)
}

// served lists the models the endpoint serves, at most 20; false when
// it can't say.
func (c *Client) served(ctx context.Context) ([]string, bool) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	page, err := c.models.List(ctx)
	if err != nil || page == nil {
		return nil, false
	}
	var ids []string
	for _, m := range page.Data {
		if len(ids) == 20 {
			ids = append(ids, "…")
			break
		}
		ids = append(ids, fmt.Sprintf("%q", m.ID))
	}
	return ids, true
}

// redact keeps the key out of what a server said.
func (c *Client) redact(s string) string {
	if c.key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[the API key]")
}

// statusError is an HTTP error response, whole.
type statusError struct {
	status int
	header http.Header
	body   []byte
}

func (e *statusError) Error() string { return "HTTP " + strconv.Itoa(e.status) }

// hasJSONError says whether the body is an API's JSON error.
func (e *statusError) hasJSONError() bool {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(e.body, &v) == nil && len(v.Error) > 0 && string(v.Error) != "null"
}

// said is the status and what the server said of it: "HTTP 404: The
// model `x` does not exist", from the OpenAI error object, Ollama's
// {"error": "..."}, FastAPI's {"detail": ...}, or the body's text.
func (e *statusError) said() string {
	s := "HTTP " + strconv.Itoa(e.status)
	if t := http.StatusText(e.status); t != "" {
		s += " " + t
	}
	if m := providerMessage(e.body); m != "" {
		s += ": " + m
	}
	return s
}

func providerMessage(body []byte) string {
	var v map[string]json.RawMessage
	if json.Unmarshal(body, &v) == nil {
		for _, k := range []string{"error", "message", "detail"} {
			raw, ok := v[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return clip(s)
			}
			var obj struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
				return clip(obj.Message)
			}
			return clip(string(raw))
		}
		return ""
	}
	return clip(string(body))
}

// clip makes a server's text one line of at most 300 characters.
func clip(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "?")), " ")
	if utf8.RuneCountInString(s) > 300 {
		s = string([]rune(s)[:300]) + "…"
	}
	return s
}

// protocolError is an answer that is not what the protocol says.
type protocolError struct{ err error }

func (e *protocolError) Error() string { return e.err.Error() }

// transportReason says why a connection failed, in few words.
func transportReason(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused (nothing listens there)"
	case errors.As(err, &dns):
		return fmt.Sprintf("the name %s does not resolve", dns.Name)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection was closed"
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// sameOrigin follows a redirect within the endpoint's server only.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	from := via[0].URL
	if req.URL.Scheme != from.Scheme || req.URL.Host != from.Host {
		return &redirectError{to: req.URL.Scheme + "://" + req.URL.Host}
	}
	return nil
}

// redirectError is a redirect to another server.
type redirectError struct{ to string }

func (e *redirectError) Error() string { return "redirected to " + e.to }

// retryAfter reads a Retry-After header: seconds, or an HTTP date. false
// when there is none or it can't be read.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(h, 64); err == nil && n >= 0 && n < 1e9 {
		return time.Duration(n * float64(time.Second)), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + " s"
}

// doneWatcher notes when a stream's "data: [DONE]" goes past.
type doneWatcher struct {
	io.ReadCloser
	done *bool
	tail []byte
}

var doneLine = []byte("data: [DONE]")

func (w *doneWatcher) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if n > 0 && !*w.done {
		buf := append(w.tail, p[:n]...)
		if bytes.Contains(buf, doneLine) || bytes.Contains(buf, []byte("data:[DONE]")) {
			*w.done = true
		}
		keep := min(len(buf), len(doneLine))
		w.tail = append(w.tail[:0], buf[len(buf)-keep:]...)
	}
	return n, err
}
