package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// A chat backend lists the tools for its model, runs the one the model
// picks, shows what it prints as it prints it, and hands the result (or
// the error) back to the model.
func Example() {
	addr, stop := exampleHost() // the host's address, e.g. "http://127.0.0.1:8080"
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := client.Dial(ctx, addr, client.Options{Token: "", Client: "my-chat-app/2.1"})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	tools, err := conn.ListTools(ctx) // function specs, in the shape models take
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools {
		fmt.Printf("tool %s: %s\n", t.Function.Name, t.Function.Description)
	}

	result, err := conn.Call(ctx, "greet", map[string]any{"name": "Ada"}, func(e client.Event) {
		switch e.Type {
		case client.TypeStdout:
			fmt.Printf("printed: %s", e.Data)
		case client.TypeProgress:
			fmt.Printf("progress: %.0f%%\n", *e.Fraction*100)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("result: %s\n", result)

	// A failed run, or a call refused, is an *client.Error with a code.
	_, err = conn.Call(ctx, "greet", map[string]any{}, nil)
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Printf("error %s: %s\n", ce.Code, ce.Message)
	}
	// Output:
	// tool greet: Greet someone.
	// printed: hello, Ada
	// progress: 50%
	// printed: goodbye, Ada
	// result: {"greeted":"Ada"}
	// error bad_args: argument "name" is required
}

// greetKind is the example's kind, in process.
type greetKind struct{}

func (greetKind) Invoke(_ context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	var a struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(inv.Args, &a)
	onEvent(sdk.Event{Stdout: fmt.Appendf(nil, "hello, %s\n", a.Name)})
	onEvent(sdk.Event{Progress: &sdk.Progress{Fraction: 0.5}})
	onEvent(sdk.Event{Stdout: fmt.Appendf(nil, "goodbye, %s\n", a.Name)})
	return json.Marshal(map[string]string{"greeted": a.Name})
}

// exampleHost serves the host's real API with one tool, greet.
func exampleHost() (addr string, stop func()) {
	reg := tools.NewRegistry()
	reg.Replace([]*tools.Tool{{Tool: config.Tool{Name: "greet", Description: "Greet someone.", Effect: "read",
		Params: []config.Param{{Name: "name", Type: "text", Required: true}}}, Kind: "greet", Run: json.RawMessage(`{"type":"greet"}`)}})
	d := runs.NewDispatcher(reg, func(string) (runs.Invoker, bool) { return greetKind{}, true }, nil, time.Hour)
	srv := httptest.NewServer(api.New(api.Options{Registry: reg, Dispatcher: d}))
	return srv.URL, func() { srv.Close(); d.CancelAll("the test is over"); d.Close() }
}
