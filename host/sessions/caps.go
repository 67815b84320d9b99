package sessions

import (
	"context"
	"maps"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// The caps of [sessions], each named by its setting: the label of a
// refusal in Refusals (and /metrics).
const (
	CapSessionsPerPrincipal  = "sessions.max_sessions_per_principal"
	CapSessions              = "sessions.max_sessions"
	CapTransfersPerPrincipal = "sessions.max_transfers_per_principal"
	CapTransfers             = "sessions.max_transfers"
)

// Caps are the names of every cap the service enforces.
var Caps = []string{CapSessionsPerPrincipal, CapSessions, CapTransfersPerPrincipal, CapTransfers}

// TransferRetrySeconds is how long a caller refused too_many_transfers is
// told to wait before it tries again (the API's Retry-After).
const TransferRetrySeconds = 1

// Refusals is how many times each cap (Caps) refused something since the
// service was made; every cap is there, 0 when it never refused.
func (s *Service) Refusals() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(Caps))
	for _, c := range Caps {
		out[c] = 0
	}
	maps.Copy(out, s.refused)
	return out
}

// where names the config file, for messages. Called with mu held.
func (s *Service) where() string {
	if s.cfgFile == "" {
		return "the config"
	}
	return s.cfgFile
}

// checkNewSession says whether principal may make one more session under
// the caps in force: nil, or too_many_sessions saying which cap and what
// to do. Called with mu held, before anything of the session is made.
func (s *Service) checkNewSession(ctx context.Context, st *Store, principal, session string) error {
	mine, all, err := st.Count(ctx, principal)
	if err != nil {
		return err
	}
	switch {
	case mine >= s.cfg.MaxSessionsPerPrincipal:
		s.refused[CapSessionsPerPrincipal]++
		return errcode.Errorf(wire.CodeTooManySessions,
			"the session %q can't be started: the token %q already has %d sessions, the most one token may have ([sessions] max_sessions_per_principal in %s); "+
				"delete one it no longer needs (DELETE /api/v1/sessions/ID), or wait for one to go unused for %d hours",
			session, principal, mine, s.where(), s.cfg.KeepHours)
	case all >= s.cfg.MaxSessions:
		s.refused[CapSessions]++
		return errcode.Errorf(wire.CodeTooManySessions,
			"the session %q can't be started: this host already keeps %d sessions, the most it may ([sessions] max_sessions in %s); "+
				"try again once sessions were deleted or went unused for %d hours",
			session, all, s.where(), s.cfg.KeepHours)
	}
	return nil
}

// CheckNew says, before a call of a session tool starts, whether its run
// would make a session past the caps: nil when the principal's session is
// there or one more fits, else too_many_sessions (counted as a refusal),
// so the call is refused before it is charged to any budget. The run's
// acquire checks again, under the same lock as it makes the session, and
// is what holds.
func (s *Service) CheckNew(ctx context.Context, principal, session string) error {
	st, _, err := s.parts()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok, err := st.Get(ctx, principal, session)
	if err != nil || ok {
		return err
	}
	return s.checkNewSession(ctx, st, principal, session)
}

// Transfer takes one of the places of a file upload or download for
// principal (the caller, whoever owns the session), within [sessions] max_transfers_per_principal and
// max_transfers, or refuses at once with too_many_transfers: nothing
// waits. The place is given back by the func it returns (once, however
// often it is called). The sessions API holds one from the start of a
// PUT or GET of a file until its answer is written, so the bytes it holds
// in memory are bounded.
func (s *Service) Transfer(principal string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.transfers[principal] >= s.cfg.MaxTransfersPerPrincipal:
		s.refused[CapTransfersPerPrincipal]++
		return nil, errcode.Errorf(wire.CodeTooManyTransfers,
			"the token %q already has %d file transfers going, the most one token may have at once ([sessions] max_transfers_per_principal in %s); "+
				"try again once one has finished", principal, s.transfers[principal], s.where())
	case s.transferring >= s.cfg.MaxTransfers:
		s.refused[CapTransfers]++
		return nil, errcode.Errorf(wire.CodeTooManyTransfers,
			"this host already has %d file transfers going, the most it allows at once ([sessions] max_transfers in %s); try again in a moment",
			s.transferring, s.where())
	}
	s.transfers[principal]++
	s.transferring++
	var done bool
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if done {
			return
		}
		done = true
		s.transferring--
		if s.transfers[principal]--; s.transfers[principal] <= 0 {
			delete(s.transfers, principal)
		}
	}, nil
}

// Transfers is how many file transfers are going on: principal's, and in
// all.
func (s *Service) Transfers(principal string) (mine, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transfers[principal], s.transferring
}
