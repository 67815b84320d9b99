package pluginv1

// Hand-written beside the generated code: how the Sessions service carries
// an errcode.Error, as the details of a gRPC status.

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// StatusOf is e as a gRPC status error: a status code near its meaning, the
// message, and the Error itself in the details, where ErrorOfStatus finds
// it.
func StatusOf(e *errcode.Error) error {
	c := codes.FailedPrecondition
	switch e.Code {
	case errcode.NotFound:
		c = codes.NotFound
	case errcode.BadPath, errcode.BadArgs:
		c = codes.InvalidArgument
	case errcode.TooLarge, errcode.DiskFull, errcode.TooManySandboxes:
		c = codes.ResourceExhausted
	case errcode.Timeout:
		c = codes.DeadlineExceeded
	case errcode.Cancelled:
		c = codes.Canceled
	case errcode.Unsupported:
		c = codes.Unimplemented
	}
	st, err := status.New(c, e.Message).WithDetails(FromError(e))
	if err != nil {
		return status.Error(c, e.Message)
	}
	return st.Err()
}

// ErrorOfStatus is the Error in the details of a gRPC status error, or nil
// when it holds none (the transport's failure, or a plugin's own).
func ErrorOfStatus(err error) *errcode.Error {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if pe, ok := d.(*Error); ok && pe.GetCode() != "" {
			return pe.ToError()
		}
	}
	return nil
}
