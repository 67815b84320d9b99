// Command toolhost-plugin-graph is the graph tool kind of toolhost: a tool
// of this kind is drawn as a graph of nodes that name their inputs by node
// id, from arg nodes (the tool's parameters) through const, template,
// pick, join, choose, ask_model and call_tool nodes to one return node,
// whose value is the tool's result. The format is in README.md beside this
// file.
//
// Check finds, each naming its node at a path such as run.nodes[3].tool:
// duplicate or malformed ids, references (and {{id}} placeholders) that
// name no node, cycles, a missing or second return node, nodes the return
// doesn't depend on, args that name no parameter, required parameters no
// arg reads, unknown node types and fields, types that can't fit, and,
// with the host's catalog (sdk.CatalogChecker), call_tool targets that
// don't exist, required parameters not wired and arguments they don't take.
//
// A run works out the return node's value, and only what it needs: each
// node at most once, independent inputs at once, only the branch a choose
// chose. call_tool and ask_model go through the host (sdk.Host), with the
// rights of the run; what they print, and the model's answer as it is
// written, is this run's stdout and stderr marked with the node's id. Each
// call_tool and ask_model node done is reported as progress.
//
// A run that fails ends with one of these error codes:
//
//	bad_tool        the run table does not pass Check on this host
//	pick_missing    a pick's path is not in its value
//	not_json        an ask_model of format json got an answer that is not JSON
//	too_many_calls  the run made more nested calls than [graph]
//	                max_nested_calls, or the host's own cap on the calls
//	                under one call was reached
//	too_deep        tools called tools deeper than the host allows (a graph
//	                that calls itself); said once, naming this graph's node
//	cancelled       the caller cancelled the run
//
// or, when a nested call failed, with that call's own code (timeout,
// http_status, bad_args, model_unreachable …) and its message after the
// node's: `node "fetch": calling get_json failed: the server answered 404`.
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(&kind{})
}
