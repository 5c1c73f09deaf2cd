// Package engine ties the steps of a run together, as Docker Compose's
// convergence does: observe (lock, load state, ask adapters), plan, and
// execute, then compact the state and release the lock.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
	// Cleanup runs once the lock is held. It labels what this run starts
	// with the lock (lock.Scope, lock.Info.ID) and removes the adapter
	// containers that earlier holders of the same lock left behind: their
	// runs provably hold no lock any more. Nil skips it.
	Cleanup func(ctx context.Context, lock *state.Lock) (int, error)
	// Release runs at the end of a run while the lock is still held: it
	// stops what the run started (served adapter containers), so the next
	// run, once it gets the lock, finds nothing of this one running.
	Release func(ctx context.Context) error
	// Log receives notes (leftovers removed); nil discards them.
	Log func(format string, args ...any)
	// Existing lists objects of an application that exist outside gcompose's
	// adapter calls (containers labelled with it). Asked before a first
	// deploy, with the report-only sweep: anything found stops it unless
	// the request forces a new state; an object made by an adapter whose
	// sweep answered is left to that sweep. Nil skips it.
	Existing func(ctx context.Context, app string) ([]ExistingObject, error)
	// Warm starts what the calls of adapter type typ will need (its
	// server), resource being the one whose plugs a call for the whole
	// type mounts. Once the lock is held, the run calls it for every type
	// at once, while it removes leftovers and loads the state, so that no
	// call waits for a server started only when its adapter was first
	// asked; Release runs after every Warm returned. Its error is only
	// logged: the type's first call meets it again and reports it with its
	// resource. Nil: servers start on first use.
	Warm func(ctx context.Context, lock *state.Lock, typ, resource string) error
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
	// ForceNewState (deploy --force-new-state) starts a new state where the
	// application's document is lost but traces of it exist, and deploys
	// even when objects of the application exist without a state here.
	ForceNewState bool
	// Targets, Replace and Outputs are plan.Input's.
	Targets []string
	Replace []string
	Outputs map[string]any
	// Saved is a plan made earlier (gcompose plan -out) to apply exactly,
	// without planning or asking again. It is refused unless the state is
	// the one it was made against (lineage and serial) and Desired hashes
	// as its inputs did; every adapter is asked again at apply and may do
	// no more than the plan says.
	Saved *plan.Plan
	// Stop, when done, interrupts the run as Terraform does (a first
	// Ctrl-C): nothing new starts — no lock wait, no planning, no resource's
	// actions — while actions under way finish; Run then returns an error
	// matching apply.ErrInterrupted (an *apply.InterruptedError once it
	// applied). Cancel Run's ctx with cause apply.ErrAborted to cut the
	// actions under way short as well (a second Ctrl-C). Nil: never.
	Stop context.Context
}

// Outcome of a run.
type Outcome struct {
	Plan   *plan.Plan
	Result *apply.Result
	// Pending lists resources that had an interrupted operation when the run
	// started (a previous run was killed); the plan resolved them.
	Pending []*state.Resource
	// Swept lists what the sweep before planning found that no state
	// names: terminated (deploy, destroy) or only reported (plan, refresh,
	// a first deploy, and another state's objects).
	Swept []Swept
	// Lineage is the state's lineage (after a first deploy assigned it).
	Lineage string
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
	// What may be dropped at an interrupt runs on soft: waiting for the
	// lock and planning (reads only).
	soft, cancelSoft := interruptible(ctx, req.Stop)
	defer cancelSoft()
	lock, err := e.lock(soft, req.App, op)
	if err != nil {
		return nil, interruptedOr(req.Stop, err)
	}
	// Release once: after an apply, at the same time as the compaction.
	var (
		releaseOnce sync.Once
		releaseErr  error
	)
	release := func() {
		releaseOnce.Do(func() {
			if e.Release == nil {
				return
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if rerr := e.Release(rctx); rerr != nil {
				releaseErr = fmt.Errorf("stopping adapter servers: %w", rerr)
			}
		})
	}
	defer func() {
		release()
		if releaseErr != nil && err == nil {
			err = releaseErr
		}
		// Unlock with a fresh context: a cancelled run must still release.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if uerr := e.Store.Unlock(uctx, lock); uerr != nil && err == nil {
			err = fmt.Errorf("releasing the state lock: %w", uerr)
		}
	}()
	// The adapters' servers start, leftover containers are removed and the
	// state loads, all at once: none needs another, and each costs a
	// Docker Engine or disk round trip or a container start.
	t0 := time.Now()
	warm := e.startWarm(ctx, lock)
	// Deferred after the release above, so it runs before it: no server is
	// stopped while it still starts.
	defer warm.wait()
	warm.types(typesOf(req.Desired, nil))
	cleaned := make(chan error, 1)
	go func() { cleaned <- e.cleanup(ctx, lock) }()
	doc, err := e.Store.Load(ctx, req.App)
	if err == nil {
		warm.types(typesOf(nil, doc))
	}
	if cerr := <-cleaned; cerr != nil {
		return nil, cerr
	}
	slog.DebugContext(ctx, "engine: lock held, leftovers removed, state loaded", "app", req.App, "took", time.Since(t0))
	forceNew := false
	if err != nil {
		if !errors.Is(err, state.ErrMissingDocument) || !req.ForceNewState || req.Mode != plan.Deploy || req.PlanOnly {
			return nil, fmt.Errorf("loading state of %s: %w", req.App, err)
		}
		e.note("starting a new state for %s as asked (--force-new-state); %v", req.App, err)
		doc, forceNew = state.NewDocument(req.App), true
	}
	firstDeploy := doc.Lineage == ""
	out = &Outcome{Pending: doc.PendingResources()}
	if req.Saved != nil {
		if err := checkSaved(req, doc); err != nil {
			return out, err
		}
	}
	// Before planning, at once (reads only: dropped at an interrupt): can
	// the adapters work at all (one line per problem, before the state is
	// first written); what earlier runs created but never recorded (report
	// only: nothing changes before the plan is approved; what is this
	// state's becomes delete steps of a deploy or destroy plan); and, before
	// a first deploy, what exists of the application already. A problem
	// the preflight finds is the answer: what the sweeps found is not
	// shown. They are not cut short for it: a call cancelled while the
	// engine creates its container leaves that container to the next run's
	// clean-up ("removed 1 adapter container(s) left behind"), and the
	// sweeps are reads that end on their own.
	desired := req.Desired
	if req.Mode != plan.Deploy {
		desired = nil
	}
	t1 := time.Now()
	sweepCtx, cancelSweep := context.WithCancel(soft)
	defer cancelSweep()
	var (
		swept              map[string]bool
		sweepErr, existErr error
		existing           []ExistingObject
		scans              sync.WaitGroup
	)
	scans.Go(func() { out.Swept, swept, sweepErr = e.sweep(sweepCtx, req.App, desired, doc, false) })
	if firstDeploy && req.Mode == plan.Deploy && e.Existing != nil {
		scans.Go(func() { existing, existErr = e.Existing(sweepCtx, req.App) })
	}
	preErr := e.preflight(soft, req.App, req.Mode, req.Desired, doc)
	scans.Wait()
	slog.DebugContext(ctx, "engine: preflight, sweeps and scans done", "app", req.App, "took", time.Since(t1))
	if preErr != nil {
		out.Swept = nil
		return out, interruptedOr(req.Stop, preErr)
	}
	if stopped(req.Stop) {
		return out, interruptedOr(req.Stop, nil)
	}
	if sweepErr != nil {
		return out, interruptedOr(req.Stop, sweepErr)
	}
	e.reportSwept(out.Swept, doc.Lineage)
	if firstDeploy && req.Mode == plan.Deploy {
		// Before the lineage is written: does the application exist already?
		if existErr != nil {
			return out, interruptedOr(req.Stop, fmt.Errorf("looking for objects of %s that exist already: %w", req.App, existErr))
		}
		if err := e.checkFirstDeploy(req, existing, out.Swept, swept); err != nil {
			return out, interruptedOr(req.Stop, err)
		}
		if stopped(req.Stop) {
			return out, interruptedOr(req.Stop, nil)
		}
		if !req.PlanOnly {
			// Write once so the application gets its lineage, which is
			// ${app.id} for every resource that references it.
			if err := e.Store.Replace(ctx, lock, doc, forceNew); err != nil {
				return out, fmt.Errorf("initializing state of %s: %w", req.App, err)
			}
			if doc, err = e.Store.Load(ctx, req.App); err != nil {
				return out, fmt.Errorf("loading state of %s: %w", req.App, err)
			}
		}
	}
	out.Lineage = doc.Lineage
	var pl *plan.Plan
	var planErr error
	if req.Saved != nil {
		pl = savedForApply(req, doc)
	} else {
		in := plan.Input{App: req.App, Mode: req.Mode, Desired: req.Desired, State: doc, Targets: req.Targets, Replace: req.Replace, Outputs: req.Outputs,
			Leftovers: leftovers(out.Swept, doc, desired, firstDeploy)}
		planner := &plan.Planner{Adapters: e.Adapters, Walk: e.walk()}
		t2 := time.Now()
		pl, planErr = planner.Plan(soft, in)
		slog.DebugContext(ctx, "engine: planned", "app", req.App, "took", time.Since(t2), "since lock", time.Since(t0))
	}
	out.Plan = pl
	if stopped(req.Stop) {
		return out, interruptedOr(req.Stop, nil)
	}
	if planErr != nil {
		planErr = fmt.Errorf("planning: %w", planErr)
	}
	// A resource that could not be planned holds back only what depends on
	// it: apply goes ahead with the independent rest, as it does for a
	// failure during apply, and the run still fails naming it.
	if req.PlanOnly || req.Mode == plan.Refresh || pl == nil || ctx.Err() != nil {
		return out, planErr
	}
	// An adapter that says a change cannot succeed stops the whole deploy
	// before anything changes: what else it would do was planned with it.
	var refused *plan.RefusedError
	if errors.As(planErr, &refused) {
		return out, fmt.Errorf("%w\nnothing was changed: an adapter refused the plan", planErr)
	}
	if req.Confirm != nil && req.Saved == nil {
		ok, err := req.Confirm(pl)
		if err != nil {
			return out, interruptedOr(req.Stop, err)
		}
		if !ok {
			return out, ErrDeclined
		}
	}
	if stopped(req.Stop) {
		return out, interruptedOr(req.Stop, nil)
	}
	ex := &apply.Executor{
		Adapters:      e.Adapters,
		Store:         &persister{store: e.Store, lock: lock},
		Walk:          e.walk(),
		Observer:      e.Observer,
		Holder:        lock.Info.Holder,
		OutputTimeout: e.OutputTimeout,
		Stop:          req.Stop,
		Recheck:       req.Saved != nil,
	}
	res, applyErr := ex.Apply(ctx, pl)
	if planErr != nil && applyErr == nil {
		applyErr = planErr
	}
	out.Result = res
	// No adapter is asked any more: its servers stop while the state is
	// compacted (both before the lock is released).
	warm.wait()
	go release()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if cerr := e.Store.Compact(cctx, lock); cerr != nil && applyErr == nil {
		applyErr = fmt.Errorf("compacting state: %w", cerr)
	}
	return out, applyErr
}

// interruptible is ctx, also cancelled (cause apply.ErrInterrupted) once
// stop is done.
func interruptible(ctx, stop context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	if stop == nil {
		return c, func() { cancel(nil) }
	}
	unhook := context.AfterFunc(stop, func() { cancel(apply.ErrInterrupted) })
	return c, func() { unhook(); cancel(nil) }
}

func stopped(stop context.Context) bool { return stop != nil && stop.Err() != nil }

// interruptedOr is err, unless the run was interrupted before it applied
// anything: then what failed failed because of the interrupt (a cancelled
// lock wait or state call), and the run says it was interrupted.
func interruptedOr(stop context.Context, err error) error {
	if !stopped(stop) {
		return err
	}
	return &apply.InterruptedError{Result: &apply.Result{Outcomes: map[string]*apply.Outcome{}}}
}

// lock takes the application's lock, waiting up to LockTimeout. A lock is
// never taken over: the backend knows when its holder ended (the OS
// released its file lock, or its etcd lease expired).
func (e *Engine) lock(ctx context.Context, app, op string) (*state.Lock, error) {
	lock, err := state.AcquireWaiting(ctx, e.Store, app, state.NewLockInfo(op, e.Version), e.LockTimeout, func(held *state.LockedError) {
		if e.Log != nil {
			e.Log("the state of %s is locked by %s: waiting up to %s for it (--lock-timeout)", app, describeLocked(held.Info), e.LockTimeout)
		}
	})
	if err != nil {
		return nil, err
	}
	if p := lock.Previous; p != nil && e.Log != nil {
		e.Log("the previous run (%s) ended without releasing its lock (killed or crashed): what it left unfinished is checked now", describeHolder(p))
	}
	return lock, nil
}

// describeLocked names who holds a lock as a person reads it: the process
// (user@host, pid) rather than the holder's ID.
func describeLocked(i state.LockInfo) string {
	var b strings.Builder
	b.WriteString(i.Who())
	if i.Operation != "" {
		fmt.Fprintf(&b, " for %s", i.Operation)
	}
	if !i.Created.IsZero() {
		fmt.Fprintf(&b, " since %s", i.Created.UTC().Format(time.RFC3339))
	}
	return b.String()
}

func describeHolder(i *state.LockInfo) string {
	var b strings.Builder
	b.WriteString(i.Holder)
	if i.Operation != "" {
		fmt.Fprintf(&b, " for %s", i.Operation)
	}
	if !i.Created.IsZero() {
		fmt.Fprintf(&b, " since %s", i.Created.UTC().Format(time.RFC3339))
	}
	if i.ID != "" {
		fmt.Fprintf(&b, ", lock ID %s", i.ID)
	}
	return b.String()
}

// persister writes each change through the held lock.
type persister struct {
	store state.Store
	lock  *state.Lock

	// Writes recorded without waiting (PutLater) become durable in the
	// background, as soon as an fsync covers them.
	later    sync.WaitGroup
	mu       sync.Mutex
	laterErr error
}

// Writes ignore cancellation: what an action did must be recorded even when
// the user interrupts the run right after it.
func (p *persister) Put(ctx context.Context, r *state.Resource) error {
	return p.store.Apply(context.WithoutCancel(ctx), p.lock, state.Put(r))
}

// PutLater implements apply.LaterPersister with a store that appends
// (state.Appender), else it is Put.
func (p *persister) PutLater(ctx context.Context, r *state.Resource) error {
	a, ok := p.store.(state.Appender)
	if !ok {
		return p.Put(ctx, r)
	}
	durable, err := a.Append(context.WithoutCancel(ctx), p.lock, state.Put(r))
	if err != nil {
		return err
	}
	// Asked at once, so that it is durable as soon as it would have been
	// had the caller waited.
	p.later.Go(func() {
		if err := durable(); err != nil {
			p.mu.Lock()
			if p.laterErr == nil {
				p.laterErr = err
			}
			p.mu.Unlock()
		}
	})
	return nil
}

// Flush implements apply.LaterPersister.
func (p *persister) Flush(context.Context) error {
	p.later.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.laterErr
}

func (p *persister) Remove(ctx context.Context, name string, spent *state.Spent) error {
	return p.store.Apply(context.WithoutCancel(ctx), p.lock, state.DeleteSpent(name, spent))
}
