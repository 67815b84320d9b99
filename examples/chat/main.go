// Command chat is a small chat backend that a reader can copy: it asks an
// OpenAI-compatible model (Ollama, vLLM, llama.cpp's server, OpenAI …),
// offers it toolhost's tools, runs the calls the model asks for over
// toolhost's websocket with the client package, streams what the tools
// print to the terminal, and asks on the terminal before a tool that
// needs approval runs.
//
//	TOOLHOST_TOKEN=… go run ./examples/chat -model llama3.2
//
// See README.md beside it.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"unicode"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolhost/toolhost/client"
)

// maxRounds bounds the tool calls the model may make for one message.
const maxRounds = 10

// options are the command line's.
type options struct {
	ModelURL string // the model endpoint's base URL
	Model    string
	KeyEnv   string // the environment variable that holds the model's API key
	Toolhost string // toolhost's websocket URL
	Token    string // toolhost's token (from $TOOLHOST_TOKEN)
	System   string // the system prompt
	Strict   bool   // the tools in OpenAI's strict mode
}

func main() {
	var o options
	flag.StringVar(&o.ModelURL, "model-url", env("CHAT_MODEL_URL", "http://127.0.0.1:11434/v1"), "the model's OpenAI-compatible endpoint (toolhost's [model] base_url)")
	flag.StringVar(&o.Model, "model", env("CHAT_MODEL", "llama3.2"), "the model to ask (toolhost's [model] model)")
	flag.StringVar(&o.KeyEnv, "api-key-env", "", "the environment variable that holds the model's API key (none when empty)")
	flag.StringVar(&o.Toolhost, "toolhost", env("TOOLHOST_URL", "ws://127.0.0.1:8080/api/v1/ws"), "toolhost's websocket URL; the token is read from $TOOLHOST_TOKEN")
	flag.StringVar(&o.System, "system", "You are a helpful assistant. Use the tools when they help.", "the system prompt")
	flag.BoolVar(&o.Strict, "strict", false, "offer the tools in OpenAI's strict mode (the model's arguments always fit their schema; OpenAI's models only)")
	flag.Parse()
	o.Token = os.Getenv("TOOLHOST_TOKEN")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// chat is one conversation: the model, toolhost, the terminal and the
// messages so far.
type chat struct {
	o       options
	model   openai.ChatCompletionService
	conn    *client.Conn
	tools   []openai.ChatCompletionToolUnionParam
	session string        // the conversation's id, sent with every tool call
	lines   <-chan string // what the user types, a line at a time
	out     io.Writer
	history []openai.ChatCompletionMessageParamUnion
}

// run connects to the model and toolhost, then chats until the input ends.
func run(ctx context.Context, o options, in io.Reader, out io.Writer) error {
	opts := []option.RequestOption{option.WithBaseURL(strings.TrimRight(o.ModelURL, "/") + "/"), option.WithMaxRetries(1)}
	if o.KeyEnv != "" {
		key := strings.TrimSpace(os.Getenv(o.KeyEnv))
		if key == "" {
			return fmt.Errorf("-api-key-env names %s, but that environment variable is empty: set it to the model's API key", o.KeyEnv)
		}
		opts = append(opts, option.WithAPIKey(key))
	}
	out = terminal{out}
	// The service, not openai.NewClient, which would also read OPENAI_*
	// variables and could send a key to a server it was not meant for.
	c := &chat{o: o, model: openai.NewChatCompletionService(opts...), lines: readLines(ctx, in), out: out}

	conn, err := client.Dial(ctx, o.Toolhost, client.Options{Token: o.Token, Client: "examples/chat"})
	if err != nil {
		return fmt.Errorf("can't connect to toolhost at %s (is it running, and is $TOOLHOST_TOKEN right?): %w", o.Toolhost, err)
	}
	defer conn.Close()
	c.conn = conn
	// The tools in OpenAI's format, handed to the model as toolhost wrote
	// them.
	specs, err := conn.ToolSpecs(ctx, client.FormatOpenAI, o.Strict)
	if err != nil {
		return fmt.Errorf("toolhost did not list its tools: %w", err)
	}
	names := []string{}
	for _, raw := range specs.Tools {
		var spec client.OpenAITool
		if err := json.Unmarshal(raw, &spec); err != nil {
			return fmt.Errorf("toolhost's tool list can't be read: %w", err)
		}
		fn := param.Override[openai.ChatCompletionFunctionToolParam](raw)
		c.tools = append(c.tools, openai.ChatCompletionToolUnionParam{OfFunction: &fn})
		names = append(names, spec.Function.Name)
	}
	for _, n := range specs.NotStrict {
		fmt.Fprintf(out, "%s is offered without strict mode: %s\n", n.Name, n.Why)
	}
	c.session = newID()
	if o.System != "" {
		c.history = append(c.history, openai.SystemMessage(o.System))
	}
	fmt.Fprintf(out, "connected to toolhost as %s; tools: %s; conversation %s\n", conn.Hello.Principal, strings.Join(names, ", "), c.session)

	for {
		fmt.Fprint(out, "> ")
		line, ok := c.readLine(ctx)
		if !ok {
			fmt.Fprintln(out)
			return ctx.Err()
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		c.history = append(c.history, openai.UserMessage(line))
		if err := c.answer(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The model failed this turn; the conversation goes on.
			fmt.Fprintf(out, "\n(%v)\n", err)
		}
	}
}

// readLines reads in a line at a time on a goroutine of its own, so that
// waiting for the user ends with ctx (Ctrl-C).
func readLines(ctx context.Context, in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(in)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			select {
			case lines <- s.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// readLine waits for the user's next line; false when the input ended or
// ctx did.
func (c *chat) readLine(ctx context.Context) (string, bool) {
	select {
	case line, ok := <-c.lines:
		return line, ok
	case <-ctx.Done():
		return "", false
	}
}

// answer asks the model until it answers in text, running the tools it
// asks for on the way.
func (c *chat) answer(ctx context.Context) error {
	for range maxRounds {
		msg, err := c.ask(ctx)
		if err != nil {
			return err
		}
		c.history = append(c.history, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			return nil
		}
		for _, tc := range msg.ToolCalls {
			result := c.callTool(ctx, tc.Function.Name, tc.Function.Arguments)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.history = append(c.history, openai.ToolMessage(result, tc.ID))
		}
	}
	return fmt.Errorf("the model asked for tools %d times in a row without answering; ask again or differently", maxRounds)
}

// ask streams one answer of the model to the terminal and returns it whole.
func (c *chat) ask(ctx context.Context) (openai.ChatCompletionMessage, error) {
	stream := c.model.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(c.o.Model),
		Messages: c.history,
		Tools:    c.tools,
	})
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	wrote := false
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, ch := range chunk.Choices {
			if ch.Index == 0 && ch.Delta.Content != "" {
				fmt.Fprint(c.out, ch.Delta.Content)
				wrote = true
			}
		}
	}
	if wrote {
		fmt.Fprintln(c.out)
	}
	if err := stream.Err(); err != nil {
		return openai.ChatCompletionMessage{}, c.modelError(err)
	}
	if len(acc.Choices) == 0 {
		return openai.ChatCompletionMessage{}, fmt.Errorf("the model at %s sent no answer", c.o.ModelURL)
	}
	return acc.Choices[0].Message, nil
}

// modelError says in plain words why the model did not answer.
func (c *chat) modelError(err error) error {
	var ae *openai.Error
	if !errors.As(err, &ae) {
		return fmt.Errorf("can't reach the model at %s (is it running? for Ollama: `ollama serve`): %w", c.o.ModelURL, err)
	}
	switch ae.StatusCode {
	case 400:
		return fmt.Errorf("the model at %s refused the request: %s (if it says the model does not support tools, give -model one that does, e.g. llama3.2 or qwen2.5)", c.o.ModelURL, ae.Message)
	case 401, 403:
		return fmt.Errorf("the model at %s refused the API key: set -api-key-env to the variable that holds a good one (%s)", c.o.ModelURL, ae.Message)
	case 404:
		return fmt.Errorf("the model %q is not served at %s: give -model one it serves (for Ollama: `ollama pull %s`) (%s)", c.o.Model, c.o.ModelURL, c.o.Model, ae.Message)
	case 429:
		return fmt.Errorf("the model at %s is rate limited; wait and ask again (%s)", c.o.ModelURL, ae.Message)
	}
	return fmt.Errorf("the model at %s failed (HTTP %d): %s", c.o.ModelURL, ae.StatusCode, ae.Message)
}

// callTool runs one tool call of the model over the websocket, streams
// what it prints, and returns what the model is told: the result, or the
// error in words.
func (c *chat) callTool(ctx context.Context, name, args string) string {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	fmt.Fprintf(c.out, "[tool %s %s]\n", name, args)
	if !json.Valid([]byte(args)) {
		fmt.Fprintln(c.out, "[the model's arguments are not JSON; the tool did not run]")
		return "error: the arguments are not valid JSON; call the tool again with a JSON object"
	}
	p := &printer{w: c.out, atStart: true}
	result, err := c.conn.CallWith(ctx, name, json.RawMessage(args), client.CallOptions{Session: c.session}, func(e client.Event) {
		switch e.Type {
		case client.TypeStdout, client.TypeStderr:
			p.print(e.Node, e.Data)
		case client.TypeApprovalRequired:
			p.end()
			c.approve(ctx, e)
		}
	})
	p.end()
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		fmt.Fprintf(c.out, "[%s failed: %s]\n", name, ce.Message)
		return fmt.Sprintf("error %s: %s", ce.Code, ce.Message)
	case err != nil:
		fmt.Fprintf(c.out, "[%s did not finish: %v]\n", name, err)
		return fmt.Sprintf("error: the tool did not finish: %v", err)
	}
	fmt.Fprintf(c.out, "[%s returned %s]\n", name, short(string(result)))
	return string(result)
}

// printer writes a run's output, starting each line of a graph's node
// with the node's name.
type printer struct {
	w       io.Writer
	node    string
	atStart bool
}

func (p *printer) print(node, data string) {
	if node != p.node && !p.atStart {
		p.end()
	}
	p.node = node
	for data != "" {
		line, rest, nl := strings.Cut(data, "\n")
		if p.atStart && node != "" {
			fmt.Fprintf(p.w, "[%s] ", node)
		}
		fmt.Fprint(p.w, line)
		if nl {
			fmt.Fprintln(p.w)
		}
		p.atStart, data = nl, rest
	}
}

// end ends a line left open.
func (p *printer) end() {
	if !p.atStart {
		fmt.Fprintln(p.w)
		p.atStart = true
	}
}

// terminal writes to the terminal with control characters shown, not
// obeyed: what a tool prints or a model writes (a web page's text, say)
// can't move the cursor, rewrite the approval question above it, or send
// the terminal escape sequences.
type terminal struct{ w io.Writer }

func (t terminal) Write(p []byte) (int, error) {
	var b strings.Builder
	for _, r := range string(p) {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
	}
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// short shortens a result for the terminal; the model gets it whole.
func short(s string) string {
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}

// newID makes a conversation id.
func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "chat-" + hex.EncodeToString(b)
}
