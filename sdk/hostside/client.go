// Package hostside is the host's half of the plugin protocol: the client
// of a kind plugin (KindClient, what go-plugin's Dispense returns from
// PluginSets) and the HostService the host serves to its plugins for
// nested calls. The toolhost host and sdktest import it; a plugin author
// never does (they import package sdk, whose Serve is the other half).
package hostside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/status"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/internal/convert"
	pluginv1 "github.com/toolhost/toolhost/sdk/internal/pluginv1"
)

// KindClient is the host's handle on a kind plugin. It is what
// go-plugin's Dispense returns for sdk.PluginName.
type KindClient struct {
	client        pluginv1.KindClient
	sessions      pluginv1.SessionsClient
	hostServiceID uint32
}

// Describe asks the plugin what it is.
func (c *KindClient) Describe(ctx context.Context) (sdk.Info, []uint32, error) {
	resp, err := c.client.Describe(ctx, &pluginv1.DescribeRequest{})
	if err != nil {
		return sdk.Info{}, nil, fmt.Errorf("the plugin didn't describe itself: %w", err)
	}
	info, versions := convert.InfoFromProto(resp)
	return info, versions, nil
}

// Configure hands the plugin its config table. A bad table comes back as
// FieldErrors. It also names the broker id of the host's HostService, which
// the plugin dials then, once, for the life of its process: call it right
// after Describe, within go-plugin's 5 s memory of the announcement made
// when the client was dispensed (host/plugins does). A reload may call it
// again at any time: the plugin keeps the connection it has.
func (c *KindClient) Configure(ctx context.Context, config json.RawMessage) error {
	resp, err := c.client.Configure(ctx, &pluginv1.ConfigureRequest{ConfigJson: string(config), HostServiceId: c.hostServiceID})
	if err != nil {
		return fmt.Errorf("the plugin didn't take its config: %w", err)
	}
	if fe := convert.FieldErrorsFromProto(resp.GetErrors()); fe != nil {
		return fe
	}
	return nil
}

// Check asks the plugin to check a tool, with the catalog of the tools
// loaded with it when the kind wants one (sdk.Info.WantsCatalog; nil sends
// none). A bad tool comes back as FieldErrors; any other error means the
// plugin could not be asked.
func (c *KindClient) Check(ctx context.Context, tool sdk.Tool, catalog []sdk.Tool) (json.RawMessage, error) {
	req := &pluginv1.CheckRequest{Tool: convert.ToProtoTool(tool), Catalog: convert.ToProtoTools(catalog)}
	resp, err := c.client.Check(ctx, req)
	if err != nil {
		return nil, &CheckUnavailableError{Reason: status.Convert(err).Message()}
	}
	if fe := convert.FieldErrorsFromProto(resp.GetErrors()); fe != nil {
		return nil, fe
	}
	return json.RawMessage(resp.GetRunJson()), nil
}

// CheckUnavailableError says a kind could not check a tool just now (its
// sandbox did not start, say): the tool itself may be fine, and a later
// check may pass.
type CheckUnavailableError struct{ Reason string }

func (e *CheckUnavailableError) Error() string {
	return "the tool could not be checked just now: " + e.Reason
}

// Invocation is one run as the host asks for it.
type Invocation struct {
	Tool      sdk.Tool
	Args      json.RawMessage
	RunID     string
	Principal string
	// Session is the backend id of the conversation's session, if any.
	Session string
	// SessionNetwork and SessionProxy are the session's network ("off",
	// "web" or "packages") and, for packages, the egress proxy's URL with
	// the session's credentials.
	SessionNetwork, SessionProxy string
}

// ErrStreamBroken reports that the plugin's stream ended without a result
// or an error: the plugin went away mid-run.
var ErrStreamBroken = errors.New("the plugin stopped before the run ended")

// Invoke runs a tool in the plugin, calling onEvent for each event in
// order, and returns the result, or an *sdk.Error the run ended with. Any other
// error is the transport's: wrapped ErrStreamBroken when the plugin died,
// or ctx's error when the caller cancelled. A result's content (its parts
// beyond the JSON value) reaches onEvent as one sdk.Event with Content set,
// just before Invoke returns; content that sdk.CheckContent refuses (from
// a plugin not built with the SDK) fails the run instead.
func (c *KindClient) Invoke(ctx context.Context, inv Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	stream, err := c.client.Invoke(ctx, convert.ToProtoInvokeRequest(sdk.Call{
		Tool: inv.Tool, Args: inv.Args, RunID: inv.RunID, Principal: inv.Principal,
		Session: inv.Session, SessionNetwork: inv.SessionNetwork, SessionProxy: inv.SessionProxy,
	}, c.hostServiceID))
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	for {
		pe, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				return nil, ErrStreamBroken
			}
			return nil, c.transportError(ctx, err)
		}
		switch k := pe.GetKind().(type) {
		case *pluginv1.Event_Result:
			value, parts := convert.ResultFromProto(k.Result)
			if parts != nil {
				if err := sdk.CheckContent(parts); err != nil {
					return nil, err
				}
				if onEvent != nil {
					onEvent(sdk.Event{Content: parts})
				}
			}
			return value, nil
		case *pluginv1.Event_Error:
			return nil, k.Error.ToError()
		default:
			if ev, ok := convert.EventFromProto(pe); ok && onEvent != nil {
				onEvent(ev)
			}
		}
	}
}

func (c *KindClient) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %v", ErrStreamBroken, err)
}
