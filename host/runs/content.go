package runs

import (
	"slices"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
)

// A result's content between the plugin protocol's types and the client
// protocol's: the same fields, part by part. No parts is nil either way.

func contentToClient(parts []sdk.Content) []wire.Content {
	if len(parts) == 0 {
		return nil
	}
	out := make([]wire.Content, len(parts))
	for i, c := range parts {
		out[i] = wire.Content{Type: c.Type, Text: c.Text, Data: c.Data, MIMEType: c.MIMEType, URI: c.URI}
	}
	return out
}

func contentToSDK(parts []wire.Content) []sdk.Content {
	if len(parts) == 0 {
		return nil
	}
	out := make([]sdk.Content, len(parts))
	for i, c := range parts {
		out[i] = sdk.Content{Type: c.Type, Text: c.Text, Data: c.Data, MIMEType: c.MIMEType, URI: c.URI}
	}
	return out
}

// contentSize is what a result's content holds in memory.
func contentSize(parts []wire.Content) int {
	n := 0
	for _, c := range parts {
		n += 32 + len(c.Type) + len(c.Text) + len(c.Data) + len(c.MIMEType) + len(c.URI)
	}
	return n
}

// callerLogLevel is a log line's level as clients read it: one of
// sdk.CallerLogLevels, or "info" for a level a plugin made up.
func callerLogLevel(level string) string {
	if slices.Contains(sdk.CallerLogLevels, level) {
		return level
	}
	return "info"
}
