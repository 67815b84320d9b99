package hostside

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// SessionsClient is the host's handle on the conversation sandboxes a kind
// keeps (sdk.SessionKeeper, served when its Describe says ServesSessions):
// the files of a session, stopping and deleting it, and the reconcile at the
// host's start. Sessions are named by their backend ids.
//
// An error the user reads is an *errcode.Error: errcode.NotFound,
// errcode.BadPath, errcode.TooLarge, errcode.DiskFull or the kind's own,
// and errcode.Unsupported from a plugin that keeps no sessions. Any other
// error is the transport's (the plugin went away) or the plugin's own
// failure, said as a sentence.
type SessionsClient struct {
	client pluginv1.SessionsClient
	kind   string
}

// Sessions is the client of the kind's Sessions service, on the same
// connection. kind names the kind in messages ("python").
func (c *KindClient) Sessions(kind string) *SessionsClient {
	return &SessionsClient{client: c.sessions, kind: kind}
}

// sessionError is err as the host reads it.
func (c *SessionsClient) sessionError(ctx context.Context, what string, err error) error {
	if e := pluginv1.ErrorOfStatus(err); e != nil {
		return e
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unimplemented:
		return errcode.Errorf(errcode.Unsupported, "the %s plugin keeps no conversation sandboxes", c.kind)
	case codes.Canceled, codes.DeadlineExceeded:
		return fmt.Errorf("%s: the %s plugin gave up: %s", what, c.kind, st.Message())
	}
	return fmt.Errorf("%s: the %s plugin failed: %s", what, c.kind, st.Message())
}

// ConfigureSessions sets the session sandboxes' limits ([sessions] in the host's
// config). Call it after the kind's Configure, and again after a reload.
func (c *SessionsClient) ConfigureSessions(ctx context.Context, cfg sdk.SessionsConfig) error {
	req := convert.ToProtoSessionsConfig(cfg)
	if _, err := c.client.Configure(ctx, req); err != nil {
		return c.sessionError(ctx, "configuring the conversation sandboxes", err)
	}
	return nil
}

// ListFiles lists the files and folders of a session's workspace.
func (c *SessionsClient) ListFiles(ctx context.Context, id string) ([]sdk.SessionFile, error) {
	resp, err := c.client.ListFiles(ctx, &pluginv1.SessionRef{Session: id})
	if err != nil {
		return nil, c.sessionError(ctx, "listing the session's files", err)
	}
	out := make([]sdk.SessionFile, len(resp.GetFiles()))
	for i, f := range resp.GetFiles() {
		out[i] = convert.SessionFileFromProto(f)
	}
	return out, nil
}

// ReadFile reads one file of a session's workspace whole: errcode.TooLarge
// when it is larger than max bytes (max 0: the plugin's own bound, which the
// host should not rely on). For files that may be large, OpenFile.
func (c *SessionsClient) ReadFile(ctx context.Context, id, path string, max int64) ([]byte, error) {
	r, _, err := c.OpenFile(ctx, id, path, max)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// OpenFile opens one file of a session's workspace to read as the plugin
// sends it, a chunk at a time: what the file is (not_found, too_large when
// it is larger than max bytes, ...) is known when it returns, its size too
// (-1 when the plugin didn't say). The reader holds one chunk at most; it
// fails with errcode.TooLarge past max bytes, and with io.ErrUnexpectedEOF
// when the file ends short of its size (it shrank while read). Close it,
// at its end or before, to end the stream.
func (c *SessionsClient) OpenFile(ctx context.Context, id, path string, max int64) (io.ReadCloser, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.client.ReadFile(ctx, &pluginv1.FileRequest{Session: id, Path: path, MaxBytes: max})
	if err != nil {
		cancel()
		return nil, 0, c.sessionError(ctx, "reading "+path, err)
	}
	first, err := stream.Recv()
	if err == io.EOF {
		first, err = &pluginv1.Chunk{}, nil // a plugin that sent nothing: an empty file
	}
	if err != nil {
		cancel()
		return nil, 0, c.sessionError(ctx, "reading "+path, err)
	}
	size := first.GetSize()
	if size == 0 && len(first.GetData()) > 0 {
		size = -1 // not said
	}
	if max > 0 && size > max {
		cancel()
		return nil, 0, errcode.Errorf(errcode.TooLarge, "%s is larger than %d bytes", path, max)
	}
	r := &fileReader{c: c, ctx: ctx, cancel: cancel, stream: stream, path: path, max: max, size: size}
	if err := r.take(first.GetData()); err != nil {
		cancel()
		return nil, 0, err
	}
	if size == 0 {
		r.err = io.EOF
	}
	return r, size, nil
}

// fileReader reads the chunks of a file the plugin sends.
type fileReader struct {
	c      *SessionsClient
	ctx    context.Context
	cancel context.CancelFunc
	stream pluginv1.Sessions_ReadFileClient
	path   string
	max    int64
	size   int64 // -1: not said
	got    int64
	buf    []byte
	err    error // once the stream ended: io.EOF or why it failed
}

// take counts a chunk in and keeps it to be read.
func (r *fileReader) take(data []byte) error {
	r.got += int64(len(data))
	if r.max > 0 && r.got > r.max {
		// The plugin's own check failed: the host's bound holds anyway.
		return errcode.Errorf(errcode.TooLarge, "%s is larger than %d bytes", r.path, r.max)
	}
	if r.size >= 0 && r.got > r.size {
		return fmt.Errorf("reading %s: the %s plugin sent more than the %d bytes it said", r.path, r.c.kind, r.size)
	}
	r.buf = data
	return nil
}

func (r *fileReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		chunk, err := r.stream.Recv()
		switch {
		case err == io.EOF && r.size >= 0 && r.got < r.size:
			r.err = fmt.Errorf("reading %s: the file ended at %d of its %d bytes (it changed while read): %w", r.path, r.got, r.size, io.ErrUnexpectedEOF)
		case err == io.EOF:
			r.err = io.EOF
		case err != nil:
			r.err = r.c.sessionError(r.ctx, "reading "+r.path, err)
		default:
			if terr := r.take(chunk.GetData()); terr != nil {
				r.err = terr
				r.cancel()
			}
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// Close ends the stream, if it hasn't ended.
func (r *fileReader) Close() error {
	r.cancel()
	return nil
}

// WriteFile writes what r holds to a file of a session's workspace, making
// its folders, and returns the file as written. An error reading r is
// returned wrapped, and the plugin sees the upload broken off.
func (c *SessionsClient) WriteFile(ctx context.Context, id, path string, r io.Reader) (sdk.SessionFile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.client.WriteFile(ctx)
	if err != nil {
		return sdk.SessionFile{}, c.sessionError(ctx, "writing "+path, err)
	}
	buf := make([]byte, sdk.FileChunkSize)
	first := true
	for {
		n, rerr := io.ReadFull(r, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			cancel() // the plugin sees the upload broken off
			return sdk.SessionFile{}, fmt.Errorf("reading the upload of %s: %w", path, rerr)
		}
		if n > 0 || first {
			chunk := &pluginv1.WriteChunk{Data: buf[:n]}
			if first {
				chunk.Session, chunk.Path = id, path
				first = false
			}
			if err := stream.Send(chunk); err != nil {
				// io.EOF: the plugin answered before the end (a full disk,
				// a bad path); CloseAndRecv has its answer.
				if err != io.EOF {
					return sdk.SessionFile{}, c.sessionError(ctx, "writing "+path, err)
				}
				break
			}
		}
		if rerr != nil {
			break
		}
	}
	f, err := stream.CloseAndRecv()
	if err != nil {
		return sdk.SessionFile{}, c.sessionError(ctx, "writing "+path, err)
	}
	return convert.SessionFileFromProto(f), nil
}

// RemoveFile removes one file or empty folder of a session's workspace.
func (c *SessionsClient) RemoveFile(ctx context.Context, id, path string) error {
	if _, err := c.client.RemoveFile(ctx, &pluginv1.FileRequest{Session: id, Path: path}); err != nil {
		return c.sessionError(ctx, "removing "+path, err)
	}
	return nil
}

// StopSession stops a session's sandbox; its files stay.
func (c *SessionsClient) StopSession(ctx context.Context, id string) error {
	if _, err := c.client.StopSession(ctx, &pluginv1.SessionRef{Session: id}); err != nil {
		return c.sessionError(ctx, "stopping the session's sandbox", err)
	}
	return nil
}

// DeleteSession removes a session's sandbox and files.
func (c *SessionsClient) DeleteSession(ctx context.Context, id string) error {
	if _, err := c.client.DeleteSession(ctx, &pluginv1.SessionRef{Session: id}); err != nil {
		return c.sessionError(ctx, "deleting the session", err)
	}
	return nil
}

// Reconcile, at the host's start, stops every sandbox of the kind, keeps the
// workspaces of the sessions in keep and deletes the others, whose ids it
// returns.
func (c *SessionsClient) Reconcile(ctx context.Context, keep []string) ([]string, error) {
	resp, err := c.client.Reconcile(ctx, &pluginv1.ReconcileRequest{Keep: keep})
	if err != nil {
		return nil, c.sessionError(ctx, "reconciling the sessions", err)
	}
	return resp.GetRemoved(), nil
}
