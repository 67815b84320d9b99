package api

import "sync"

// outFrame is a frame waiting for the writer.
type outFrame struct {
	b     []byte
	final bool   // close the connection once it is written
	why   string // the closing frame's error code, with final: the close frame's reason
}

// outbox is the frames waiting for one connection's writer, with their
// size bounded: a run's events stop at the limit (the forwarder is told,
// and queues a behind frame instead); other frames go on until twice the
// limit, past which the client reads nothing and is cut off.
type outbox struct {
	mu     sync.Mutex
	q      []outFrame
	bytes  int
	limit  int
	closed bool
	wake   chan struct{}
}

func newOutbox(limit int) *outbox {
	return &outbox{limit: limit, wake: make(chan struct{}, 1)}
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// pushEvent queues a run's event unless that would pass the limit (an
// empty queue takes any one frame, so a big event still goes). When it
// would, it queues behind instead, and returns false: the forwarder stops.
func (o *outbox) pushEvent(b []byte, behind func() []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	if o.bytes > 0 && o.bytes+len(b) > o.limit {
		bb := behind()
		o.q = append(o.q, outFrame{b: bb})
		o.bytes += len(bb)
		o.signal()
		return false
	}
	o.q = append(o.q, outFrame{b: b})
	o.bytes += len(b)
	o.signal()
	return true
}

// push queues a reply; it returns false if the client has let more than
// twice the limit pile up, and the connection must end. The final frame
// (closing) is always queued.
func (o *outbox) push(f outFrame) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return true
	}
	if o.bytes > 2*o.limit && !f.final {
		return false
	}
	o.q = append(o.q, f)
	o.bytes += len(f.b)
	if f.final {
		o.closed = true
	}
	o.signal()
	return true
}

// take returns every frame waiting.
func (o *outbox) take() []outFrame {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.q
	o.q = nil
	return q
}

// written says n bytes of frames taken went out.
func (o *outbox) written(n int) {
	o.mu.Lock()
	o.bytes -= n
	o.mu.Unlock()
}
