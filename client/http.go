package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/toolhost/toolhost/client/wire"
)

// maxAnswer bounds an HTTP answer read.
const maxAnswer = 64 << 20

// HTTP calls the host's plain HTTP endpoints: for callers that want one
// answer per call and no websocket.
type HTTP struct {
	base string
	opts Options
}

// NewHTTP returns an HTTP client of the host at addr (as Dial takes it).
func NewHTTP(addr string, opts Options) (*HTTP, error) {
	_, base, err := urls(addr)
	if err != nil {
		return nil, err
	}
	return &HTTP{base: base, opts: opts}, nil
}

// HTTP returns an HTTP client of the same host, signed in the same way.
func (c *Conn) HTTP() *HTTP { return &HTTP{base: c.base, opts: c.opts} }

// do sends a request and decodes a 2xx answer into out; any other answer
// becomes an *Error (or, with into422, a 422 is decoded into out too).
func (h *HTTP) do(ctx context.Context, method, path string, body []byte, header http.Header, out any, into422 bool) error {
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range h.opts.Header {
		req.Header[k] = append([]string(nil), v...)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if h.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.opts.Token)
	}
	if h.opts.Origin != "" {
		req.Header.Set("Origin", h.opts.Origin)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := h.opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("the host at %s can't be reached: %w", h.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("the host's answer to %s %s can't be read: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 || (into422 && resp.StatusCode == http.StatusUnprocessableEntity) {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("the host's answer to %s %s can't be read: %w", method, path, err)
		}
		return nil
	}
	var e struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != nil {
		return e.Error
	}
	return &Error{Code: wire.CodeFailed, Message: fmt.Sprintf("the host answered %s %s with %s", method, path, resp.Status)}
}

// Tools lists the tools the host serves (GET /api/v1/tools).
func (h *HTTP) Tools(ctx context.Context) ([]Tool, error) {
	var out struct {
		Tools []Tool `json:"tools"`
	}
	if err := h.do(ctx, http.MethodGet, "/api/v1/tools", nil, nil, &out, false); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// ToolSpecs lists the tools the host serves in a format (GET
// /api/v1/tools?format=…): FormatOpenAI (with strict, in OpenAI's strict
// mode), FormatAnthropic, FormatMCP, or "" or FormatToolhost for the
// default. Each of its Tools is a tool's spec to hand to that provider as
// it is. A format the host does not know gives an *Error with code
// "bad_request" saying which it knows.
func (h *HTTP) ToolSpecs(ctx context.Context, format string, strict bool) (ToolSpecs, error) {
	q := url.Values{}
	if format != "" {
		q.Set("format", format)
	}
	if strict {
		q.Set("strict", "true")
	}
	path := "/api/v1/tools"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out ToolSpecs
	if err := h.do(ctx, http.MethodGet, path, nil, nil, &out, false); err != nil {
		return ToolSpecs{}, err
	}
	return out, nil
}

// Call runs a tool and waits for its end (POST /api/v1/tools/{name}/call).
// A run that ended with an error gives its record and that *Error; a call
// refused gives a nil record and an *Error. If ctx ends first, the host
// cancels the run.
func (h *HTTP) Call(ctx context.Context, tool string, args any, opts CallOptions) (*CallResult, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		raw = json.RawMessage("{}")
	}
	hdr := http.Header{}
	if opts.Session != "" {
		hdr.Set("Toolhost-Session", opts.Session)
	}
	if opts.IdempotencyKey != "" {
		hdr.Set("Idempotency-Key", opts.IdempotencyKey)
	}
	var out CallResult
	if err := h.do(ctx, http.MethodPost, "/api/v1/tools/"+url.PathEscape(tool)+"/call", raw, hdr, &out, true); err != nil {
		return nil, err
	}
	if out.Error != nil {
		return &out, out.Error
	}
	return &out, nil
}

// Run reads a run's record and output (GET /api/v1/runs/{id}); withEvents
// false leaves its events out.
func (h *HTTP) Run(ctx context.Context, id string, withEvents bool) (*RunRecord, error) {
	path := "/api/v1/runs/" + url.PathEscape(id)
	if !withEvents {
		path += "?events=false"
	}
	var out RunRecord
	if err := h.do(ctx, http.MethodGet, path, nil, nil, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}
