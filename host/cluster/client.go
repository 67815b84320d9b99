package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/runs"
)

// The paths a host serves to the others (host/api serves them, behind
// Signer.Verify). A call and a follow answer 200 with the run's RunInfo
// as the first line of JSON, then its events, one JSON object a line, as
// they come, until its end; or an error status with {"error": …}.
const (
	// CallsPath starts a call (CallRequest) and streams its run.
	CallsPath = "/internal/v1/calls"
	// RunPrefix, then a run's id and "/events?from=N", streams the run's
	// events from seq N; then the id and "/cancel" cancels it
	// (CancelRequest).
	RunPrefix = "/internal/v1/runs/"
)

// CallRequest is the body of a forwarded call; the principal is the one
// the request is signed for.
type CallRequest struct {
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args,omitempty"`
	Session        string          `json:"session"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// CancelRequest is the body of a forwarded cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// maxLine bounds one line of a run's stream: an event is at most what a
// run may print in one go, well under this.
const maxLine = 16 << 20

// Client makes the requests of this host to the others.
type Client struct {
	signer *Signer
	http   *http.Client
}

// NewClient signs its requests with signer.
func NewClient(signer *Signer) *Client {
	tr := &http.Transport{
		Proxy:                 nil, // the hosts reach each other directly
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	return &Client{signer: signer, http: &http.Client{Transport: tr}}
}

// To is the host id at address, as an upstream of this one's dispatcher.
func (c *Client) To(id, address string) *Peer {
	return &Peer{c: c, id: id, address: address}
}

// Peer is another host.
type Peer struct {
	c           *Client
	id, address string
}

var _ runs.Upstream = (*Peer)(nil)

// Name is the host's id and address.
func (p *Peer) Name() string { return fmt.Sprintf("%q (%s)", p.id, p.address) }

func (p *Peer) url(path string, q url.Values) string {
	u := url.URL{Scheme: "http", Host: p.address, Path: path}
	if q != nil {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Start starts req on the host, signed for req's principal.
func (p *Peer) Start(ctx context.Context, req runs.Request) (runs.RunInfo, runs.Stream, error) {
	body, err := json.Marshal(CallRequest{Tool: req.Tool, Args: req.Args, Session: req.Session, IdempotencyKey: req.IdempotencyKey})
	if err != nil {
		return runs.RunInfo{}, nil, err
	}
	return p.stream(ctx, http.MethodPost, p.url(CallsPath, nil), req.Principal, body)
}

// Follow streams the run's events from seq from on.
func (p *Peer) Follow(ctx context.Context, id string, from uint64) (runs.RunInfo, runs.Stream, error) {
	q := url.Values{"from": {strconv.FormatUint(from, 10)}}
	return p.stream(ctx, http.MethodGet, p.url(RunPrefix+url.PathEscape(id)+"/events", q), "", nil)
}

// Cancel cancels the run on the host.
func (p *Peer) Cancel(ctx context.Context, id, reason string) error {
	body, _ := json.Marshal(CancelRequest{Reason: reason})
	resp, err := p.do(ctx, http.MethodPost, p.url(RunPrefix+url.PathEscape(id)+"/cancel", nil), "", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return p.refusal(resp)
	}
	return nil
}

func (p *Peer) do(ctx context.Context, method, u, principal string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	p.c.signer.Sign(req, principal)
	return p.c.http.Do(req)
}

func (p *Peer) stream(ctx context.Context, method, u, principal string, body []byte) (runs.RunInfo, runs.Stream, error) {
	resp, err := p.do(ctx, method, u, principal, body)
	if err != nil {
		return runs.RunInfo{}, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return runs.RunInfo{}, nil, p.refusal(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	st := &stream{sc: sc, body: resp.Body}
	var info runs.RunInfo
	if err := st.line(&info); err != nil {
		resp.Body.Close()
		return runs.RunInfo{}, nil, fmt.Errorf("the host %s sent no run: %w", p.Name(), err)
	}
	return info, st, nil
}

// refusal is the *wire.Error of an answer other than 200, or an error
// saying what came instead.
func (p *Peer) refusal(resp *http.Response) error {
	var e struct {
		Error *wire.Error `json:"error"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &e) == nil && e.Error != nil && e.Error.Code != "" {
		return e.Error
	}
	return fmt.Errorf("the host %s answered %s", p.Name(), resp.Status)
}

// stream reads a run's events, one JSON object a line.
type stream struct {
	sc   *bufio.Scanner
	body io.Closer
}

func (s *stream) line(v any) error {
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	return json.Unmarshal(s.sc.Bytes(), v)
}

func (s *stream) Next() (runs.Event, error) {
	var e runs.Event
	if err := s.line(&e); err != nil {
		if errors.Is(err, io.EOF) {
			return e, io.ErrUnexpectedEOF
		}
		return e, err
	}
	return e, nil
}

func (s *stream) Close() error { return s.body.Close() }

// Forward sends the request r, as it came, to the host, and its answer
// back to w: a conversation's request served by the host that holds it.
// It is signed, so the host serves it rather than forwarding it again.
func (p *Peer) Forward(w http.ResponseWriter, r *http.Request, log hclog.Logger) {
	target := &url.URL{Scheme: "http", Host: p.address}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			p.c.signer.Sign(pr.Out, "")
		},
		Transport:     p.c.http.Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("a conversation's request could not be forwarded to its host", "host", p.id, "address", p.address, "error", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": wire.Error{Code: wire.CodeSessionUnavailable,
				Message: fmt.Sprintf("the conversation is held by the host %s, which can't be reached now; its files come back with that host: try again once it is back", p.Name())}})
		},
	}
	rp.ServeHTTP(w, r)
}
