package hostside_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// TestContentNeedsAHostOfProtocol3: a plugin process of this SDK returning
// an image, started as the host starts it: under this host (protocol 3
// negotiated) the image reaches the host with the value; under a host of
// versions 1 and 2 only (an older release, which can't read content) the
// run fails with unsupported, saying why, rather than lose the image.
func TestContentNeedsAHostOfProtocol3(t *testing.T) {
	bin := build(t, "../testdata/content-kind")
	tool := sdk.Tool{Name: "pic", Run: json.RawMessage(`{"type":"content"}`)}
	for _, c := range []struct {
		sets     map[int]plugin.PluginSet
		protocol int
	}{{hostside.PluginSets(nil), 3}, {onlyVersions(1, 2), 2}} {
		kc, v, err := start(t, bin, c.sets)
		if err != nil || v != c.protocol {
			t.Fatalf("started at protocol %d (%v), want %d", v, err, c.protocol)
		}
		var content []sdk.Content
		res, err := kc.Invoke(context.Background(), hostside.Invocation{Tool: tool, Args: json.RawMessage(`{}`), RunID: "r1"}, func(e sdk.Event) {
			content = append(content, e.Content...)
		})
		if c.protocol == 3 {
			want := []sdk.Content{{Type: sdk.ContentImage, Data: []byte("\x89PNG\x00"), MIMEType: "image/png"}}
			if err != nil || string(res) != `{"w":1}` || !reflect.DeepEqual(content, want) {
				t.Fatalf("protocol 3: %s %+v %v", res, content, err)
			}
			continue
		}
		if errcode.Code(err) != errcode.Unsupported || !strings.Contains(err.Error(), "it speaks plugin protocol 2, and content needs 3") || content != nil {
			t.Fatalf("protocol 2: %s %+v %v; want unsupported, saying why", res, content, err)
		}
	}
}
