// Package sdk is what a tool-kind plugin imports: the Kind interface a kind
// implements (and the optional MetricsSource, Doctor, Closer and
// SessionKeeper), the event
// types it emits, its errors (package errcode's), and Serve to run it as a
// plugin process. sdktest tests a kind without building a binary.
//
// A kind is a separate process speaking plugin protocol v1 (sdk/proto/v1)
// over hashicorp/go-plugin's gRPC transport. The Go types here are the public
// surface (those that cross the protocol are aliases of sdk/internal/types,
// where the one converter, sdk/internal/convert, reads them); the generated
// protocol code is internal (sdk/internal/pluginv1), and the host's half of
// the protocol is package sdk/hostside.
package sdk

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolhost/toolhost/sdk/errcode"
)

// Kind is one tool kind (http, python, …). The host calls, in order:
// Describe once after the plugin starts, Configure with the kind's table of
// the host config, then Check for each tool of this kind it loads, and
// Invoke for every call. Check and Invoke may run concurrently.
type Kind interface {
	// Describe names the kind and gives the JSON Schema of its run table.
	Describe(ctx context.Context) (Info, error)
	// Configure receives the kind's config table (a JSON object, "{}" when
	// the config has none). Return FieldErrors for a bad value.
	Configure(ctx context.Context, config json.RawMessage) error
	// Check validates a tool of this kind and returns its run table
	// normalised (defaults filled in, "type" kept). Return FieldErrors with
	// paths such as "run.url" for what is wrong.
	Check(ctx context.Context, tool Tool) (json.RawMessage, error)
	// Invoke runs a tool once. What it prints goes out through emit as it
	// happens; the returned JSON is the result, and the parts given to
	// emit.Content go with it (images, audio, resources: see Content).
	// Return an *Error for a failure the user should read. ctx is
	// cancelled when the caller cancels the run.
	Invoke(ctx context.Context, call Call, emit Emit) (json.RawMessage, error)
}

// CatalogChecker is a Kind whose Check needs the other tools the host
// serves (a graph checks the tools its nodes call): the host then calls
// CheckWithCatalog instead of Check, with every tool loaded with this one
// (itself included; each with name, effect, params and source, and Run
// only {"type": kind}). Check is still called by hosts that send no
// catalog.
type CatalogChecker interface {
	CheckWithCatalog(ctx context.Context, tool Tool, catalog []Tool) (json.RawMessage, error)
}

// CallerLogLevels are the levels of a log line for the caller, least
// severe first: syslog's (RFC 5424), as MCP names them.
var CallerLogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// Content types: what a part of a result's Content is.
const (
	ContentText     = "text"
	ContentImage    = "image"
	ContentAudio    = "audio"
	ContentResource = "resource"
)

// MaxContentBytes bounds the content of one result: the bytes of its
// parts' text and data together. The SDK fails a run whose content is
// larger (errcode.TooLarge), and the host refuses such a result from any
// plugin.
const MaxContentBytes = 16 << 20

// CheckContent says what is wrong with a result's content, naming the
// part (from 1): an unknown type, a part missing what its type needs or
// carrying what it can't, or more than MaxContentBytes in all. The error
// is an *Error with code errcode.TooLarge or errcode.Failed.
func CheckContent(parts []Content) error {
	total := 0
	for i, c := range parts {
		n := i + 1
		total += len(c.Text) + len(c.Data)
		var wrong string
		switch c.Type {
		case ContentText:
			if len(c.Data) > 0 || c.MIMEType != "" || c.URI != "" {
				wrong = "a text part has text only"
			}
		case ContentImage, ContentAudio:
			switch {
			case len(c.Data) == 0:
				wrong = "an " + c.Type + " part needs its data (bytes)"
			case c.MIMEType == "":
				wrong = "an " + c.Type + " part needs its MIME type (\"" + c.Type + "/png\", say)"
			case c.Text != "" || c.URI != "":
				wrong = "an " + c.Type + " part has data and a MIME type only"
			}
		case ContentResource:
			switch {
			case c.URI == "":
				wrong = "a resource part needs its URI"
			case c.Text != "" && len(c.Data) > 0:
				wrong = "a resource part has text or data (a blob), not both"
			}
		default:
			wrong = fmt.Sprintf("its type is %q; a part is text, image, audio or resource", c.Type)
		}
		if wrong != "" {
			return Errorf(errcode.Failed, "part %d of the result's content is wrong: %s", n, wrong)
		}
	}
	if total > MaxContentBytes {
		return Errorf(errcode.TooLarge, "the result's content is %d bytes, over the %d MiB a result's content may be", total, MaxContentBytes>>20)
	}
	return nil
}

// Emit sends one event of a run to the host. It is safe to call from
// several goroutines; events sent after Invoke returned are dropped.
type Emit func(Event)

// Stdout emits a chunk of standard output.
func (e Emit) Stdout(p []byte) { e(Event{Stdout: append([]byte(nil), p...)}) }

// Stderr emits a chunk of standard error.
func (e Emit) Stderr(p []byte) { e(Event{Stderr: append([]byte(nil), p...)}) }

// Progress emits a progress report.
func (e Emit) Progress(fraction float64, message string) {
	e(Event{Progress: &Progress{Fraction: fraction, Message: message}})
}

// Log emits a line for the host's log.
func (e Emit) Log(level, message string) { e(Event{Log: &Log{Level: level, Message: message}}) }

// LogToCaller emits a log line for the run's caller, level one of
// CallerLogLevels.
func (e Emit) LogToCaller(level, message string) {
	e(Event{Log: &Log{Level: level, Message: message, ToCaller: true}})
}

// Content adds parts to the run's result: they go with the result, after
// any parts added before, and are dropped if the run fails.
func (e Emit) Content(parts ...Content) {
	if len(parts) > 0 {
		e(Event{Content: append([]Content(nil), parts...)})
	}
}

// Display shows a part as the run goes (a figure, an image), in order
// with its stdout and stderr, as a notebook shows one: the host streams it
// to the run's watchers as a display event. The part goes in the result's
// content too, after the parts added before it, so a caller that reads
// only the result (or a host too old to know the event) has it; like any
// content, it is dropped from the result if the run fails. A part that
// sdk.CheckContent refuses isn't streamed, and fails the run.
func (e Emit) Display(part Content) {
	e(Event{Display: &part})
}

// StdoutWriter is an io.Writer whose writes are emitted as stdout.
func (e Emit) StdoutWriter() *EmitWriter { return &EmitWriter{emit: e} }

// StderrWriter is an io.Writer whose writes are emitted as stderr.
func (e Emit) StderrWriter() *EmitWriter { return &EmitWriter{emit: e, stderr: true} }

// EmitWriter turns writes into stdout or stderr events.
type EmitWriter struct {
	emit   Emit
	stderr bool
}

func (w *EmitWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if w.stderr {
		w.emit.Stderr(p)
	} else {
		w.emit.Stdout(p)
	}
	return len(p), nil
}
