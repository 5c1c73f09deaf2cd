// Package engine ties the steps of a run together, as Docker Compose's
// convergence does: observe (lock, load state, ask adapters), plan, and
// execute, then compact the state and release the lock.
package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

// Engine runs plans against one state store with one set of adapters.
type Engine struct {
	Adapters    plan.Adapters
	Store       state.Store
	Parallelism int
	Observer    apply.Observer
	// LockTimeout is how long to wait for a lock someone else holds.
	LockTimeout time.Duration
	// Version is recorded in locks.
	Version string
	// OutputTimeout bounds waiting for a dependency output (see apply).
	OutputTimeout time.Duration
	// Cleanup removes adapter containers an earlier, killed run of the same
	// application left behind. It runs once the lock is held, so no other
	// gcompose is working on the application. Nil skips it.
	Cleanup func(ctx context.Context, app string) (int, error)
	// Release runs at the end of a run while the lock is still held: it
	// stops what the run started (served adapter containers), so the next
	// run, once it gets the lock, finds nothing of this one running.
	Release func(ctx context.Context) error
	// Log receives notes (leftovers removed); nil discards them.
	Log func(format string, args ...any)
}

// Request is one run.
type Request struct {
	App     string
	Mode    plan.Mode
	Desired map[string]*plan.Resource
	// Confirm is shown the plan before anything changes; returning false
	// stops the run with ErrDeclined. Nil applies without asking.
	Confirm func(*plan.Plan) (bool, error)
	// PlanOnly stops after planning (gcompose plan, refresh).
	PlanOnly bool
}

// Outcome of a run.
type Outcome struct {
	Plan   *plan.Plan
	Result *apply.Result
	// Pending lists resources that had an interrupted operation when the run
	// started (a previous run was killed); the plan resolved them.
	Pending []*state.Resource
}

// ErrDeclined is returned when Confirm said no.
var ErrDeclined = errors.New("apply declined: nothing was changed")

func (e *Engine) walk() plan.Walk {
	p := e.Parallelism
	if p <= 0 {
		p = 10
	}
	return GraphWalk(p)
}

// Run locks the application's state, plans, and unless PlanOnly, applies.
func (e *Engine) Run(ctx context.Context, req Request) (out *Outcome, err error) {
	op := string(req.Mode)
	if req.PlanOnly {
		op = "plan"
	}
	lock, err := e.lock(ctx, req.App, op)
	if err != nil {
		return nil, err
	}
	defer func() {
		// Unlock with a fresh context: a cancelled run must still release.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if e.Release != nil {
			if rerr := e.Release(uctx); rerr != nil && err == nil {
				err = fmt.Errorf("stopping adapter servers: %w", rerr)
			}
		}
		if uerr := e.Store.Unlock(uctx, lock); uerr != nil && err == nil {
			err = fmt.Errorf("releasing the state lock: %w", uerr)
		}
	}()
	if e.Cleanup != nil {
		n, err := e.Cleanup(ctx, req.App)
		if err != nil {
			return nil, fmt.Errorf("removing containers left by an earlier run: %w", err)
		}
		if n > 0 && e.Log != nil {
			e.Log("removed %d adapter container(s) left behind by an earlier, interrupted run", n)
		}
	}
	doc, err := e.Store.Load(ctx, req.App)
	if err != nil {
		return nil, fmt.Errorf("loading state of %s: %w", req.App, err)
	}
	if doc.Lineage == "" && req.Mode == plan.Deploy && !req.PlanOnly {
		// A first deploy: write once so the application gets its lineage,
		// which is ${app.id} for every resource that references it.
		if err := e.Store.Replace(ctx, lock, doc, false); err != nil {
			return nil, fmt.Errorf("initializing state of %s: %w", req.App, err)
		}
		if doc, err = e.Store.Load(ctx, req.App); err != nil {
			return nil, fmt.Errorf("loading state of %s: %w", req.App, err)
		}
	}
	out = &Outcome{Pending: doc.PendingResources()}
	in := plan.Input{App: req.App, Mode: req.Mode, Desired: req.Desired, State: doc}
	planner := &plan.Planner{Adapters: e.Adapters, Walk: e.walk()}
	pl, obs, planErr := planner.Plan(ctx, in)
	out.Plan = pl
	if planErr != nil {
		planErr = fmt.Errorf("planning: %w", planErr)
	}
	// A resource that could not be planned holds back only what depends on
	// it: apply goes ahead with the independent rest, as it does for a
	// failure during apply, and the run still fails naming it.
	if req.PlanOnly || req.Mode == plan.Refresh || pl == nil || ctx.Err() != nil {
		return out, planErr
	}
	if req.Confirm != nil {
		ok, err := req.Confirm(pl)
		if err != nil {
			return out, err
		}
		if !ok {
			return out, ErrDeclined
		}
	}
	ex := &apply.Executor{
		Adapters:      e.Adapters,
		Store:         &persister{store: e.Store, lock: lock},
		Walk:          e.walk(),
		Observer:      e.Observer,
		Holder:        lock.Info.Holder,
		OutputTimeout: e.OutputTimeout,
	}
	res, applyErr := ex.Apply(ctx, pl, in, obs)
	if planErr != nil && applyErr == nil {
		applyErr = planErr
	}
	out.Result = res
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if cerr := e.Store.Compact(cctx, lock); cerr != nil && applyErr == nil {
		applyErr = fmt.Errorf("compacting state: %w", cerr)
	}
	return out, applyErr
}

// lock takes the application's lock. A lock whose holder was a process on
// this host that no longer exists (killed with -9, the machine rebooted) is
// taken over with a note: a crash must not stop the next run, which is the
// one that repairs what the crash left.
func (e *Engine) lock(ctx context.Context, app, op string) (*state.Lock, error) {
	info := state.NewLockInfo(op, e.Version)
	lock, err := state.Acquire(ctx, e.Store, app, info, e.LockTimeout)
	var le *state.LockedError
	if err == nil || !errors.As(err, &le) || !le.Stale {
		return lock, err
	}
	if uerr := e.Store.ForceUnlock(ctx, app, le.Info.ID); uerr != nil {
		return nil, fmt.Errorf("%w (taking over the stale lock failed: %v)", err, uerr)
	}
	if e.Log != nil {
		e.Log("took over the lock of %s for %s since %s: that process no longer exists", le.Info.Holder, le.Info.Operation, le.Info.Created.Format(time.RFC3339))
	}
	return state.Acquire(ctx, e.Store, app, info, e.LockTimeout)
}

// persister writes each change through the held lock.
type persister struct {
	store state.Store
	lock  *state.Lock
}

// Writes ignore cancellation: what an action did must be recorded even when
// the user interrupts the run right after it.
func (p *persister) Put(ctx context.Context, r *state.Resource) error {
	return p.store.Apply(context.WithoutCancel(ctx), p.lock, state.Put(r))
}

func (p *persister) Remove(ctx context.Context, name string) error {
	return p.store.Apply(context.WithoutCancel(ctx), p.lock, state.Delete(name))
}
