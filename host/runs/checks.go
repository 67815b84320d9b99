package runs

import (
	"fmt"
	"sync"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
)

// This file meters checks: POST /api/v1/tools/check hands a tool
// definition to its kind's plugin, which may start a sandbox to answer
// (the python kind does). A check is metered like a run: while it goes it
// holds a place among its principal's max_running, it counts as one run
// against runs_per_hour, and a check of a sandboxed kind counts its
// seconds against sandbox_cpu_seconds_per_hour. Past a cap it is refused
// with the cap's error code (too_many_runs, budget), as a call is.

// StartCheck meters a check of def by principal, or says why it may not
// start: wire.CodeForbidden when the principal may no longer run tools,
// wire.CodeTooManyRuns when its runs and checks hold all its places,
// wire.CodeBudget when a budget is used up. end, called once when the
// check is over, gives the place back and records its seconds.
func (d *Dispatcher) StartCheck(principal string, def config.Tool) (end func(), err error) {
	kind, _ := def.Run["type"].(string)
	tool := &tools.Tool{Tool: def, Kind: kind}
	id := newCheckID()
	// The place first: a flood of checks past max_running is refused
	// without a write to the ledger.
	if err := d.holdPlace(principal); err != nil {
		return nil, err
	}
	sandboxed, err := d.chargeFor(id, Request{Tool: def.Name, Principal: principal}, tool, "the check of "+def.Name)
	if err != nil {
		d.freePlace(principal)
		return nil, err
	}
	began := d.clock()()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.freePlace(principal)
			if sandboxed {
				d.endUsage(id, d.clock()().Sub(began).Seconds())
			}
		})
	}, nil
}

// holdPlace takes one of principal's places for work that is not a run,
// or refuses at once when they are all held.
func (d *Dispatcher) holdPlace(principal string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := Caller{}
	if d.callers != nil {
		c = d.callers(principal)
	}
	if c.Refused != "" {
		return &sdk.Error{Code: wire.CodeForbidden, Message: c.Refused}
	}
	if c.MaxRunning > 0 && d.places[principal] >= c.MaxRunning {
		return &sdk.Error{Code: wire.CodeTooManyRuns, Message: fmt.Sprintf(
			"%s already has %d runs and checks going (%s); wait for one to finish or cancel one", c.Who, d.places[principal], c.Setting)}
	}
	d.places[principal]++
	return nil
}

// freePlace gives back a place holdPlace took.
func (d *Dispatcher) freePlace(principal string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.places[principal]--; d.places[principal] <= 0 {
		delete(d.places, principal)
	}
	d.freedLocked()
}

// newCheckID names a check in the ledger of budgets, apart from runs.
func newCheckID() string { return "k" + newRunID()[1:] }
