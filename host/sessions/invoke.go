package sessions

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// Language is what a session tool does in its sandbox, from its run
// table's "session": "python", "bash", "files" or "file". kind is what the
// tool's kind said of itself in Describe: ok is false for a tool that runs
// in no session, and for a tool of a kind that keeps no conversation
// sandboxes (sdk.Info.ServesSessions; its "session" is its own business).
func Language(kind sdk.Info, run json.RawMessage) (lang string, ok bool) {
	if !kind.ServesSessions {
		return "", false
	}
	lang = sessionOf(run)
	return lang, lang != ""
}

// sessionOf is the run table's "session", or "".
func sessionOf(run json.RawMessage) string {
	var r struct {
		Session string `json:"session"`
	}
	if json.Unmarshal(run, &r) != nil {
		return ""
	}
	return r.Session
}

// Admit is the host's check of a call before it runs (the dispatcher's
// gate): a call of a session tool needs sessions served, a caller whose
// role may use them, and a good session id. Other tools pass as they are.
// kind is what the tool's kind said of itself (see Language). The error is
// an *errcode.Error the caller reads.
func (s *Service) Admit(principal, role, session, tool string, kind sdk.Info, run json.RawMessage) error {
	if _, ok := Language(kind, run); !ok {
		return nil
	}
	if err := s.Ready(); err != nil {
		return err
	}
	if !s.MayUse(role) {
		return s.Forbidden(principal, role)
	}
	if session == "" {
		return errcode.Errorf(wire.CodeBadArgs, "%s runs in a conversation's sandbox and needs a session: give \"session\" with the call "+
			"(on POST /api/v1/tools/%s/call, ?session=ID); %s", tool, tool, IDRule)
	}
	return CheckID(session)
}

// Invoker runs a tool in its kind's plugin; the host's plugins are ones.
type Invoker interface {
	Invoke(ctx context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error)
}

// Invoker wraps a kind's invoker so that a call of a session tool runs in
// its caller's session: the session (the caller's name for it, with the
// run's principal) is made or marked used, held against expiry while the
// run goes on, and the plugin gets its backend id, its network and, for
// packages, the egress proxy's URL with the session's credentials. When
// the run ends it is added to the ledger. Calls of other tools pass
// through unchanged: their Session stays the caller's string. inner is
// the invoker of the kind that keeps the sessions.
func (s *Service) Invoker(inner Invoker) Invoker { return &sessionInvoker{s: s, inner: inner} }

type sessionInvoker struct {
	s     *Service
	inner Invoker
}

func (w *sessionInvoker) Invoke(ctx context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	lang := sessionOf(inv.Tool.Run)
	if lang == "" {
		return w.inner.Invoke(ctx, inv, onEvent)
	}
	s := w.s
	if inv.Session == "" {
		// The gate refuses such a call before it runs; a kind's nested
		// call made without one lands here.
		return nil, errcode.Errorf(wire.CodeBadArgs, "%s runs in a conversation's sandbox and needs a session", inv.Tool.Name)
	}
	if _, _, err := s.prepared(ctx); err != nil {
		return nil, err
	}
	se, release, err := s.acquire(ctx, inv.Principal, inv.Session, true, true)
	if err != nil {
		return nil, err
	}
	defer release()
	inv.Session, inv.SessionNetwork, inv.SessionProxy = se.Backend, se.Network, ""
	if se.Network == config.SessionNetworkPackages {
		inv.SessionProxy = s.ProxyURL(se.Backend)
	}
	var mu sync.Mutex
	var printed int64
	counted := func(e sdk.Event) {
		mu.Lock()
		printed += int64(len(e.Stdout) + len(e.Stderr))
		mu.Unlock()
		if onEvent != nil {
			onEvent(e)
		}
	}
	started := s.now()
	result, err := w.inner.Invoke(ctx, inv, counted)
	took := s.now().Sub(started)

	entry := RunEntry{
		Run: inv.RunID, Session: se.ID, Principal: se.Principal, Tool: inv.Tool.Name, Language: lang,
		Started: started, DurationMS: took.Milliseconds(), BytesIn: int64(len(inv.Args)),
	}
	mu.Lock()
	entry.BytesOut = printed + int64(len(result))
	mu.Unlock()
	if ue := errcode.FromRun(ctx, err); ue != nil {
		entry.Stopped = ue.Code
	} else {
		var r struct {
			ExitCode *int   `json:"exit_code"`
			Stopped  string `json:"stopped"`
		}
		_ = json.Unmarshal(result, &r)
		entry.ExitCode, entry.Stopped = r.ExitCode, r.Stopped
	}
	// The ledger and the session's last use are written even when the
	// caller went away: the run happened.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if st, _, perr := s.parts(); perr == nil {
		if rerr := st.Record(wctx, entry); rerr != nil {
			s.log.Error("a session run could not be added to the ledger", "run", inv.RunID, "error", rerr)
		}
		if terr := st.MarkUsed(wctx, se.Principal, se.ID, s.storeNow(st)); terr != nil {
			s.log.Error("a session's last use could not be written", "session", describe(se), "error", terr)
		}
	}
	return result, err
}
