// Package agentwire is what integration/vm_test.go and the agent in its VMs
// (integration/vm/agent) say to each other over the VM's virtio serial port: JSON, one object a
// line. The test sends Requests; the agent answers each with one Answer of the same ID, in the
// order the commands end, and starts by sending Ready.
package agentwire

// PortName is the name of the virtio serial port (QEMU's virtserialport name=): the agent opens
// /dev/virtio-ports/PortName.
const PortName = "toolhost.agent"

// ReadyOutput is the Output of the agent's hello, an Answer of ID 0 it sends when it starts.
const ReadyOutput = "ready"

// Request runs a command, or cancels one that runs.
type Request struct {
	// ID names the command in its Answer and in a cancel; the test's IDs start at 1.
	ID int64 `json:"id"`
	// Args is the command and its arguments; Args[0] is looked up in PATH.
	Args []string `json:"args,omitempty"`
	// Env is added to the agent's clean environment (PATH=/usr/sbin:/usr/bin:/sbin:/bin,
	// LANG=C.UTF-8, SYSTEMD_PAGER=, SYSTEMD_COLORS=0).
	Env []string `json:"env,omitempty"`
	// Stdin is the command's standard input; it ends there.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutMS bounds the command: past it, its whole process group is killed. 0 is the agent's
	// default, an hour.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Cwd is the command's working folder; "" is /.
	Cwd string `json:"cwd,omitempty"`
	// Cancel kills the process group of the running command ID (its Answer says so) instead of
	// starting one.
	Cancel bool `json:"cancel,omitempty"`
}

// Answer is how a command ended.
type Answer struct {
	ID int64 `json:"id"`
	// Output is what the command printed, stdout and stderr interleaved as it wrote them (bytes
	// that aren't UTF-8 arrive as U+FFFD).
	Output string `json:"output"`
	// Exit is the exit status, -1 when a signal ended it or it never started.
	Exit int `json:"exit"`
	// Error says why a command did not end by itself: it could not start, it was killed past its
	// bound or cancelled, a signal ended it. "" when it exited.
	Error string `json:"error,omitempty"`
}
