package sessionstest

import "github.com/toolhost/toolhost/sdk"

// Tools are the session tools a stand-in kind declares in Describe, as the
// python kind declares its own: run_python(code), run_bash(command),
// sandbox_files() and sandbox_file(path), each running what its Session
// names in the caller's session.
func Tools() []sdk.SessionTool {
	text := func(name string) []sdk.Param {
		return []sdk.Param{{Name: name, Type: "text", Required: true, Description: "The " + name + "."}}
	}
	return []sdk.SessionTool{
		{Name: "run_python", Effect: "change", Session: "python", Description: "Run Python code in the conversation's sandbox.", Params: text("code")},
		{Name: "run_bash", Effect: "change", Session: "bash", Description: "Run a bash command in the conversation's sandbox.", Params: text("command")},
		{Name: "sandbox_files", Effect: "read", Session: "files", Description: "List the files in the conversation's sandbox."},
		{Name: "sandbox_file", Effect: "read", Session: "file", Description: "Read one file of the conversation's sandbox.", Params: text("path")},
	}
}
