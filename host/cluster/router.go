package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
)

// Store is what the router reads of the shared store.
type Store interface {
	Place(ctx context.Context, principal, session, hostID string) (string, error)
	Holder(ctx context.Context, principal, session string) (string, bool, error)
	Hosts(ctx context.Context) ([]sessions.Host, error)
}

var _ Store = (*sessions.Store)(nil)

// hostsFresh is how long the router reuses the hosts it read from the
// store: a burst of calls reads them once.
const hostsFresh = time.Second

// Router places conversations on hosts and says where each call runs: the
// dispatcher's runs.Router for a host sharing its store with others.
type Router struct {
	self   string
	store  Store
	client *Client // nil: this host forwards nothing

	mu    sync.Mutex
	hosts []sessions.Host
	read  time.Time
}

var _ runs.Router = (*Router)(nil)

// NewRouter routes for the host self on store; client forwards, and nil
// makes a conversation another host holds answer session_unavailable.
func NewRouter(self string, store Store, client *Client) *Router {
	return &Router{self: self, store: store, client: client}
}

// Route places req's conversation on this host unless another host holds
// it, and returns that host when it does.
func (r *Router) Route(ctx context.Context, req runs.Request) (runs.Upstream, error) {
	p, err := r.place(ctx, req)
	if p == nil || err != nil {
		return nil, err // no typed nil in the interface
	}
	return p, nil
}

func (r *Router) place(ctx context.Context, req runs.Request) (*Peer, error) {
	// Read first: a conversation is placed once and called often, and a
	// read writes nothing.
	holder, ok, err := r.store.Holder(ctx, req.Principal, req.Session)
	if err == nil && !ok {
		holder, err = r.store.Place(ctx, req.Principal, req.Session, r.self)
	}
	if err != nil {
		return nil, err
	}
	if holder == r.self {
		return nil, nil
	}
	return r.peer(ctx, req.Session, holder)
}

// peer is the host holder, which holds the conversation session, or why
// it can't be reached.
func (r *Router) peer(ctx context.Context, session, holder string) (*Peer, error) {
	h, err := r.host(ctx, holder)
	if err != nil {
		return nil, err
	}
	switch {
	case h.ID == "" || !h.Live:
		return nil, &wire.Error{Code: wire.CodeSessionUnavailable, Message: fmt.Sprintf(
			"the conversation %q is held by the host %q, which is not running now; its files come back with that host: try again once it is back",
			session, holder)}
	case r.client == nil:
		return nil, &wire.Error{Code: wire.CodeSessionUnavailable, Message: fmt.Sprintf(
			"the conversation %q is held by the host %q (%s), and this host has no [cluster] secret to forward calls to it: "+
				"set the same secret_file (or secret_env) on every host, or call that host", session, holder, h.Address)}
	}
	return r.client.To(h.ID, h.Address), nil
}

// Where returns the host that holds the principal's conversation when
// another one does, and nil when this host does or none yet (it is
// placed by its first call, not by a look at it).
func (r *Router) Where(ctx context.Context, principal, session string) (*Peer, error) {
	holder, ok, err := r.store.Holder(ctx, principal, session)
	if err != nil || !ok || holder == r.self {
		return nil, err
	}
	return r.peer(ctx, session, holder)
}

// Find asks each other live host for the run id, and returns the first
// that has it, following it from seq from on.
func (r *Router) Find(ctx context.Context, id string, from uint64) (runs.Upstream, runs.RunInfo, runs.Stream, error) {
	if r.client == nil {
		return nil, runs.RunInfo{}, nil, nil
	}
	hosts, err := r.liveHosts(ctx)
	if err != nil {
		return nil, runs.RunInfo{}, nil, err
	}
	var errs []error
	for _, h := range hosts {
		if h.ID == r.self || !h.Live {
			continue
		}
		p := r.client.To(h.ID, h.Address)
		info, st, err := p.Follow(ctx, id, from)
		var we *wire.Error
		switch {
		case err == nil:
			return p, info, st, nil
		case errors.As(err, &we) && we.Code == wire.CodeUnknownRun:
		default:
			errs = append(errs, fmt.Errorf("host %s: %w", p.Name(), err))
		}
	}
	return nil, runs.RunInfo{}, nil, errors.Join(errs...)
}

// host is the host id as the store's leases say, or a zero Host when it
// has none.
func (r *Router) host(ctx context.Context, id string) (sessions.Host, error) {
	for fresh := range 2 {
		hosts, err := r.liveHosts(ctx)
		if err != nil {
			return sessions.Host{}, err
		}
		for _, h := range hosts {
			if h.ID == id && (h.Live || fresh == 1) {
				return h, nil
			}
		}
		// Not live in what was read a moment ago: it may have just
		// (re)started. Read again once.
		r.mu.Lock()
		r.read = time.Time{}
		r.mu.Unlock()
	}
	return sessions.Host{}, nil
}

// liveHosts are the hosts of the store's leases, read at most every
// hostsFresh.
func (r *Router) liveHosts(ctx context.Context) ([]sessions.Host, error) {
	r.mu.Lock()
	if time.Since(r.read) < hostsFresh {
		defer r.mu.Unlock()
		return r.hosts, nil
	}
	r.mu.Unlock()
	hosts, err := r.store.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.hosts, r.read = hosts, time.Now()
	r.mu.Unlock()
	return hosts, nil
}
