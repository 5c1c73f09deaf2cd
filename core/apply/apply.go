// Package apply is the executor: it carries out a Plan, walking resources in
// dependency order in parallel, resolving runtime references from the
// outputs of what it just applied, and persisting after every action so a
// process killed at any moment loses nothing.
package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// Persister records resource changes durably before returning.
type Persister interface {
	Put(ctx context.Context, r *state.Resource) error
	Remove(ctx context.Context, name string) error
}

// Executor carries out plans.
type Executor struct {
	Adapters plan.Adapters
	Store    Persister
	Walk     plan.Walk
	Observer Observer
	// Holder is recorded in pending operations (who started them).
	Holder string
	// OutputTimeout bounds the wait for a dependency output that is not
	// reported yet (default 2 minutes); OutputPoll is the interval between
	// asks (default 1 s).
	OutputTimeout time.Duration
	OutputPoll    time.Duration
}

// Outcome is what happened to one resource.
type Outcome struct {
	Resource string
	Op       plan.Op
	// Changed is false when the resource turned out to need nothing.
	Changed  bool
	Err      error
	Duration time.Duration
}

// Result of an apply.
type Result struct {
	Outcomes map[string]*Outcome
}

// Failed lists the resources that failed or were skipped, sorted.
func (r *Result) Failed() []*Outcome {
	var out []*Outcome
	for _, o := range r.Outcomes {
		if o.Err != nil {
			out = append(out, o)
		}
	}
	sortOutcomes(out)
	return out
}

// run is the mutable state of one Apply.
type run struct {
	e    *Executor
	in   plan.Input
	pl   *plan.Plan
	obs  *plan.Observations
	mu   sync.Mutex
	doc  map[string]*state.Resource // current view of the state, updated as we go
	outs map[string]map[string]any  // outputs produced or confirmed in this run
	res  *Result
}

// Apply carries out pl, made by the planner from in with observations obs.
func (e *Executor) Apply(ctx context.Context, pl *plan.Plan, in plan.Input, obs *plan.Observations) (*Result, error) {
	r := &run{e: e, in: in, pl: pl, obs: obs, doc: map[string]*state.Resource{}, outs: map[string]map[string]any{}, res: &Result{Outcomes: map[string]*Outcome{}}}
	if in.State != nil {
		for n, res := range in.State.Resources {
			r.doc[n] = res.Clone()
		}
		if o, ok := plan.AppOutputsOf(in.App, in.State.Lineage); ok {
			r.outs[plan.AppOutputs] = o
		}
	}
	var removals, converges []*plan.Step
	for _, s := range pl.Steps {
		_, wanted := in.Desired[s.Resource]
		if pl.Mode == plan.Destroy || !wanted {
			removals = append(removals, s)
		} else {
			converges = append(converges, s)
		}
	}
	// Removals first, dependents before what they depend on, so that names
	// and addresses they held are free for what is created next.
	if len(removals) > 0 {
		deps := map[string][]string{}
		for _, s := range removals {
			deps[s.Resource] = s.DependsOn
		}
		errs := e.Walk(ctx, deps, true, func(ctx context.Context, name string) error {
			if s := pl.Step(name); s.Op == plan.Failed {
				return r.failed(s)
			}
			return r.timed(name, pl.Step(name).Op, func() (bool, error) { return r.remove(ctx, pl.Step(name)) })
		})
		r.collect(errs)
	}
	if len(converges) > 0 && pl.Mode == plan.Deploy {
		deps := map[string][]string{}
		for _, s := range converges {
			deps[s.Resource] = in.Desired[s.Resource].DependsOn
		}
		errs := e.Walk(ctx, deps, false, func(ctx context.Context, name string) error {
			if s := pl.Step(name); s.Op == plan.Failed {
				return r.failed(s)
			}
			return r.timed(name, pl.Step(name).Op, func() (bool, error) { return r.converge(ctx, in.Desired[name], pl.Step(name)) })
		})
		r.collect(errs)
	}
	if failed := r.res.Failed(); len(failed) > 0 {
		return r.res, &FailedError{Outcomes: failed}
	}
	return r.res, nil
}

// failed records a step that could not be planned as failed, so that what
// depends on it is not started.
func (r *run) failed(s *plan.Step) error {
	err := errors.New(strings.TrimPrefix(s.Error, s.Resource+": "))
	r.mu.Lock()
	r.res.Outcomes[s.Resource] = &Outcome{Resource: s.Resource, Op: s.Op, Err: err}
	r.mu.Unlock()
	return err
}

func (r *run) timed(name string, op plan.Op, fn func() (bool, error)) error {
	start := time.Now()
	changed, err := fn()
	o := &Outcome{Resource: name, Op: op, Changed: changed, Err: err, Duration: time.Since(start)}
	r.mu.Lock()
	r.res.Outcomes[name] = o
	r.mu.Unlock()
	switch {
	case err != nil:
		r.emit(Event{Resource: name, Phase: PhaseFailed, Message: err.Error(), Duration: o.Duration})
	case changed:
		r.emit(Event{Resource: name, Phase: PhaseDone, Message: string(op), Duration: o.Duration})
	}
	return err
}

// collect records outcomes for resources the walk skipped because
// something they depend on failed.
func (r *run) collect(errs map[string]error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, err := range errs {
		if err == nil {
			continue
		}
		if _, ok := r.res.Outcomes[name]; !ok {
			op := plan.NoOp
			if s := r.pl.Step(name); s != nil {
				op = s.Op
			}
			r.res.Outcomes[name] = &Outcome{Resource: name, Op: op, Err: err}
			r.emit(Event{Resource: name, Phase: PhaseSkipped, Message: err.Error()})
		}
	}
}

func (r *run) emit(ev Event) {
	if r.e.Observer != nil {
		if ev.Time.IsZero() {
			ev.Time = time.Now()
		}
		r.e.Observer(ev)
	}
}

// outputsFor is the executor's view of a resource's outputs: only what this
// run produced or confirmed. Every desired resource is converged before its
// dependents start, so a dependency's outputs are always set by then; one
// that failed has none, and its dependents are not started.
func (r *run) outputsFor(name string) (map[string]any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.outs[name]
	return o, ok
}

func (r *run) setOutputs(name string, o map[string]any) {
	r.mu.Lock()
	r.outs[name] = o
	r.mu.Unlock()
}

func (r *run) current(name string) *state.Resource {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res := r.doc[name]; res != nil {
		return res.Clone()
	}
	return nil
}

func (r *run) put(ctx context.Context, res *state.Resource) error {
	res.UpdatedAt = time.Now().UTC()
	if err := r.e.Store.Put(ctx, res); err != nil {
		return fmt.Errorf("persisting state of %s: %w", res.Name, err)
	}
	r.mu.Lock()
	r.doc[res.Name] = res.Clone()
	r.mu.Unlock()
	return nil
}

func (r *run) forget(ctx context.Context, name string) error {
	if err := r.e.Store.Remove(ctx, name); err != nil {
		return fmt.Errorf("removing %s from state: %w", name, err)
	}
	r.mu.Lock()
	delete(r.doc, name)
	r.mu.Unlock()
	return nil
}

// converge brings one desired resource to VALID.
func (r *run) converge(ctx context.Context, want *plan.Resource, step *plan.Step) (bool, error) {
	cfg, err := r.resolve(ctx, want)
	if err != nil {
		return false, err
	}
	old := r.current(want.Name)
	if old != nil && old.Type != want.Type {
		// The adapter image changed: the old adapter removes what it made.
		if _, err := r.destroyWith(ctx, old); err != nil {
			return false, fmt.Errorf("removing %s with its previous adapter %s: %w", want.Name, old.Type, err)
		}
		old = nil
	}
	call := plan.Call{App: r.in.App, Name: want.Name, Type: want.Type, Config: cfg, Persisted: plan.PersistedOf(old)}
	ans := r.obs.Reuse(want.Name, cfg, protocol.Present)
	if ans == nil {
		r.emit(Event{Resource: want.Name, Phase: PhaseState})
		if ans, err = r.e.Adapters.State(ctx, call, protocol.Present); err != nil {
			return false, err
		}
	}
	if ans.Status == protocol.Valid {
		changed := old == nil || old.Status != state.StatusActive || old.Pending != nil ||
			!plan.SameJSON(old.Config, cfg) || !plan.SameJSON(old.State, ans.State)
		if changed {
			if err := r.put(ctx, activeResource(want, cfg, ans, old)); err != nil {
				return false, err
			}
		}
		r.setOutputs(want.Name, ans.State)
		// Recording a confirmed resource is bookkeeping, not a change.
		return old == nil, nil
	}
	kind := opKind(ans, old)
	final, err := r.runActions(ctx, call, want.Type, want.DependsOn, kind, ans, protocol.Present)
	if err != nil {
		return true, err
	}
	res := activeResource(want, cfg, final, r.current(want.Name))
	if err := r.put(ctx, res); err != nil {
		return true, err
	}
	r.setOutputs(want.Name, final.State)
	return true, nil
}

// runActions records the operation as pending, runs the STALE answer's
// actions in order (persisting identifying attributes as they are reported),
// and asks the state again, which must now be VALID.
func (r *run) runActions(ctx context.Context, call plan.Call, typ string, deps []string, kind state.OpKind, ans *protocol.StateResult, desired string) (*protocol.StateResult, error) {
	res := r.current(call.Name)
	if res == nil {
		res = &state.Resource{Name: call.Name, Type: typ, Status: state.StatusPending, Config: call.Config}
	}
	res.Dependencies = deps
	for _, a := range ans.Actions {
		res.Pending = &state.Operation{ID: state.NewID(), Kind: kind, Action: a.Name, StartedAt: time.Now().UTC(), Holder: r.e.Holder}
		if err := r.put(ctx, res); err != nil {
			return nil, err
		}
		r.emit(Event{Resource: call.Name, Phase: PhaseAction, Message: actionLabel(a)})
		start := time.Now()
		out, err := r.e.Adapters.Action(ctx, call, a, ans.StaleState)
		if out != nil && len(out.Identity) > 0 {
			if res.Identity == nil {
				res.Identity = map[string]any{}
			}
			maps.Copy(res.Identity, out.Identity)
			call.Persisted = plan.PersistedOf(res)
			if perr := r.put(ctx, res); perr != nil && err == nil {
				err = perr
			}
		}
		if err != nil {
			return nil, fmt.Errorf("action %s: %w", a.Name, err)
		}
		r.emit(Event{Resource: call.Name, Phase: PhaseActionDone, Message: actionLabel(a), Duration: time.Since(start), Output: out.Output})
	}
	r.emit(Event{Resource: call.Name, Phase: PhaseVerify})
	final, err := r.e.Adapters.State(ctx, call, desired)
	if err != nil {
		return nil, fmt.Errorf("state after actions: %w", err)
	}
	if final.Status != protocol.Valid {
		return nil, fmt.Errorf("adapter %s answered %s again after its actions ran (it must answer VALID once its actions succeeded): the adapter is broken", typ, final.Status)
	}
	return final, nil
}

// remove carries out a delete or forget step.
func (r *run) remove(ctx context.Context, step *plan.Step) (bool, error) {
	old := r.current(step.Resource)
	if old == nil {
		return false, nil
	}
	if step.Op == plan.Forget {
		return true, r.forget(ctx, step.Resource)
	}
	return r.destroyWith(ctx, old)
}

func (r *run) destroyWith(ctx context.Context, old *state.Resource) (bool, error) {
	caps, err := r.e.Adapters.Describe(ctx, old.Type, old.Name)
	if err != nil {
		return false, err
	}
	if !caps.Destroy {
		return true, r.forget(ctx, old.Name)
	}
	call := plan.Call{App: r.in.App, Name: old.Name, Type: old.Type, Config: old.Config, Persisted: plan.PersistedOf(old)}
	ans := r.obs.Reuse(old.Name, old.Config, protocol.Absent)
	if ans == nil {
		r.emit(Event{Resource: old.Name, Phase: PhaseState})
		if ans, err = r.e.Adapters.State(ctx, call, protocol.Absent); err != nil {
			return false, err
		}
	}
	if ans.Status != protocol.Valid {
		if _, err := r.runActions(ctx, call, old.Type, old.Dependencies, state.OpDelete, ans, protocol.Absent); err != nil {
			return true, err
		}
	}
	return true, r.forget(ctx, old.Name)
}

// resolve substitutes the runtime references of a resource's config from its
// dependencies' outputs, waiting for outputs a dependency does not report yet.
func (r *run) resolve(ctx context.Context, want *plan.Resource) (map[string]any, error) {
	timeout, poll := r.e.OutputTimeout, r.e.OutputPoll
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if poll <= 0 {
		poll = time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		cfg, unknown, err := plan.ResolveConfig(want.Config, r.outputsFor)
		if err != nil {
			return nil, err
		}
		if len(unknown) == 0 {
			return cfg, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("waited %s for %s: the dependency never reported that output", timeout, plan.UnknownText(unknown))
		}
		r.emit(Event{Resource: want.Name, Phase: PhaseWait, Message: "waiting for " + plan.UnknownText(unknown)})
		if err := r.requery(ctx, unknown); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// requery asks each dependency whose output is missing for its state again
// (OAM-style data outputs: an output may appear after the resource is VALID).
func (r *run) requery(ctx context.Context, unknown []expr.Unknown) error {
	asked := map[string]bool{}
	for _, u := range unknown {
		name, _, err := plan.OutputRef(u.Ref)
		if err != nil || asked[name] {
			continue
		}
		asked[name] = true
		dep := r.current(name)
		if dep == nil {
			return fmt.Errorf("%s: %s is not deployed", u.Ref.Text(), name)
		}
		ans, err := r.e.Adapters.State(ctx, plan.Call{App: r.in.App, Name: name, Type: dep.Type, Config: dep.Config, Persisted: plan.PersistedOf(dep)}, protocol.Present)
		if err != nil {
			return fmt.Errorf("asking %s for %s: %w", name, u.Ref.Text(), err)
		}
		if ans.Status == protocol.Valid {
			r.setOutputs(name, ans.State)
		}
	}
	return nil
}

func activeResource(want *plan.Resource, cfg map[string]any, ans *protocol.StateResult, old *state.Resource) *state.Resource {
	res := &state.Resource{Name: want.Name, Type: want.Type, Status: state.StatusActive, Config: cfg, State: ans.State, Dependencies: want.DependsOn}
	if old != nil {
		res.ImageID = old.ImageID
		res.Identity = old.Identity
	}
	if ans.Gcompose != nil && len(ans.Gcompose.Identity) > 0 {
		if res.Identity == nil {
			res.Identity = map[string]any{}
		}
		maps.Copy(res.Identity, ans.Gcompose.Identity)
	}
	return res
}

func opKind(ans *protocol.StateResult, old *state.Resource) state.OpKind {
	if ans.Gcompose != nil && ans.Gcompose.Change != "" {
		return state.OpKind(ans.Gcompose.Change)
	}
	if old == nil {
		return state.OpCreate
	}
	return state.OpUpdate
}

func actionLabel(a protocol.ActionSpec) string {
	if a.Description != "" {
		return a.Name + ": " + a.Description
	}
	return a.Name
}

// FailedError names every resource that failed and why.
type FailedError struct{ Outcomes []*Outcome }

func (e *FailedError) Error() string {
	s := fmt.Sprintf("%d resource(s) failed:", len(e.Outcomes))
	for _, o := range e.Outcomes {
		s += "\n  " + o.Resource + ": " + strings.TrimPrefix(o.Err.Error(), o.Resource+": ")
	}
	return s
}

// IsFailed reports whether err is an apply failure of some resources.
func IsFailed(err error) bool {
	var f *FailedError
	return errors.As(err, &f)
}
