package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// clientFlags are the flags of the commands that talk to a running host.
type clientFlags struct {
	addr  string
	token string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "the host's address")
	fs.StringVar(&c.token, "token", os.Getenv("TOOLHOST_TOKEN"), "a bearer token (default $TOOLHOST_TOKEN)")
}

func (c *clientFlags) options() client.Options {
	return client.Options{Token: c.token, Client: "toolhost-cli"}
}

// explain says a client error in the CLI's words: which flag to fix.
func (c *clientFlags) explain(err error) error {
	switch errcode.Code(err) {
	case wire.CodeUnauthorized:
		return fmt.Errorf("the host at %s needs a good token (give it with --token or TOOLHOST_TOKEN)", c.addr)
	case wire.CodeForbidden:
		return fmt.Errorf("the host at %s refused the connection: %w", c.addr, err)
	}
	return err
}

func (c *clientFlags) fetchTools(ctx context.Context) ([]client.Tool, error) {
	h, err := client.NewHTTP(c.addr, c.options())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := h.Tools(ctx)
	if err != nil {
		return nil, c.explain(err)
	}
	return list, nil
}

// properties are a tool's params as JSON Schema, by name.
func properties(t client.Tool) map[string]map[string]any {
	out := map[string]map[string]any{}
	props, _ := t.Function.Parameters["properties"].(map[string]any)
	for name, p := range props {
		m, _ := p.(map[string]any)
		out[name] = m
	}
	return out
}

// schemaType is a param's JSON Schema type leaving out "null", which an
// optional param also takes (it means "not given"): "" for a json param,
// which takes any value.
func schemaType(prop map[string]any) string {
	switch ty := prop["type"].(type) {
	case string:
		return ty
	case []any:
		var rest []string
		for _, t := range ty {
			if s, ok := t.(string); ok && s != "null" {
				rest = append(rest, s)
			}
		}
		if len(rest) == 1 {
			return rest[0]
		}
	}
	return ""
}

func runTools(args []string, stdout, stderr io.Writer) int {
	var cf clientFlags
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	list, err := cf.fetchTools(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tEFFECT\tPARAMS\tDESCRIPTION")
	for _, t := range list {
		var params []string
		for name := range properties(t) {
			params = append(params, name)
		}
		sort.Strings(params)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Function.Name, t.Kind, t.Effect, strings.Join(params, ","), t.Function.Description)
	}
	_ = tw.Flush()
	return 0
}

// parseArgs turns name=value pairs into JSON arguments: text params take
// the value as it is; other params take it as JSON (42, true, [1,2]).
func parseArgs(spec client.Tool, pairs []string) (json.RawMessage, error) {
	props := properties(spec)
	args := map[string]any{}
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not name=value", p)
		}
		prop, known := props[name]
		if !known {
			var names []string
			for n := range props {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("%s has no parameter %q (it takes: %s)", spec.Function.Name, name, strings.Join(names, ", "))
		}
		ty := schemaType(prop)
		if ty == "string" {
			args[name] = value
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			if ty == "" { // a json param: plain text is a string
				args[name] = value
				continue
			}
			return nil, fmt.Errorf("%s=%s: the value must be JSON (%v)", name, value, ty)
		}
		args[name] = v
	}
	return json.Marshal(args)
}

func runCall(args []string, stdout, stderr io.Writer) int {
	var cf clientFlags
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf.register(fs)
	raw := fs.Bool("json", false, "print the raw events, one JSON object a line")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: toolhost call [--addr HOST:PORT] [--token T] [--json] TOOL [name=value ...]

Calls TOOL on a running host and streams what it prints: its stdout to
stdout, its stderr to stderr, then the result as JSON. Text params take the
value as it is; others take JSON (n=42, flag=true, items='["a","b"]').

Exit codes: 0 the run returned a result; 1 the run ended with an error;
2 usage error, refused call, or the host could not be reached.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 {
		fmt.Fprintln(stderr, "toolhost call: name the tool to call: toolhost call TOOL [name=value ...]")
		return 2
	}
	name := fs.Arg(0)
	list, err := cf.fetchTools(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	var spec *client.Tool
	for i := range list {
		if list[i].Function.Name == name {
			spec = &list[i]
		}
	}
	if spec == nil {
		fmt.Fprintf(stderr, "toolhost: the host serves no tool named %q (see `toolhost tools`)\n", name)
		return 2
	}
	callArgs, err := parseArgs(*spec, fs.Args()[1:])
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	// Ctrl-C ends the command, not the run (runs outlive connections).
	return streamCall(context.Background(), cf, name, callArgs, *raw, stdout, stderr)
}

// streamCall calls a tool and prints its events until the run ends. If
// the connection drops, the client reconnects and re-attaches from the
// last seq it got, so nothing is printed twice or lost. Exit codes: 0
// result, 1 run error, 2 refused or unreachable.
func streamCall(ctx context.Context, cf clientFlags, name string, args json.RawMessage, raw bool, stdout, stderr io.Writer) int {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := client.Dial(dctx, cf.addr, cf.options())
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", cf.explain(err))
		return 2
	}
	defer conn.Close()
	run := ""
	res, err := conn.CallWith(ctx, name, args, client.CallOptions{ID: "cli"}, func(e client.Event) {
		run = e.Run
		switch {
		case raw:
			b, _ := json.Marshal(e)
			fmt.Fprintln(stdout, string(b))
		case e.Type == client.TypeStdout:
			fmt.Fprint(stdout, e.Data)
		case e.Type == client.TypeStderr:
			fmt.Fprint(stderr, e.Data)
		case e.Type == client.TypeLog:
			fmt.Fprintf(stderr, "[%s] %s\n", e.Level, e.Message)
		case e.Type == client.TypeDisplay:
			for _, c := range e.Content {
				fmt.Fprintf(stderr, "toolhost: the run shows %s (it comes with the result; --json shows it whole)\n", contentSummary(c))
			}
		case e.Type == client.TypeResult:
			for i, c := range e.Content {
				fmt.Fprintf(stderr, "toolhost: content %d of the result: %s (--json shows it whole)\n", i+1, contentSummary(c))
			}
		}
	})
	if err == nil {
		if !raw {
			var pretty any
			_ = json.Unmarshal(res, &pretty)
			b, _ := json.MarshalIndent(pretty, "", "  ")
			fmt.Fprintln(stdout, string(b))
		}
		return 0
	}
	var ce *client.Error
	switch {
	case !errors.As(err, &ce):
		// The host could not be reached again, or ctx ended.
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	case ce.Code == wire.CodeTokenRevoked || ce.Code == wire.CodeTokenDowngraded:
		// The host ended this connection for good (its token was revoked
		// or downgraded by a reload): reconnecting would not help.
		fmt.Fprintf(stderr, "toolhost: %s (%s)\n", ce.Message, ce.Code)
		if run != "" {
			fmt.Fprintf(stderr, "toolhost: the run %s goes on; an admin can read it with GET /api/v1/runs/%s\n", run, run)
		}
		return 2
	case run == "":
		// Refused before it ran.
		if raw {
			b, _ := json.Marshal(client.ErrorFrame{Type: wire.TypeError, ID: "cli", Error: *ce})
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintf(stderr, "toolhost: %s (%s)\n", ce.Message, ce.Code)
		}
		return 2
	}
	if !raw {
		fmt.Fprintf(stderr, "toolhost: %s (%s)\n", ce.Message, ce.Code)
	}
	return 1
}

// contentSummary says what a part of a result's content is, in a line.
func contentSummary(c client.Content) string {
	what := c.Type
	if c.URI != "" {
		what += " " + c.URI
	}
	if c.MIMEType != "" {
		what += ", " + c.MIMEType
	}
	if c.Type == client.ContentText || c.Text != "" {
		return fmt.Sprintf("%s, %d characters", what, len([]rune(c.Text)))
	}
	return fmt.Sprintf("%s, %d bytes", what, len(c.Data))
}
