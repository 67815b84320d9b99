package runs

import "github.com/toolhost/toolhost/host/tools"

// Gate is the host's own check of a call, after its arguments are checked
// and before it is admitted: an error (an *sdk.Error the caller reads)
// refuses the call, which then never runs. The host's conversation
// sandboxes use it to refuse a session tool called without a session, or
// by a role that may not use them, whoever calls: a client or a tool.
type Gate func(req Request, tool *tools.Tool) error

// SetGate sets the gate of the calls from now on; nil lets every call
// through.
func (d *Dispatcher) SetGate(g Gate) {
	d.mu.Lock()
	d.gateFn = g
	d.mu.Unlock()
}

func (d *Dispatcher) gate(req Request, tool *tools.Tool) error {
	d.mu.Lock()
	g := d.gateFn
	d.mu.Unlock()
	if g == nil {
		return nil
	}
	return g(req, tool)
}
