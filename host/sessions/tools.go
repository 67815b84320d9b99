package sessions

import (
	"github.com/toolhost/toolhost/config"
)

// ToolSource is where the built-in session tools say they are defined.
const ToolSource = "built in ([sessions] enabled)"

// Tools are the built-in session tools, as tool definitions for kind (the
// kind that keeps the sessions) to check and serve: each runs in its
// caller's session, its run table {"type": kind, "session": what it does}.
func Tools(kind string) []config.Tool {
	tool := func(name, effect, lang, desc string, params ...config.Param) config.Tool {
		return config.Tool{
			Name: name, Description: desc, Effect: effect, Params: params,
			Run:    map[string]any{"type": kind, "session": lang},
			Source: ToolSource,
		}
	}
	text := func(name, desc string) config.Param {
		return config.Param{Name: name, Type: "text", Required: true, Description: desc}
	}
	return []config.Tool{
		tool("run_python", "change", "python",
			"Run Python 3 code in this conversation's sandbox. The working folder is /work; files written there stay "+
				"for the next runs of the conversation, and files the user uploaded are there too. Print what you want to see. "+
				"Returns exit_code, stdout (its start) and stderr (its end), and why the run was stopped if it was (timeout, memory, pids, disk).",
			text("code", "The Python code to run, as a whole program.")),
		tool("run_bash", "change", "bash",
			"Run a bash command in this conversation's sandbox, in /work, whose files stay for the next runs of the conversation. "+
				"Returns exit_code, stdout (its start) and stderr (its end), and why the run was stopped if it was.",
			text("command", "The command line, run by bash -c.")),
		tool("sandbox_files", "read", "files",
			"List the files in this conversation's sandbox (/work): each file's path, size and time of change."),
		tool("sandbox_file", "read", "file",
			"Read one file of this conversation's sandbox: text as it is, any other file as base64.",
			text("path", "The file's path relative to /work, e.g. \"results/table.csv\".")),
	}
}

// ToolNames are the names of Tools.
var ToolNames = []string{"run_python", "run_bash", "sandbox_files", "sandbox_file"}
