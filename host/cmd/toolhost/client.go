package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolhost/toolhost/host/api"
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

func (c *clientFlags) header() http.Header {
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return h
}

type toolSpec struct {
	Type     string `json:"type"`
	Effect   string `json:"effect"`
	Kind     string `json:"kind"`
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Parameters  struct {
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		} `json:"parameters"`
	} `json:"function"`
}

func (c *clientFlags) fetchTools() ([]toolSpec, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+c.addr+"/api/v1/tools", nil)
	if err != nil {
		return nil, err
	}
	req.Header = c.header()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the host at %s can't be reached: %w", c.addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, fmt.Errorf("the host at %s needs a good token (give it with --token or TOOLHOST_TOKEN)", c.addr)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the host answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var list struct {
		Tools []toolSpec `json:"tools"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the host's tool list can't be read: %w", err)
	}
	return list.Tools, nil
}

func runTools(args []string, stdout, stderr io.Writer) int {
	var cf clientFlags
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	list, err := cf.fetchTools()
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tEFFECT\tPARAMS\tDESCRIPTION")
	for _, t := range list {
		var params []string
		for name := range t.Function.Parameters.Properties {
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
func parseArgs(spec *toolSpec, pairs []string) (json.RawMessage, error) {
	args := map[string]any{}
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not name=value", p)
		}
		prop, known := spec.Function.Parameters.Properties[name]
		if !known {
			var names []string
			for n := range spec.Function.Parameters.Properties {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("%s has no parameter %q (it takes: %s)", spec.Function.Name, name, strings.Join(names, ", "))
		}
		if prop["type"] == "string" {
			args[name] = value
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			if prop["type"] == nil { // a json param: plain text is a string
				args[name] = value
				continue
			}
			return nil, fmt.Errorf("%s=%s: the value must be JSON (%v)", name, value, prop["type"])
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
	list, err := cf.fetchTools()
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	var spec *toolSpec
	for i := range list {
		if list[i].Function.Name == name {
			spec = &list[i]
		}
	}
	if spec == nil {
		fmt.Fprintf(stderr, "toolhost: the host serves no tool named %q (see `toolhost tools`)\n", name)
		return 2
	}
	callArgs, err := parseArgs(spec, fs.Args()[1:])
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	return streamCall(cf, name, callArgs, *raw, stdout, stderr)
}

// callEvent is a frame of the host, as toolhost call reads it.
type callEvent struct {
	Type    string          `json:"type"`
	Run     string          `json:"run"`
	Seq     *int64          `json:"seq"`
	LastSeq int64           `json:"last_seq"`
	Data    string          `json:"data"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// dial opens the websocket, saying in words why it could not.
func (c *clientFlags) dial() (*websocket.Conn, error) {
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+c.addr+"/api/v1/ws", c.header())
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("the host at %s refused the token (give a good one with --token or TOOLHOST_TOKEN)", c.addr)
		}
		if resp != nil && resp.StatusCode == http.StatusForbidden {
			return nil, fmt.Errorf("the host at %s refused the connection (%s)", c.addr, resp.Status)
		}
		return nil, fmt.Errorf("the websocket at %s can't be opened: %w", c.addr, err)
	}
	// Say hello, and check the host speaks our protocol.
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = ws.SetReadDeadline(time.Time{}) }()
	if err := ws.WriteJSON(map[string]any{"type": "hello", "id": "hello", "client": "toolhost-cli", "protocol": api.ProtocolVersion}); err != nil {
		ws.Close()
		return nil, fmt.Errorf("the host at %s can't be greeted: %w", c.addr, err)
	}
	var hello struct {
		Type     string `json:"type"`
		Protocol int    `json:"protocol"`
		Error    *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := ws.ReadJSON(&hello); err != nil {
		ws.Close()
		return nil, fmt.Errorf("the host at %s did not answer hello: %w", c.addr, err)
	}
	if hello.Type != "hello" || hello.Protocol != api.ProtocolVersion {
		ws.Close()
		why := fmt.Sprintf("it speaks protocol %d", hello.Protocol)
		if hello.Error != nil {
			why = hello.Error.Message
		}
		return nil, fmt.Errorf("the host at %s does not speak protocol %d that this toolhost speaks (%s)", c.addr, api.ProtocolVersion, why)
	}
	return ws, nil
}

// streamCall calls a tool and prints its events until the run ends. If
// the connection drops, it reconnects and re-attaches from the last seq it
// got, so nothing is printed twice or lost. Exit codes: 0 result, 1 run
// error, 2 refused or unreachable.
func streamCall(cf clientFlags, name string, args json.RawMessage, raw bool, stdout, stderr io.Writer) int {
	const id = "cli"
	ws, err := cf.dial()
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	defer func() { ws.Close() }()
	if err := ws.WriteJSON(map[string]any{"type": "call", "id": id, "tool": name, "args": args}); err != nil {
		fmt.Fprintf(stderr, "toolhost: the call could not be sent: %v\n", err)
		return 2
	}
	run, last := "", int64(-1)
	retries := 0
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			if run == "" || retries >= 5 {
				fmt.Fprintf(stderr, "toolhost: the connection ended before the run did: %v\n", err)
				return 2
			}
			// Reconnect and pick the run up after the last event we have.
			retries++
			time.Sleep(time.Duration(retries) * 500 * time.Millisecond)
			ws.Close()
			if ws, err = cf.dial(); err == nil {
				err = ws.WriteJSON(map[string]any{"type": "attach", "id": id, "run": run, "after_seq": last})
			}
			if err != nil {
				fmt.Fprintf(stderr, "toolhost: the connection dropped and could not be reopened: %v\n", err)
				return 2
			}
			continue
		}
		var ev callEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			fmt.Fprintf(stderr, "toolhost: the host sent a frame that isn't JSON: %v\n", err)
			return 2
		}
		if ev.Seq != nil {
			if *ev.Seq <= last {
				continue // already printed
			}
			last = *ev.Seq
			run = ev.Run
			retries = 0
		}
		if raw {
			fmt.Fprintln(stdout, string(data))
		}
		switch ev.Type {
		case "stdout":
			if !raw {
				fmt.Fprint(stdout, ev.Data)
			}
		case "stderr":
			if !raw {
				fmt.Fprint(stderr, ev.Data)
			}
		case "behind":
			if err := ws.WriteJSON(map[string]any{"type": "attach", "id": id, "run": ev.Run, "after_seq": last}); err != nil {
				fmt.Fprintf(stderr, "toolhost: the run could not be followed: %v\n", err)
				return 2
			}
		case "closing":
			// The host ends this connection for good (its token was revoked
			// or downgraded by a reload): reconnecting would not help.
			code, message := "closing", "the host closed the connection"
			if ev.Error != nil {
				code, message = ev.Error.Code, ev.Error.Message
			}
			fmt.Fprintf(stderr, "toolhost: %s (%s)\n", message, code)
			if run != "" {
				fmt.Fprintf(stderr, "toolhost: the run %s goes on; an admin can read it with GET /api/v1/runs/%s\n", run, run)
			}
			return 2
		case "result":
			if !raw {
				var pretty any
				_ = json.Unmarshal(ev.Result, &pretty)
				b, _ := json.MarshalIndent(pretty, "", "  ")
				fmt.Fprintln(stdout, string(b))
			}
			return 0
		case "error":
			code, message := "failed", "the run failed"
			if ev.Error != nil {
				code, message = ev.Error.Code, ev.Error.Message
			}
			if !raw {
				fmt.Fprintf(stderr, "toolhost: %s (%s)\n", message, code)
			}
			if ev.Seq == nil {
				return 2 // refused before it ran
			}
			return 1
		}
	}
}
