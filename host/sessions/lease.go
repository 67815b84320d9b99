package sessions

import (
	"context"
	"fmt"
	"time"
)

// The hosts sharing a store each hold a lease in it (the hosts table): a
// row of its [cluster] host_id, the address the others reach it at, the
// process (instance) that holds it, and until when, by the database's
// clock. A host renews it every LeaseRenewEvery for LeaseTTL while it
// runs, and gives it up when it stops cleanly. An idempotency key records
// the host and instance that claimed it, so another host can tell a run
// still going on there (the lease is live: in_progress) from one cut off
// by a host that died or restarted (it ran out, or another instance holds
// the id now: interrupted). On SQLite the one host holds a lease too, and
// its answers are as without one: a key its process did not claim is
// interrupted.

// LeaseTTL is how long a lease lasts from its last renewal, and
// LeaseRenewEvery how often a running host renews it: a host that stops
// renewing (it died, or lost the database) has its keys' runs taken for
// interrupted from LeaseTTL after its last renewal, at most; two missed
// renewals in a row are forgiven.
const (
	LeaseTTL        = 15 * time.Second
	LeaseRenewEvery = 5 * time.Second
)

// Host is a host sharing the store, as its lease says.
type Host struct {
	// ID is the host's [cluster] host_id, Address its [cluster] address.
	ID, Address string
	// Instance names the host's process holding the lease.
	Instance string
	// LeaseUntil is when the lease runs out, by the database's clock;
	// Live says it has not yet.
	LeaseUntil time.Time
	Live       bool
}

// HostTakenError is returned by RenewLease when the lease of the host's id
// is live and held by another instance: two hosts run with one
// [cluster] host_id.
type HostTakenError struct {
	Host Host
}

func (e *HostTakenError) Error() string {
	return fmt.Sprintf("the [cluster] host_id %q is in use by another host too (at %s): give each host sharing the store its own host_id",
		e.Host.ID, e.Host.Address)
}

// TakeLease starts the lease of the host id at address for this process
// (instance), for ttl from the database's clock: at its start, a host
// takes its id over from whatever instance held it (itself before a
// restart: that instance's keys are then interrupted).
func (s *Store) TakeLease(ctx context.Context, id, address, instance string, ttl time.Duration) error {
	return s.lease(ctx, id, address, instance, ttl, true)
}

// RenewLease renews the lease of the host id held by this process
// (instance) for ttl from the database's clock, or takes it again if it ran
// out. When another instance holds it live, it fails with *HostTakenError.
// A ttl of 0 or less gives the lease up at once (ReleaseLease).
func (s *Store) RenewLease(ctx context.Context, id, address, instance string, ttl time.Duration) error {
	return s.lease(ctx, id, address, instance, ttl, false)
}

func (s *Store) lease(ctx context.Context, id, address, instance string, ttl time.Duration, take bool) error {
	q := `INSERT INTO hosts (host_id, address, instance, lease_until) VALUES (?, ?, ?, ` + s.d.nowMS + ` + ?)
		ON CONFLICT (host_id) DO UPDATE SET address = excluded.address, instance = excluded.instance, lease_until = excluded.lease_until`
	if !take {
		q += ` WHERE hosts.instance = excluded.instance OR hosts.lease_until <= ` + s.d.nowMS
	}
	res, err := s.exec(ctx, q, id, address, instance, ttl.Milliseconds())
	if err != nil {
		return s.dbError("renewing the host's lease", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.dbError("renewing the host's lease", err)
	} else if n > 0 {
		return nil
	}
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if h.ID == id {
			return &HostTakenError{Host: h}
		}
	}
	return s.dbError("renewing the host's lease", fmt.Errorf("the lease of host %q was neither renewed nor found", id))
}

// ReleaseLease gives up the lease of the host id, if this process
// (instance) holds it: a host stopping cleanly. The keys of its runs that
// did not end are interrupted from then on.
func (s *Store) ReleaseLease(ctx context.Context, id, instance string) error {
	if _, err := s.exec(ctx, `UPDATE hosts SET lease_until = 0 WHERE host_id = ? AND instance = ?`, id, instance); err != nil {
		return s.dbError("giving up the host's lease", err)
	}
	return nil
}

// Hosts are the hosts that held a lease in the store, by id.
func (s *Store) Hosts(ctx context.Context) ([]Host, error) {
	rows, err := s.query(ctx, `SELECT host_id, address, instance, lease_until, CASE WHEN lease_until > `+s.d.nowMS+` THEN 1 ELSE 0 END
		FROM hosts ORDER BY host_id`)
	if err != nil {
		return nil, s.dbError("reading the hosts' leases", err)
	}
	defer rows.Close()
	out := []Host{}
	for rows.Next() {
		var h Host
		var until, live int64
		if err := rows.Scan(&h.ID, &h.Address, &h.Instance, &until, &live); err != nil {
			return nil, s.dbError("reading the hosts' leases", err)
		}
		h.LeaseUntil, h.Live = time.UnixMilli(until).UTC(), live != 0
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbError("reading the hosts' leases", err)
	}
	return out, nil
}

// InterruptLapsed marks interrupted, in one statement, the idempotency keys
// whose runs did not end and whose claiming instance holds no live lease
// (its host died, stopped or restarted), so they stay interrupted should
// that host come back; it returns how many it marked. Every host runs it
// at each renewal of its lease: whichever notices first marks them.
func (s *Store) InterruptLapsed(ctx context.Context) (int64, error) {
	res, err := s.exec(ctx, `UPDATE idempotency_keys SET interrupted = 1
		WHERE done = 0 AND interrupted = 0 AND NOT EXISTS (SELECT 1 FROM hosts h WHERE h.host_id = idempotency_keys.host_id
			AND h.instance = idempotency_keys.host_instance AND h.lease_until > `+s.d.nowMS+`)`)
	if err != nil {
		return 0, s.dbError("marking the runs of hosts gone interrupted", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
