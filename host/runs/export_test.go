package runs

import (
	"testing"
	"time"
)

// The helpers of this package's tests, for its external tests
// (shared_approvals_test.go).

// ChangeDispatcher is changeDispatcher: a dispatcher whose kind has the
// change tool "send"; Sent counts its runs.
func ChangeDispatcher(t *testing.T) (*Dispatcher, func() int32) {
	d, k := changeDispatcher(t)
	return d, k.sent.Load
}

// WaitAsked and End are waitAsked and end.
var (
	WaitAsked = waitAsked
	End       = end
)

// FakeClock is fakeClock.
type FakeClock = fakeClock

// NewFakeClock is a fakeClock at now.
func NewFakeClock(now time.Time) *FakeClock {
	return &fakeClock{now: now, asked: make(chan struct{}, 1)}
}

// Advance moves the clock on by d.
func (c *fakeClock) Advance(d time.Duration) { c.advance(d) }

// AcctDispatcher is acctDispatcher, with no budgets, on ledger: its tool
// "hold" runs until Release is called.
func AcctDispatcher(t *testing.T, ledger Ledger) (d *Dispatcher, release func()) {
	d, k, _ := acctDispatcher(t, ledger, Budget{})
	return d, func() { close(k.gate) }
}
