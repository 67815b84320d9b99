package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sdk"
)

// TestParseRunAcceptsAndRefuses pins down, key by key, which values of a python tool's run table
// parseRun accepts (and what it reads them as) and which it refuses with which FieldErrors. Since
// it reads the table with sdk.RunTable, a run that is not a table, code = null and network = null
// are refused in the SDK's words, and 5.0, 1e1 and "5.0" are whole numbers (docs/python.md).
func TestParseRunAcceptsAndRefuses(t *testing.T) {
	t.Parallel()
	const (
		typeMsg    = `run.type: must be "python"`
		codeText   = "run.code: must be text: Python defining run(**args)"
		codeNeeded = "run.code: is required: Python defining run(**args)"
		secMsg     = "run.seconds: is a whole number from 1 to 60"
		memMsg     = "run.memory_mb: is a whole number of MiB from 16 to 1024 ([python] max_memory_mb)"
		netMsg     = "run.network: is true or false"
		sessMsg    = `run.session: must be "python", "bash", "files" or "file"`
		unknown    = ": is not a key of a python tool's run table (type, code, seconds, memory_mb, network)"
		notSession = ": is not a key of a session tool's run table (type, session): its code comes with each call and its limits are [sessions]'s"
	)
	code := func(extra string) string { return `{"type":"python","code":"c"` + extra + `}` }
	def := runTable{Type: "python", Code: "c", Seconds: 20, MemoryMB: 512}
	with := func(f func(*runTable)) runTable { rt := def; f(&rt); return rt }
	long := strings.Repeat("x", maxCodeBytes+1)
	cases := []struct {
		run  string
		want runTable // when err is ""
		err  string
	}{
		// The run table itself.
		{`{}`, runTable{}, codeNeeded},
		{`null`, runTable{}, "run: must be a table"},
		{`[]`, runTable{}, "run: must be a table"},
		{`"x"`, runTable{}, "run: must be a table"},
		{`5`, runTable{}, "run: must be a table"},
		// type
		{code(""), def, ""},
		{`{"code":"c"}`, def, ""},
		{`{"type":"http","code":"c"}`, runTable{}, typeMsg},
		{`{"type":null,"code":"c"}`, runTable{}, typeMsg},
		{`{"type":5,"code":"c"}`, runTable{}, typeMsg},
		// code
		{`{"type":"python"}`, runTable{}, codeNeeded},
		{`{"type":"python","code":""}`, runTable{}, codeNeeded},
		{`{"type":"python","code":"  \n"}`, runTable{}, codeNeeded},
		{`{"type":"python","code":null}`, runTable{}, codeText},
		{`{"type":"python","code":5}`, runTable{}, codeText},
		{`{"type":"python","code":["c"]}`, runTable{}, codeText},
		{`{"type":"python","code":"` + long + `"}`, runTable{}, "run.code: is longer than 1048576 bytes"},
		// seconds
		{code(`,"seconds":1`), with(func(r *runTable) { r.Seconds = 1 }), ""},
		{code(`,"seconds":60`), with(func(r *runTable) { r.Seconds = 60 }), ""},
		{code(`,"seconds":"5"`), with(func(r *runTable) { r.Seconds = 5 }), ""},
		{code(`,"seconds":5.0`), with(func(r *runTable) { r.Seconds = 5 }), ""},
		{code(`,"seconds":"5.0"`), with(func(r *runTable) { r.Seconds = 5 }), ""},
		{code(`,"seconds":1e1`), with(func(r *runTable) { r.Seconds = 10 }), ""},
		{code(`,"seconds":0`), runTable{}, secMsg},
		{code(`,"seconds":61`), runTable{}, secMsg},
		{code(`,"seconds":-1`), runTable{}, secMsg},
		{code(`,"seconds":5.5`), runTable{}, secMsg},
		{code(`,"seconds":" 5"`), runTable{}, secMsg},
		{code(`,"seconds":"five"`), runTable{}, secMsg},
		{code(`,"seconds":null`), runTable{}, secMsg},
		{code(`,"seconds":true`), runTable{}, secMsg},
		{code(`,"seconds":4294967301`), runTable{}, secMsg},
		// memory_mb
		{code(`,"memory_mb":16`), with(func(r *runTable) { r.MemoryMB = 16 }), ""},
		{code(`,"memory_mb":1024`), with(func(r *runTable) { r.MemoryMB = 1024 }), ""},
		{code(`,"memory_mb":"256"`), with(func(r *runTable) { r.MemoryMB = 256 }), ""},
		{code(`,"memory_mb":256.0`), with(func(r *runTable) { r.MemoryMB = 256 }), ""},
		{code(`,"memory_mb":15`), runTable{}, memMsg},
		{code(`,"memory_mb":1025`), runTable{}, memMsg},
		{code(`,"memory_mb":null`), runTable{}, memMsg},
		// network
		{code(`,"network":true`), with(func(r *runTable) { r.Network = true }), ""},
		{code(`,"network":false`), def, ""},
		{code(`,"network":null`), runTable{}, netMsg},
		{code(`,"network":"true"`), runTable{}, netMsg},
		{code(`,"network":1`), runTable{}, netMsg},
		// unknown keys, and every problem at once in the order of their paths
		{code(`,"netwrk":true`), runTable{}, "run.netwrk" + unknown},
		{`{"type":"x","code":"c","seconds":61,"memory_mb":4096,"netwrk":true}`, runTable{},
			memMsg + "\nrun.netwrk" + unknown + "\n" + secMsg + "\n" + typeMsg},
		// session
		{`{"type":"python","session":"python"}`, runTable{Type: "python", Session: "python"}, ""},
		{`{"type":"python","session":"bash"}`, runTable{Type: "python", Session: "bash"}, ""},
		{`{"type":"python","session":"files"}`, runTable{Type: "python", Session: "files"}, ""},
		{`{"session":"file"}`, runTable{Type: "python", Session: "file"}, ""},
		{`{"type":"python","session":"ruby"}`, runTable{}, sessMsg},
		{`{"type":"python","session":""}`, runTable{}, sessMsg},
		{`{"type":"python","session":null}`, runTable{}, sessMsg},
		{`{"type":"python","session":5}`, runTable{}, sessMsg},
		{`{"type":"http","session":"python"}`, runTable{}, typeMsg},
		{`{"type":"python","session":"python","code":"c","seconds":5}`, runTable{}, "run.code" + notSession + "\nrun.seconds" + notSession},
		{`{"type":"python","session":"python","code":5,"seconds":"x","memory_mb":null,"network":null}`, runTable{},
			"run.code" + notSession + "\nrun.memory_mb" + notSession + "\nrun.network" + notSession + "\nrun.seconds" + notSession},
		{`{"type":"python","session":"python","netwrk":1}`, runTable{}, "run.netwrk" + unknown},
		{`{"type":"python","session":"ruby","code":"c"}`, runTable{}, "run.code" + notSession + "\n" + sessMsg},
	}
	for _, tc := range cases {
		name := tc.run
		if len(name) > 100 {
			name = name[:100] + "…"
		}
		got, err := parseRun([]byte(tc.run), 1024)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("parseRun(%s) = %+v, %v; want %+v", name, got, err, tc.want)
			}
			continue
		}
		var fe sdk.FieldErrors
		if !errors.As(err, &fe) || fmt.Sprint(err) != tc.err {
			t.Errorf("parseRun(%s) = %v; want the FieldErrors %q", name, err, tc.err)
		}
	}
}
