package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// SessionKeeper is implemented by a kind that keeps conversation sandboxes:
// one sandbox per session while it is used, its files kept between runs. It
// is optional. Serve serves it beside the kind (the protocol's Sessions
// service) and tells the host so in Describe (Info.ServesSessions).
//
// A session is named by its backend id, the same as Call.Session of the runs
// in it: the host owns which caller owns which session and never sends the
// caller's own name for it. Runs in a session are Invoke calls with
// Call.Session set; the methods here are the rest.
//
// Return an *Error the user reads: errcode.NotFound (no such file),
// errcode.BadPath (a path that leaves the workspace, or names what is not a
// regular file), errcode.TooLarge, errcode.DiskFull, or a code of the kind's
// own. Any other error reaches the host as the plugin's failure.
type SessionKeeper interface {
	// ConfigureSessions sets the limits of the session sandboxes from the
	// host's [sessions] table; the host calls it after Configure, and again
	// after a reload. A zero field takes the kind's default.
	ConfigureSessions(ctx context.Context, cfg SessionsConfig) error
	// ListFiles lists the files and folders of a session's workspace.
	ListFiles(ctx context.Context, session string) ([]SessionFile, error)
	// OpenFile opens one regular file of a workspace to read, and says its
	// size; a file larger than max bytes is errcode.TooLarge (max 0: the
	// kind's own bound). The SDK reads it a chunk at a time as the host
	// takes them, sends no more than size bytes, and closes it: a file of
	// any size costs a chunk of memory.
	OpenFile(ctx context.Context, session, path string, max int64) (r io.ReadCloser, size int64, err error)
	// WriteFile writes r to a file of a workspace, making its folders.
	WriteFile(ctx context.Context, session, path string, r io.Reader) (SessionFile, error)
	// RemoveFile removes one file or empty folder of a workspace.
	RemoveFile(ctx context.Context, session, path string) error
	// StopSession stops a session's sandbox; its files stay.
	StopSession(ctx context.Context, session string) error
	// DeleteSession removes a session's sandbox and files.
	DeleteSession(ctx context.Context, session string) error
	// Reconcile is called when the host starts: stop every sandbox, keep
	// the workspaces of the sessions in keep, delete the others and return
	// their ids.
	Reconcile(ctx context.Context, keep []string) (removed []string, err error)
}

// FileChunkSize is how much of a file one message of ReadFile or WriteFile
// carries: well under gRPC's 4 MiB bound on a message.
const FileChunkSize = 256 << 10

func servesSessions(k Kind) bool {
	_, ok := k.(SessionKeeper)
	return ok
}

// sessionsServer serves a SessionKeeper over gRPC in the plugin process.
type sessionsServer struct {
	pluginv1.UnimplementedSessionsServer
	impl SessionKeeper
}

var _ pluginv1.SessionsServer = (*sessionsServer)(nil)

// sessionStatus is err as the host reads it: an *Error in a status's
// details; ctx's end as gRPC's own; anything else as the plugin's failure.
func sessionStatus(ctx context.Context, what string, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e) && e.Code != "":
		return pluginv1.StatusOf(e)
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Internal, "%s failed: %v", what, err)
}

func needSession(session string) error {
	if session == "" {
		return pluginv1.StatusOf(errcode.New(errcode.BadArgs, "no session was named"))
	}
	return nil
}

func (s *sessionsServer) Configure(ctx context.Context, req *pluginv1.SessionsConfig) (*pluginv1.SessionsConfigureResponse, error) {
	cfg, bad := convert.SessionsConfigFromProto(req)
	if bad != nil {
		return nil, pluginv1.StatusOf(bad)
	}
	if err := s.impl.ConfigureSessions(ctx, cfg); err != nil {
		return nil, sessionStatus(ctx, "configuring the sessions", err)
	}
	return &pluginv1.SessionsConfigureResponse{}, nil
}

func (s *sessionsServer) ListFiles(ctx context.Context, req *pluginv1.SessionRef) (*pluginv1.FileList, error) {
	if err := needSession(req.GetSession()); err != nil {
		return nil, err
	}
	files, err := s.impl.ListFiles(ctx, req.GetSession())
	if err != nil {
		return nil, sessionStatus(ctx, "listing the session's files", err)
	}
	out := &pluginv1.FileList{Files: make([]*pluginv1.FileInfo, len(files))}
	for i, f := range files {
		out.Files[i] = convert.ToProtoFileInfo(f)
	}
	return out, nil
}

func (s *sessionsServer) ReadFile(req *pluginv1.FileRequest, stream pluginv1.Sessions_ReadFileServer) error {
	ctx := stream.Context()
	if err := needSession(req.GetSession()); err != nil {
		return err
	}
	r, size, err := s.impl.OpenFile(ctx, req.GetSession(), req.GetPath(), req.GetMaxBytes())
	if err != nil {
		return sessionStatus(ctx, "reading the file", err)
	}
	defer r.Close()
	limit := req.GetMaxBytes()
	tooLarge := func() error {
		return pluginv1.StatusOf(errcode.Errorf(errcode.TooLarge, "%s is larger than %d bytes", req.GetPath(), limit))
	}
	if limit > 0 && size > limit {
		return tooLarge()
	}
	// One buffer for the whole file: Send has encoded the chunk when it
	// returns, and waits while the host's window is full.
	buf := make([]byte, min(FileChunkSize, max(size, 1)))
	var sent int64
	for first := true; ; first = false {
		n, rerr := io.ReadFull(r, buf[:min(int64(len(buf)), max(size-sent, 0))])
		if rerr == io.ErrUnexpectedEOF {
			rerr = io.EOF // the file shrank since it was opened
		}
		if rerr != nil && rerr != io.EOF {
			return sessionStatus(ctx, "reading the file", rerr)
		}
		if limit > 0 && sent+int64(n) > limit {
			return tooLarge()
		}
		if n > 0 || first {
			c := &pluginv1.Chunk{Data: buf[:n]}
			if first {
				c.Size = size
			}
			if err := stream.Send(c); err != nil {
				return err
			}
			sent += int64(n)
		}
		if rerr == io.EOF || sent >= size {
			return nil
		}
	}
}

func (s *sessionsServer) WriteFile(stream pluginv1.Sessions_WriteFileServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		if err == io.EOF {
			return pluginv1.StatusOf(errcode.New(errcode.BadArgs, "the upload named no file"))
		}
		return err
	}
	if err := needSession(first.GetSession()); err != nil {
		return err
	}
	r := &chunkReader{stream: stream, buf: first.GetData()}
	f, err := s.impl.WriteFile(ctx, first.GetSession(), first.GetPath(), r)
	if err != nil {
		if r.err != nil && !errors.Is(r.err, io.EOF) {
			return r.err // the host went away mid-upload
		}
		return sessionStatus(ctx, "writing the file", err)
	}
	return stream.SendAndClose(convert.ToProtoFileInfo(f))
}

// chunkReader reads the data of an upload's chunks as one stream.
type chunkReader struct {
	stream pluginv1.Sessions_WriteFileServer
	buf    []byte
	err    error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		c, err := r.stream.Recv()
		if err != nil {
			if err != io.EOF {
				err = fmt.Errorf("the upload broke off: %w", err)
			}
			r.err = err
			return 0, err
		}
		r.buf = c.GetData()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (s *sessionsServer) RemoveFile(ctx context.Context, req *pluginv1.FileRequest) (*pluginv1.RemoveFileResponse, error) {
	if err := needSession(req.GetSession()); err != nil {
		return nil, err
	}
	if err := s.impl.RemoveFile(ctx, req.GetSession(), req.GetPath()); err != nil {
		return nil, sessionStatus(ctx, "removing the file", err)
	}
	return &pluginv1.RemoveFileResponse{}, nil
}

func (s *sessionsServer) StopSession(ctx context.Context, req *pluginv1.SessionRef) (*pluginv1.StopSessionResponse, error) {
	if err := needSession(req.GetSession()); err != nil {
		return nil, err
	}
	if err := s.impl.StopSession(ctx, req.GetSession()); err != nil {
		return nil, sessionStatus(ctx, "stopping the session's sandbox", err)
	}
	return &pluginv1.StopSessionResponse{}, nil
}

func (s *sessionsServer) DeleteSession(ctx context.Context, req *pluginv1.SessionRef) (*pluginv1.DeleteSessionResponse, error) {
	if err := needSession(req.GetSession()); err != nil {
		return nil, err
	}
	if err := s.impl.DeleteSession(ctx, req.GetSession()); err != nil {
		return nil, sessionStatus(ctx, "deleting the session", err)
	}
	return &pluginv1.DeleteSessionResponse{}, nil
}

func (s *sessionsServer) Reconcile(ctx context.Context, req *pluginv1.ReconcileRequest) (*pluginv1.ReconcileResponse, error) {
	removed, err := s.impl.Reconcile(ctx, req.GetKeep())
	if err != nil {
		return nil, sessionStatus(ctx, "reconciling the sessions", err)
	}
	return &pluginv1.ReconcileResponse{Removed: removed}, nil
}
