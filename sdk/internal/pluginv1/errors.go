package pluginv1

// Hand-written beside the generated code (buf generate leaves this file
// alone): the one conversion both sides of the protocol need.

import "github.com/toolhost/toolhost/sdk/errcode"

// FromError is e on the wire; nil stays nil.
func FromError(e *errcode.Error) *Error {
	if e == nil {
		return nil
	}
	return &Error{Code: e.Code, Message: e.Message}
}

// ToError is e off the wire; nil stays nil.
func (e *Error) ToError() *errcode.Error {
	if e == nil {
		return nil
	}
	return &errcode.Error{Code: e.GetCode(), Message: e.GetMessage()}
}
