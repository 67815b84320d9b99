package sdk

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// Doctor is implemented by a kind that can check the machine it runs on
// (`toolhost doctor`). It is optional: a kind without it has nothing to
// check. config is the kind's table as Configure would get it; Doctor must
// work whether or not Configure passed.
type Doctor interface {
	Doctor(ctx context.Context, config json.RawMessage) (DoctorReport, error)
}

func (s *kindServer) Doctor(ctx context.Context, req *pluginv1.DoctorRequest) (*pluginv1.DoctorResponse, error) {
	d, ok := s.impl.(Doctor)
	if !ok {
		return &pluginv1.DoctorResponse{}, nil
	}
	cfg := json.RawMessage(req.GetConfigJson())
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	rep, err := d.Doctor(ctx, cfg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking the machine failed: %v", err)
	}
	return convert.ToProtoDoctorResponse(rep), nil
}
