// Command toolhost-plugin-prompt is the prompt tool kind of toolhost: a tool
// of this kind is one question to the host's model ([model] in the host
// config), written as a template with {{param}} placeholders:
//
//	[run]
//	type = "prompt"
//	system = "You write one-sentence summaries in a {{tone}} tone."  # optional
//	prompt = "Summarise:\n\n{{text}}"
//	format = "text"      # or "json"
//	max_tokens = 0       # 0: the host's [model] max_tokens
//
// Check refuses a placeholder that names no parameter of the tool, and a
// parameter (required or optional) that neither template uses: its value
// would never reach the model. "{{" always starts a placeholder; there is
// no way to write a literal "{{" in a template (pass it in a parameter).
//
// Invoke fills the placeholders once, from the arguments: a text value goes
// in as it is, any other value as its JSON, an optional parameter not given
// as empty text. A value is never read as a template itself, so an argument
// holding "{{other}}" reaches the model as those characters. The model is
// asked through the host (sdk.Host.AskModel), never directly: the host
// holds the endpoint, the key and the limits. The answer streams to the
// caller as the run's stdout as it is written.
//
// The result is the answer as a JSON string, or with format = "json" the
// answer parsed as JSON (an answer wrapped in a ``` or ```json fence is
// taken without the fence).
//
// A run that fails ends with the host's model code as the host gave it
// (model_unreachable, model_unauthorized, model_not_found,
// model_rate_limited, model_failed, model_cut_off, timeout, unsupported
// when no model is configured; see sdk/errcode), or one of these:
//
//	not_json   format = "json" and the answer is not JSON; the message
//	           quotes its start
//	bad_tool   the run table does not pass Check
//	cancelled  the caller cancelled the run
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(&kind{})
}
