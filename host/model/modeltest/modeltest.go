// Package modeltest is an OpenAI-compatible chat endpoint on loopback for
// tests: POST /v1/chat/completions (streamed as server-sent events, or as
// one JSON answer) and GET /v1/models.
//
// By default it answers every question with an echo of it, "echo: " and
// the last user message, streamed a word at a time (or, when the request
// asks for a JSON object, {"echo": "<the message>"}), so a test can assert
// what came back without scripting anything. Script queues Replies for the
// next requests instead: text in given chunks with a pause between them,
// an HTTP error with its body and Retry-After, a stream cut midway. Requests
// records what each request carried.
//
//	srv := modeltest.New(t, modeltest.Options{})
//	srv.Script(modeltest.Reply{Chunks: []string{"Hel", "lo"}})
//	// ... point [model] base_url at srv.URL, model at modeltest.DefaultModel
//	srv.Requests()[0].Messages[1].Content // the prompt sent
package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultModel is the model a Server serves when Options names none.
const DefaultModel = "test-model"

// Options says what a Server serves.
type Options struct {
	// Models are the models served; default {DefaultModel}. A request for
	// another model is answered 404, as OpenAI answers it.
	Models []string
	// Key, when set, is the API key the server wants: a request without
	// "Authorization: Bearer <Key>" is answered 401.
	Key string
}

// Reply is a scripted answer to one chat request.
type Reply struct {
	// Chunks are the answer's text, one server-sent event each (joined
	// when the request is not streamed). Nil: the default echo answer.
	Chunks []string
	// Delay is the pause before each chunk after the first.
	Delay time.Duration
	// BeforeChunk, when set, is called before chunk i is written (from 0),
	// after the earlier chunks were flushed to the client. A test blocks
	// in it to hold the answer midway.
	BeforeChunk func(i int)
	// Model is the model named in the answer; default the one asked for.
	Model string

	// Status, when set, answers with this HTTP status instead, Body as
	// the body (as JSON when it starts with '{'), and RetryAfter as the
	// Retry-After header when set. See Error.
	Status     int
	Body       string
	RetryAfter string

	// Cut drops the connection after Chunks are sent, without a
	// finish_reason or [DONE]: a stream that stops midway.
	Cut bool
	// StreamError, when set, is sent after Chunks as an error event,
	// {"error":{"message":StreamError}}, ending the stream.
	StreamError string
}

// Error is a reply of an HTTP error with an OpenAI-style JSON body,
// {"error":{"message":..., "type":..., "code":...}}.
func Error(status int, message string) Reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_"),
		"param": nil, "code": nil,
	}})
	return Reply{Status: status, Body: string(b)}
}

// Text is a reply of text in the given chunks.
func Text(chunks ...string) Reply { return Reply{Chunks: chunks} }

// Message is one message of a chat request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is what one request to the server carried.
type Request struct {
	Method, Path string
	// Authorization is the request's Authorization header, "" when none.
	Authorization string
	// The chat request's fields; zero for other requests.
	Model    string
	Messages []Message
	// ResponseFormat is response_format.type ("json_object"), "" when not
	// asked.
	ResponseFormat string
	// MaxTokens is max_tokens (or max_completion_tokens), 0 when not sent.
	MaxTokens    int
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
	// Body is the request's body as sent.
	Body json.RawMessage
}

// Server is the fake endpoint. Its methods are safe to call from any
// goroutine.
type Server struct {
	// URL is the base URL of the API, "http://127.0.0.1:PORT/v1": what
	// [model] base_url is set to.
	URL string

	srv  *httptest.Server
	opts Options

	mu       sync.Mutex
	script   []Reply
	requests []Request
}

// New starts a Server on loopback; it stops when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if len(o.Models) == 0 {
		o.Models = []string{DefaultModel}
	}
	s := &Server{opts: o}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, dropping the connections it has open. After it
// nothing listens at URL.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Script queues replies: each chat request takes the first one left, and
// once none is left gets the default echo answer.
func (s *Server) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Echo is the default answer to a prompt: what the server streams for a
// request whose last user message is prompt.
func Echo(prompt string) string { return "echo: " + prompt }

// EchoJSON is the default answer to a prompt when a JSON object is asked
// for.
func EchoJSON(prompt string) string {
	b, _ := json.Marshal(map[string]string{"echo": prompt})
	return string(b)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization")}
	var body chatRequest
	if r.Method == http.MethodPost {
		raw := json.RawMessage{}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&raw); err != nil {
			s.record(rec)
			writeJSON(w, http.StatusBadRequest, errorBody("the request body is not JSON: "+err.Error()))
			return
		}
		rec.Body = raw
		_ = json.Unmarshal(raw, &body)
		rec.Model, rec.Stream = body.Model, body.Stream
		rec.ResponseFormat = body.ResponseFormat.Type
		rec.MaxTokens = max(body.MaxTokens, body.MaxCompletionTokens)
		rec.IncludeUsage = body.StreamOptions.IncludeUsage
		for _, m := range body.Messages {
			rec.Messages = append(rec.Messages, Message{Role: m.Role, Content: m.text()})
		}
	}
	s.record(rec)

	if s.opts.Key != "" && rec.Authorization != "Bearer "+s.opts.Key {
		writeJSON(w, http.StatusUnauthorized, errorBody("Incorrect API key provided."))
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		s.models(w)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		s.chat(w, r, rec)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) record(rec Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
}

func (s *Server) next() (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		return Reply{}, false
	}
	r := s.script[0]
	s.script = s.script[1:]
	return r, true
}

func (s *Server) models(w http.ResponseWriter) {
	data := make([]map[string]any, len(s.opts.Models))
	for i, m := range s.opts.Models {
		data[i] = map[string]any{"id": m, "object": "model", "created": 0, "owned_by": "modeltest"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, req Request) {
	reply, scripted := s.next()
	if reply.Status != 0 {
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		if strings.HasPrefix(reply.Body, "{") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		w.WriteHeader(reply.Status)
		_, _ = w.Write([]byte(reply.Body))
		return
	}
	if !slices.Contains(s.opts.Models, req.Model) {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", req.Model),
			"type":    "invalid_request_error", "param": nil, "code": "model_not_found",
		}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(b)
		return
	}
	if !scripted || reply.Chunks == nil {
		reply.Chunks = echoChunks(req)
	}
	if reply.Model == "" {
		reply.Model = req.Model
	}
	if req.Stream {
		s.stream(w, r, req, reply)
		return
	}
	if reply.Cut {
		panic(http.ErrAbortHandler)
	}
	if !s.hold(r, reply) {
		return
	}
	if reply.StreamError != "" {
		writeJSON(w, http.StatusInternalServerError, errorBody(reply.StreamError))
		return
	}
	text := strings.Join(reply.Chunks, "")
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-modeltest", "object": "chat.completion", "created": time.Now().Unix(), "model": reply.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": usage(req, reply),
	})
}

// hold runs a non-streamed reply's pauses; false when the client left.
func (s *Server) hold(r *http.Request, reply Reply) bool {
	for i := range reply.Chunks {
		if reply.BeforeChunk != nil {
			reply.BeforeChunk(i)
		}
		if i > 0 && !sleep(r, reply.Delay) {
			return false
		}
	}
	return true
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// A comment line, as servers send to keep a connection open: clients
	// ignore it.
	_, _ = fmt.Fprint(w, ": modeltest\n\n")
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) {
		event(w, map[string]any{
			"id": "chatcmpl-modeltest", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": reply.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for i, c := range reply.Chunks {
		if reply.BeforeChunk != nil {
			reply.BeforeChunk(i)
		}
		if i > 0 && !sleep(r, reply.Delay) {
			return
		}
		chunk(map[string]any{"content": c}, nil)
	}
	if reply.Cut {
		panic(http.ErrAbortHandler)
	}
	if reply.StreamError != "" {
		event(w, errorBody(reply.StreamError))
		flush()
		return
	}
	chunk(map[string]any{}, "stop")
	if req.IncludeUsage {
		event(w, map[string]any{
			"id": "chatcmpl-modeltest", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": reply.Model,
			"choices": []any{}, "usage": usage(req, reply),
		})
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	flush()
}

func event(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
}

func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// usage counts words as tokens: the messages' in, the chunks out.
func usage(req Request, reply Reply) map[string]int {
	in := 0
	for _, m := range req.Messages {
		in += len(strings.Fields(m.Content))
	}
	out := len(reply.Chunks)
	return map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
}

// echoChunks is the default answer, a word at a time (spaces kept).
func echoChunks(req Request) []string {
	prompt := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			prompt = m.Content
		}
	}
	text := Echo(prompt)
	if req.ResponseFormat == "json_object" {
		text = EchoJSON(prompt)
	}
	var chunks []string
	for len(text) > 0 {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			chunks = append(chunks, text)
			break
		}
		chunks = append(chunks, text[:i+1])
		text = text[i+1:]
	}
	return chunks
}

func errorBody(message string) map[string]any {
	return map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error", "param": nil, "code": nil}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// chatRequest is the part of a chat completion request the server reads.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	Stream              bool          `json:"stream"`
	MaxTokens           int           `json:"max_tokens"`
	MaxCompletionTokens int           `json:"max_completion_tokens"`
	ResponseFormat      struct {
		Type string `json:"type"`
	} `json:"response_format"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatMessage's content is a string, or a list of parts of which the text
// ones are read.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct{ Type, Text string }
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return string(m.Content)
}
