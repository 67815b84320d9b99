package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/toolhost/toolhost/client/wire"
)

// messageTypes are the frames a client may send.
var messageTypes = map[string]bool{wire.TypeHello: true, wire.TypePing: true, wire.TypeListTools: true, wire.TypeCall: true, wire.TypeCancel: true, wire.TypeAttach: true, wire.TypeApprove: true}

// decodeFrame reads one client frame, or says what is wrong with it (with
// the frame's id when one can be read).
func decodeFrame(data []byte) (wire.Message, *wire.ErrorFrame) {
	var m wire.Message
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var loose struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &loose)
		return m, badFrame(loose.ID, "the frame is not a JSON object of the protocol: "+describeJSONError(err))
	}
	if dec.More() {
		return m, badFrame(m.ID, "the frame holds more than one JSON value")
	}
	switch {
	case m.Type == "":
		return m, badFrame(m.ID, "the frame has no \"type\" (call, cancel, attach, list_tools, hello or ping)")
	case !messageTypes[m.Type]:
		return m, badFrame(m.ID, fmt.Sprintf("%q is not a message type (call, cancel, attach, list_tools, hello or ping)", m.Type))
	case m.Type == wire.TypeCall && m.ID == "":
		return m, badFrame("", "a call needs an \"id\" of your choosing, to match its events")
	case m.Type == wire.TypeCall && m.Tool == "":
		return m, badFrame(m.ID, "a call needs a \"tool\" to run")
	case m.Type == wire.TypeAttach && m.Run == "":
		return m, badFrame(m.ID, "attach needs the \"run\" to attach to")
	case m.Type == wire.TypeApprove && m.Approval == "":
		return m, badFrame(m.ID, "approve needs the \"approval\" to decide (from approval_required)")
	case m.Type == wire.TypeApprove && m.Decision != wire.DecisionApprove && m.Decision != wire.DecisionDecline:
		return m, badFrame(m.ID, fmt.Sprintf("approve needs a \"decision\": \"approve\" or \"decline\", not %q", m.Decision))
	case m.Type == wire.TypeCancel && m.Run == "" && m.ID == "":
		return m, badFrame("", "cancel needs the \"run\" to cancel, or the \"id\" of your call")
	}
	return m, nil
}

// errorFrame is the reply to a frame that can't be acted on.
func errorFrame(id, run, code, message string) *wire.ErrorFrame {
	return &wire.ErrorFrame{Type: wire.TypeError, ID: id, Run: run, Error: wire.Error{Code: code, Message: message}}
}

func badFrame(id, message string) *wire.ErrorFrame {
	return errorFrame(id, "", wire.CodeBadFrame, message)
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("it isn't valid JSON (at byte %d: %v)", se.Offset, se)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ")
	case errors.Is(err, io.EOF):
		return "it is empty"
	}
	return err.Error()
}
