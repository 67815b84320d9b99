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
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+cf.addr+"/api/v1/ws", cf.header())
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: the websocket at %s can't be opened: %v\n", cf.addr, err)
		return 2
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"type": "call", "id": "cli", "tool": name, "args": callArgs}); err != nil {
		fmt.Fprintf(stderr, "toolhost: the call could not be sent: %v\n", err)
		return 2
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: the connection ended before the run did: %v\n", err)
			return 2
		}
		if *raw {
			fmt.Fprintln(stdout, string(data))
		}
		var ev struct {
			Type   string          `json:"type"`
			Data   string          `json:"data"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			fmt.Fprintf(stderr, "toolhost: the host sent a frame that isn't JSON: %v\n", err)
			return 2
		}
		switch ev.Type {
		case "stdout":
			if !*raw {
				fmt.Fprint(stdout, ev.Data)
			}
		case "stderr":
			if !*raw {
				fmt.Fprint(stderr, ev.Data)
			}
		case "result":
			if !*raw {
				var pretty any
				_ = json.Unmarshal(ev.Result, &pretty)
				b, _ := json.MarshalIndent(pretty, "", "  ")
				fmt.Fprintln(stdout, string(b))
			}
			return 0
		case "error":
			if ev.Error == nil {
				ev.Error = &struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				}{"failed", "the run failed"}
			}
			if !*raw {
				fmt.Fprintf(stderr, "toolhost: %s (%s)\n", ev.Error.Message, ev.Error.Code)
			}
			return 1
		}
	}
}
