package project

import (
	"context"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/reconcile"
	"github.com/gcompose/gcompose/core/state"
)

// KeepOpen is a store a session may close without closing it: a
// reconciler's sessions come and go, its store stays.
type KeepOpen struct{ state.Store }

// Close leaves the store open.
func (KeepOpen) Close() error { return nil }

// Append implements state.Appender as the store does: without it a
// reconciler's apply (and cost's) waited for an fsync of every write, not
// only of the pending operations, as a deploy's apply does.
func (k KeepOpen) Append(ctx context.Context, lock *state.Lock, changes ...state.Change) (func() error, error) {
	if a, ok := k.Store.(state.Appender); ok {
		return a.Append(ctx, lock, changes...)
	}
	if err := k.Store.Apply(ctx, lock, changes...); err != nil {
		return nil, err
	}
	return func() error { return nil }, nil
}

// Intent is what a reconciler of app keeps running from this project: what
// it lowers to, its outputs, its budget.
func (p *Project) Intent(app string) (*reconcile.Intent, error) {
	desired, err := p.Desired()
	if err != nil {
		return nil, err
	}
	in := &reconcile.Intent{App: app, Desired: desired, Outputs: p.Outputs()}
	if b := p.App.Budget; b != nil {
		in.Budget = reconcile.Budget{PerHour: b.PerHour, Total: b.Total}
	}
	return in, nil
}

// ReconcileSession is s as one reconciler cycle's session: it wants intent
// and runs the reconciler's requests through s, reporting to observer.
func ReconcileSession(s *Session, intent *reconcile.Intent, observer apply.Observer) reconcile.Session {
	return &reconcileSession{sess: s, intent: intent, observer: observer}
}

type reconcileSession struct {
	sess     *Session
	intent   *reconcile.Intent
	observer apply.Observer
}

func (s *reconcileSession) Intent() *reconcile.Intent { return s.intent }
func (s *reconcileSession) Close() error              { return s.sess.Close() }
func (s *reconcileSession) Run(ctx context.Context, req engine.Request) (*engine.Outcome, error) {
	res, err := s.sess.Run(ctx, Run{Mode: req.Mode, PlanOnly: req.PlanOnly, Targets: req.Targets, Replace: req.Replace,
		Confirm: req.Confirm, Stop: req.Stop, Observer: s.observer})
	if res == nil {
		return nil, err
	}
	return res.Outcome, err
}
