package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// result is what a successful call returns when the tool has no pick.
type result struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the response parsed as JSON when it is JSON, else its text,
	// or null when it is empty.
	Body json.RawMessage `json:"body"`
	// BodyBase64 holds a body that is not text (not UTF-8), instead of
	// Body.
	BodyBase64 string `json:"body_base64,omitempty"`
}

// resultHeaders are the response headers a result keeps.
func resultHeaders() []string {
	return []string{"Content-Type", "Content-Length", "Content-Language", "Last-Modified", "Etag", "Location", "Retry-After"}
}

// timedOut is the cause of a request's context when its time is up.
type timedOut struct{}

func (timedOut) Error() string { return "the time was up" }

func (k *kind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	st := k.state()
	leave, err := st.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	p, err := compile(call.Tool, st.cfg)
	if err != nil {
		return nil, sdk.Errorf("bad_tool", "the tool %s is not right for this host: %v", call.Tool.Name, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	var a args
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return nil, sdk.Errorf("bad_argument", "the arguments must be a JSON object")
	}

	ctx, cancel := context.WithTimeoutCause(ctx, p.timeout, timedOut{})
	defer cancel()
	req, err := p.request(ctx, a)
	if err != nil {
		return nil, err
	}
	// where is the URL as messages and logs show it: without its userinfo
	// and query. sec hides the secrets of the request in text that comes
	// from elsewhere (the server's answer, net/http's errors).
	where := safeURL(req.URL)
	sec := secretsOf(req)

	start := time.Now()
	resp, err := st.client(p).Do(req)
	if err != nil {
		return nil, explain(ctx, err, p, where, sec)
	}
	defer func() { _ = resp.Body.Close() }()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// More than the message shows, so that a secret the server echoes
		// near the end of what is read is still whole when it is hidden.
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		emit.Log("info", fmt.Sprintf("%s %s: %s in %s", p.Method, where, sec.hide(resp.Status), time.Since(start).Round(time.Millisecond)))
		return nil, statusError(p.Method, safeURL(resp.Request.URL), resp, excerpt, sec)
	}

	body, err := readBody(ctx, resp, p, st.cfg.MaxBytes, where, sec)
	if err != nil {
		return nil, err
	}
	emit.Log("info", fmt.Sprintf("%s %s: %s, %d bytes in %s", p.Method, where, sec.hide(resp.Status), len(body), time.Since(start).Round(time.Millisecond)))

	if p.pick != nil {
		return pickFrom(body, p.Pick, p.pick, where)
	}
	return resultOf(resp, body, emit)
}

// readBody reads the body of a good answer to p's request at where, refusing one of more than
// limit bytes, before reading it when the server says its length.
func readBody(ctx context.Context, resp *http.Response, p *plan, limit int64, where string, sec secrets) ([]byte, error) {
	if resp.ContentLength > limit && p.Method != "HEAD" {
		return nil, tooLarge(where, limit, resp.ContentLength)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, explain(ctx, err, p, where, sec)
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(where, limit, -1)
	}
	return body, nil
}

// resultOf is the result of an answer with the body body: its status, the headers a result
// keeps, and the body as JSON, text or base64. An image or a sound goes to emit as content
// instead.
func resultOf(resp *http.Response, body []byte, emit sdk.Emit) (json.RawMessage, error) {
	r := result{Status: resp.StatusCode, Headers: map[string]string{}}
	for _, h := range resultHeaders() {
		if v := resp.Header.Values(h); len(v) > 0 {
			r.Headers[strings.ToLower(h)] = strings.Join(v, ", ")
		}
	}
	switch media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); {
	case len(body) == 0:
	case strings.HasPrefix(media, "image/") || strings.HasPrefix(media, "audio/"):
		// An image or a sound is the result's content, for a client that shows or plays it
		// (MCP's image and audio content); the value keeps the status and headers.
		typ := sdk.ContentImage
		if strings.HasPrefix(media, "audio/") {
			typ = sdk.ContentAudio
		}
		emit.Content(sdk.Content{Type: typ, Data: body, MIMEType: media})
	case (isJSONMedia(media) || media == "") && json.Valid(body):
		r.Body = body
	case utf8.Valid(body):
		r.Body, _ = marshal(string(body))
	default:
		r.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	}
	return marshal(r)
}

// marshal is json.Marshal without escaping <, > and & (a result is read by
// a model or a person, not put in HTML).
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// request builds the request from the call's arguments.
func (p *plan) request(ctx context.Context, a args) (*http.Request, error) {
	u, err := p.url.render(a, "the URL")
	if err != nil {
		return nil, sdk.Errorf("bad_argument", "%v", err)
	}
	if err := checkURL(u); err != nil {
		return nil, sdk.Errorf("bad_argument", "the URL made from the arguments won't do: %v", err)
	}
	var body io.Reader
	if p.bodyKind != bodyNone {
		b, err := p.body.render(a, "the body")
		if err != nil {
			return nil, sdk.Errorf("bad_argument", "%v", err)
		}
		if p.bodyKind == bodyJSON && !json.Valid([]byte(b)) {
			return nil, sdk.Errorf("bad_argument", "the body made from the arguments is not JSON")
		}
		body = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, u, body)
	if err != nil {
		// Not the error's text: a *url.Error quotes the whole URL.
		return nil, sdk.Errorf("bad_argument", "the request to %s can't be made from the arguments", redact(u))
	}
	for _, h := range p.headers {
		v, err := h.value.render(a, "the header "+h.name)
		if err != nil {
			return nil, sdk.Errorf("bad_argument", "%v", err)
		}
		req.Header.Set(h.name, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent())
	}
	if req.Header.Get("Content-Type") == "" {
		switch p.bodyKind {
		case bodyJSON:
			req.Header.Set("Content-Type", "application/json")
		case bodyText:
			req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}
	return req, nil
}

// explain turns a failed request (or body read) into the error the user
// reads, saying which rule or what failure stopped it.
func explain(ctx context.Context, err error, p *plan, where string, sec secrets) error {
	var r *refusal
	if errors.As(err, &r) {
		msg := r.msg
		var ue *url.Error
		if r.code == "private_address" && errors.As(err, &ue) && !strings.HasPrefix(msg, "the server redirected") {
			if u, perr := url.Parse(ue.URL); perr == nil && safeURL(u) != where {
				msg = fmt.Sprintf("the server redirected to %s, and %s", safeURL(u), msg)
			}
		}
		return &sdk.Error{Code: r.code, Message: msg}
	}
	if _, ok := context.Cause(ctx).(timedOut); ok {
		return sdk.Errorf("timeout", "the request to %s took longer than %s and was stopped (the tool's timeout_seconds, at most [http] timeout_seconds)", where, seconds(p.TimeoutSeconds))
	}
	if ctx.Err() != nil {
		return sdk.Errorf(errcode.Cancelled, "the run was cancelled")
	}
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		uaErr   x509.UnknownAuthorityError
		hostErr x509.HostnameError
		invErr  x509.CertificateInvalidError
		recErr  tls.RecordHeaderError
	)
	host := where
	if u, perr := url.Parse(where); perr == nil {
		host = u.Host
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			host = u.Host
		}
	}
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return sdk.Errorf("http_error", "the host name %s was not found (DNS)", dnsErr.Name)
	case errors.As(err, &dnsErr):
		return sdk.Errorf("http_error", "the host name %s could not be looked up (DNS): %s", dnsErr.Name, sec.hide(dnsErr.Err))
	case errors.Is(err, syscall.ECONNREFUSED):
		return sdk.Errorf("http_error", "the server at %s refused the connection: nothing is listening there", host)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return sdk.Errorf("http_error", "the server at %s closed the connection before the response was complete", host)
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return sdk.Errorf("http_error", "the server at %s can't be reached from this host (no route)", host)
	case errors.As(err, &certErr), errors.As(err, &uaErr), errors.As(err, &hostErr), errors.As(err, &invErr):
		return sdk.Errorf("http_error", "the TLS certificate of %s could not be verified, so nothing was sent: %s", host, sec.hide(unwrapURL(err).Error()))
	case errors.As(err, &recErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return sdk.Errorf("http_error", "the server at %s did not answer in TLS: is the URL's scheme right (http or https)?", host)
	}
	return sdk.Errorf("http_error", "the request to %s failed: %s", host, sec.hide(unwrapURL(err).Error()))
}

// seconds writes n seconds.
func seconds(n int) string {
	if n == 1 {
		return "1 second"
	}
	return strconv.Itoa(n) + " seconds"
}

// unwrapURL drops the "Get \"url\": " that net/http puts in front.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusError is the error for a response outside 200–299.
func statusError(method, where string, resp *http.Response, excerpt []byte, sec secrets) error {
	msg := fmt.Sprintf("the server answered %s to %s %s", sec.hide(resp.Status), method, where)
	text := sec.hide(strings.Join(strings.Fields(string(bytes.ToValidUTF8(excerpt, []byte("?")))), " "))
	if text != "" {
		msg += ": " + clip(text, 200)
	}
	return &sdk.Error{Code: "http_status", Message: msg}
}

// tooLarge is the error for a response over max_bytes. size is the size
// the server announced, or -1.
func tooLarge(where string, limit, size int64) error {
	said := ""
	if size >= 0 {
		said = fmt.Sprintf(" (the server said %s)", byteSize(size))
	}
	return sdk.Errorf("too_large", "the response from %s is larger than %s%s: this host reads at most [http] max_bytes = %d bytes of a response", where, byteSize(limit), said, limit)
}

// byteSize writes n in bytes, KiB, MiB or GiB.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	case n == 1:
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// pickFrom returns the field at path of a JSON body.
func pickFrom(body []byte, pick string, path []string, where string) (json.RawMessage, error) {
	var doc any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil || d.More() {
		return nil, sdk.Errorf("not_json", "the response from %s is not JSON, so the field %s can't be picked from it", where, pick)
	}
	cur := doc
	for i, key := range path {
		at := "the response"
		if i > 0 {
			at = strings.Join(path[:i], ".")
		}
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[key]
			if !ok {
				return nil, sdk.Errorf("pick_missing", "the response has no field %s: %s has no %q", pick, at, key)
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(key)
			if err != nil || n < 0 {
				return nil, sdk.Errorf("pick_missing", "the response has no field %s: %s is a list, and %q is not a position in it (0, 1, …)", pick, at, key)
			}
			if n >= len(v) {
				return nil, sdk.Errorf("pick_missing", "the response has no field %s: %s has %d items", pick, at, len(v))
			}
			cur = v[n]
		default:
			return nil, sdk.Errorf("pick_missing", "the response has no field %s: %s is %s, not an object or a list", pick, at, jsonKind(v))
		}
	}
	return marshal(cur)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "true or false"
	case json.Number:
		return "a number"
	}
	return "a value"
}
