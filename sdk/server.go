package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// kindServer serves a Kind over gRPC in the plugin process.
type kindServer struct {
	pluginv1.UnimplementedKindServer
	impl Kind
	// protocol is the plugin protocol spoken with the host (go-plugin
	// picked it in the handshake).
	protocol int
	// host is the connection to the host's HostService, dialled when the
	// host configures the plugin (see hostlink.go for why then).
	host   *hostLink
	logger hclog.Logger
}

var _ pluginv1.KindServer = (*kindServer)(nil)

func (s *kindServer) Describe(ctx context.Context, _ *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	info, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "describing the kind failed: %v", err)
	}
	info.WantsCatalog = wantsCatalog(s.impl)
	info.ServesSessions = servesSessions(s.impl)
	return convert.ToProtoDescribeResponse(info, protocolVersions32()), nil
}

func (s *kindServer) Configure(ctx context.Context, req *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	if id := req.GetHostServiceId(); id != 0 {
		// Dial the host now, while its announcement is fresh, and keep the
		// connection; a reload sends the same id and keeps it too. A kind
		// that never calls back works without it, so a failure is logged
		// and said again by the Host of the runs that use it.
		if _, err := s.host.connect(ctx, id, true); err != nil {
			s.logger.Warn("nested tool calls from this plugin will fail", "error", err)
		}
	}
	cfg := json.RawMessage(req.GetConfigJson())
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	if err := s.impl.Configure(ctx, cfg); err != nil {
		return &pluginv1.ConfigureResponse{Errors: convert.ToProtoFieldErrors(asFieldErrors(err))}, nil
	}
	return &pluginv1.ConfigureResponse{}, nil
}

func (s *kindServer) Check(ctx context.Context, req *pluginv1.CheckRequest) (*pluginv1.CheckResponse, error) {
	var run json.RawMessage
	var err error
	if cc, ok := s.impl.(CatalogChecker); ok && req.GetCatalog() != nil {
		run, err = cc.CheckWithCatalog(ctx, convert.ToolFromProto(req.GetTool()), convert.ToolsFromProto(req.GetCatalog()))
	} else {
		run, err = s.impl.Check(ctx, convert.ToolFromProto(req.GetTool()))
	}
	if err != nil {
		var fe FieldErrors
		if errors.As(err, &fe) && len(fe) > 0 {
			return &pluginv1.CheckResponse{Errors: convert.ToProtoFieldErrors(fe)}, nil
		}
		// Not the tool's fault: the kind could not check it now.
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &pluginv1.CheckResponse{RunJson: string(run)}, nil
}

// asFieldErrors turns any error into field errors: FieldErrors as they are,
// anything else as one error without a field.
func asFieldErrors(err error) FieldErrors {
	var fe FieldErrors
	if errors.As(err, &fe) && len(fe) > 0 {
		return fe
	}
	return FieldErrors{{Message: err.Error()}}
}

func (s *kindServer) Invoke(req *pluginv1.InvokeRequest, stream pluginv1.Kind_InvokeServer) error {
	ctx := stream.Context()
	var (
		mu   sync.Mutex
		seq  uint64
		done bool
		// sendErr remembers the first failed send: the host has gone, so
		// the run is cancelled through ctx anyway.
		sendErr error
		// content is the result's parts, emitted during the run.
		content []Content
	)
	send := func(ev *pluginv1.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if done || sendErr != nil {
			return sendErr
		}
		ev.Seq = seq
		seq++
		sendErr = stream.Send(ev)
		return sendErr
	}
	emit := Emit(func(e Event) {
		if e.Content != nil {
			mu.Lock()
			if !done {
				content = append(content, e.Content...)
			}
			mu.Unlock()
			return
		}
		if e.Display != nil {
			part := *e.Display
			mu.Lock()
			if !done {
				content = append(content, part)
			}
			mu.Unlock()
			if CheckContent([]Content{part}) != nil {
				return // the result's check fails the run, naming the part
			}
		}
		if pe := convert.ToProtoEvent(e); pe != nil {
			_ = send(pe)
		}
	})
	call, hostServiceID := convert.CallFromProto(req)
	call.Host = lazyHost{link: s.host, id: hostServiceID}
	if len(call.Args) == 0 {
		call.Args = json.RawMessage("{}")
	}
	result, err := s.impl.Invoke(ctx, call, emit)
	mu.Lock()
	parts := content
	mu.Unlock()
	if err == nil && len(parts) > 0 {
		err = s.checkContent(parts)
	}
	var final *pluginv1.Event
	if err != nil {
		final = &pluginv1.Event{Kind: &pluginv1.Event_Error{Error: pluginv1.FromError(errcode.FromRun(ctx, err))}}
	} else {
		if len(result) == 0 {
			result = json.RawMessage("null")
		}
		final = &pluginv1.Event{Kind: &pluginv1.Event_Result{Result: convert.ToProtoResult(result, parts)}}
	}
	err = send(final)
	mu.Lock()
	done = true
	mu.Unlock()
	return err
}

// checkContent fails a run whose content is wrong, too large, or more
// than a host of an older protocol can take.
func (s *kindServer) checkContent(parts []Content) error {
	if s.protocol != 0 && s.protocol < contentProtocol {
		return Errorf(errcode.Unsupported, "the run returned content (text, images, audio or resources beside its value), which this host can't take: it speaks plugin protocol %d, and content needs %d; upgrade toolhost", s.protocol, contentProtocol)
	}
	return CheckContent(parts)
}

// contentProtocol is the plugin protocol that added a result's content.
const contentProtocol = 3

func wantsCatalog(k Kind) bool {
	_, ok := k.(CatalogChecker)
	return ok
}

// protocolVersions32 is ProtocolVersions as Describe says them.
func protocolVersions32() []uint32 {
	vs := ProtocolVersions()
	out := make([]uint32, len(vs))
	for i, v := range vs {
		out[i] = uint32(v)
	}
	return out
}
