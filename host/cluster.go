package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/cluster"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
)

// lease is this host's lease in its store (sessions.Store's hosts): taken
// at start under [cluster] host_id and address, for a new instance (this
// process), renewed every sessions.LeaseRenewEvery while the host runs,
// and given up when it stops cleanly. Each renewal also marks interrupted
// the keys of hosts whose leases ran out (Store.InterruptLapsed).
type lease struct {
	st                    *sessions.Store
	id, address, instance string
	stop                  context.CancelFunc
	done                  sync.WaitGroup
}

// startLease takes the host's lease in st and keeps it: the dispatcher's
// idempotency keys name this host and instance from now on. A store that
// can't be reached now is no failure: the renewals take the lease once it
// is back.
func (h *Host) startLease(st *sessions.Store) {
	id, address := h.config().Identity()
	var b [8]byte
	_, _ = rand.Read(b[:])
	l := &lease{st: st, id: id, address: address, instance: hex.EncodeToString(b[:])}
	h.runs.SetHost(runs.HostID{ID: id, Instance: l.instance})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := st.TakeLease(ctx, id, address, l.instance, sessions.LeaseTTL); err != nil {
		h.log.Warn("the host's lease in the store can't be taken yet; it is tried again every few seconds", "host_id", id, "error", err)
	}
	cancel()
	loop, stop := context.WithCancel(context.Background())
	l.stop = stop
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		h.keepLease(loop, l)
	}()
	h.lease = l
	h.log.Debug("the host's lease is held", "host_id", id, "address", address)
}

// startRouting places conversations on the hosts sharing st, a
// PostgreSQL store: each is held by the host where it was first used, and
// this host relays the calls of those others hold (host/cluster), signed
// with [cluster]'s secret, and takes theirs. Without a secret it relays
// nothing: a conversation another host holds answers session_unavailable.
func (h *Host) startRouting(st *sessions.Store) {
	cfg := h.config()
	if !cfg.Store.Postgres() {
		return
	}
	id, _ := cfg.Identity()
	var client *cluster.Client
	var signer *cluster.Signer
	if cfg.Cluster.Forwards() {
		secret, err := config.ReadSecret(cfg.Cluster.SecretEnv, cfg.Cluster.SecretFile, "[cluster] secret")
		if err == nil {
			signer, err = cluster.NewSigner(id, []byte(secret))
		}
		if err != nil {
			h.log.Error("this host forwards no conversation to the others, nor takes theirs: its [cluster] secret can't be used", "error", err)
		} else {
			client = cluster.NewClient(signer)
		}
	}
	router := cluster.NewRouter(id, st, client)
	h.sessions.svc.SetHostID(id)
	h.runs.SetRouter(router)
	if client != nil {
		h.api.SetCluster(signer, router)
	}
}

// keepLease renews the lease until ctx ends.
func (h *Host) keepLease(ctx context.Context, l *lease) {
	t := time.NewTicker(sessions.LeaseRenewEvery)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, sessions.LeaseRenewEvery)
		err := l.st.RenewLease(rctx, l.id, l.address, l.instance, sessions.LeaseTTL)
		if err == nil {
			var n int64
			n, err = l.st.InterruptLapsed(rctx)
			if n > 0 {
				h.log.Info("calls with idempotency keys whose hosts' leases ran out are marked interrupted", "calls", n)
			}
		}
		cancel()
		var taken *sessions.HostTakenError
		switch {
		case errors.As(err, &taken):
			h.log.Error("another host runs with this host's id: each host sharing the store needs its own [cluster] host_id", "host_id", l.id, "error", err)
		case err != nil && !warned:
			h.log.Warn("the host's lease in the store can't be renewed; other hosts take its running keyed calls for interrupted once it runs out", "error", err)
			warned = true
		case err == nil && warned:
			h.log.Info("the host's lease in the store is renewed again")
			warned = false
		}
	}
}

// stopLease stops renewing the lease and gives it up: a clean stop.
func (h *Host) stopLease() {
	l := h.lease
	if l == nil {
		return
	}
	h.lease = nil
	l.stop()
	l.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.st.ReleaseLease(ctx, l.id, l.instance); err != nil {
		h.log.Warn("the host's lease in the store was not given up; it runs out by itself", "error", err)
	}
}
