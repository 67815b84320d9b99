package api

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeFrame(t *testing.T) {
	cases := []struct {
		frame   string
		wantErr string // "" for a good frame
		wantID  string
	}{
		{`{"type":"call","id":"c1","tool":"t","args":{"a":1}}`, "", "c1"},
		{`{"type":"cancel","run":"r1"}`, "", ""},
		{`{"type":"attach","run":"r1","after_seq":4}`, "", ""},
		{`{"type":"ping","id":"p"}`, "", "p"},
		{`not json`, "isn't valid JSON", ""},
		{``, "it is empty", ""},
		{`[1,2]`, "must be", ""},
		{`{"type":"call","id":"c2","tool":"t","extra":1}`, `unknown field "extra"`, "c2"},
		{`{"type":"call","id":7,"tool":"t"}`, `field "id" must be string`, ""},
		{`{"type":"call","tool":"t"}`, `needs an "id"`, ""},
		{`{"type":"call","id":"c3"}`, `needs a "tool"`, "c3"},
		{`{"type":"attach","id":"a"}`, `needs the "run"`, "a"},
		{`{"type":"cancel"}`, `cancel needs`, ""},
		{`{"id":"x"}`, `has no "type"`, "x"},
		{`{"type":"fly","id":"x"}`, `"fly" is not a message type`, "x"},
		{`{"type":"ping"} {"type":"ping"}`, "more than one JSON value", ""},
	}
	for _, c := range cases {
		m, bad := decodeFrame([]byte(c.frame))
		switch {
		case c.wantErr == "" && bad != nil:
			t.Errorf("%s: unexpected error %q", c.frame, bad.Error.Message)
		case c.wantErr != "" && bad == nil:
			t.Errorf("%s: no error, want one saying %q", c.frame, c.wantErr)
		case bad != nil && (!strings.Contains(bad.Error.Message, c.wantErr) || bad.ID != c.wantID || bad.Error.Code != "bad_frame"):
			t.Errorf("%s: error %+v, want code bad_frame, id %q, message with %q", c.frame, bad, c.wantID, c.wantErr)
		case bad == nil && m.ID != c.wantID:
			t.Errorf("%s: id %q, want %q", c.frame, m.ID, c.wantID)
		}
	}
}

// FuzzDecodeFrame: any bytes give either a message of a known type with
// the fields it needs, or one bad_frame error that encodes to valid JSON.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"call","id":"c1","tool":"t","args":{"a":1}}`, `{"type":"attach","run":"r","after_seq":-1}`,
		`{"type":"cancel","id":"x"}`, `{"type":"hello","client":"me","protocol":1}`, `{"id":"\u0000"}`, `{`, `"\xff"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, bad := decodeFrame(data)
		if bad != nil {
			if bad.Type != "error" || bad.Error.Code != "bad_frame" || bad.Error.Message == "" {
				t.Fatalf("bad error frame %+v", bad)
			}
			b, err := json.Marshal(bad)
			if err != nil || !utf8.Valid(b) || !json.Valid(b) {
				t.Fatalf("the error frame does not encode: %v", err)
			}
			return
		}
		if !messageTypes[m.Type] {
			t.Fatalf("accepted unknown type %q", m.Type)
		}
		if m.Type == "call" && (m.ID == "" || m.Tool == "") {
			t.Fatalf("accepted a call without id or tool: %+v", m)
		}
		if m.Type == "attach" && m.Run == "" {
			t.Fatalf("accepted an attach without run: %+v", m)
		}
	})
}
