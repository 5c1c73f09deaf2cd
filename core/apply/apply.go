// Package apply is the executor: it carries out a Plan, walking resources in
// dependency order in parallel, resolving runtime references from the
// outputs of what it just applied, and persisting after every action so a
// process killed at any moment loses nothing.
package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/spend"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonvalue"
	"github.com/gcompose/gcompose/protocol"
)

// Persister records resource changes durably before returning.
type Persister interface {
	Put(ctx context.Context, r *state.Resource) error
	// Remove forgets name, keeping what it had cost (spent, nil for
	// nothing) in the state's ledger.
	Remove(ctx context.Context, name string, spent *state.Spent) error
}

// LaterPersister is a Persister that can also record a change without
// waiting until it is durable: PutLater returns once the change is ordered
// after every earlier one and would survive the process being killed, and
// it becomes durable against a crash of the machine with the next Put (a
// crash keeps a prefix of the changes) or Flush. Apply makes durable at
// once only what must be before an adapter is asked to act (the pending
// operation: its ID tags what the action makes); the identity an action
// reports, its outcome and a failure are recorded later, so that neither
// the action's answer nor the next resource waits for an fsync, and Apply
// returns only once they are durable.
type LaterPersister interface {
	Persister
	PutLater(ctx context.Context, r *state.Resource) error
	// Flush returns once every change is durable, or the first error of
	// one that did not become durable.
	Flush(ctx context.Context) error
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
	// Recheck makes apply ask every adapter again instead of acting on the
	// answer the plan was made from: a saved plan is applied later, in
	// another process, and the world may have moved since. Within one run
	// the plan's answers are fresh and asking twice would only cost time.
	// Either way a step whose inputs were unknown at plan time is asked.
	Recheck bool
	// Stop, when done, interrupts the apply as Terraform does: no resource
	// starts its actions any more, while those whose actions are under way
	// finish them (the ctx of Apply bounds them: cancel it with cause
	// ErrAborted to cut them short). Nil: never.
	Stop context.Context
}

// Outcome is what happened to one resource.
type Outcome struct {
	Resource string
	Op       plan.Op
	// Changed is false when the resource turned out to need nothing.
	Changed bool
	// Skipped: never started, because something it depends on failed or
	// the run was interrupted first.
	Skipped  bool
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
	pl   *plan.Plan
	mu   sync.Mutex
	doc  map[string]*state.Resource // current view of the state, updated as we go
	outs map[string]map[string]any  // outputs produced or confirmed in this run
	res  *Result
	// acting are the resources whose actions started: an interrupt lets
	// them finish.
	acting map[string]bool
}

// stopped says whether the run was interrupted.
func (r *run) stopped() bool { return r.e.Stop != nil && r.e.Stop.Err() != nil }

// startActions says whether name may start its actions: yes unless the run
// was interrupted before it did.
func (r *run) startActions(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.acting[name] {
		return nil
	}
	if r.stopped() {
		return notStarted
	}
	r.acting[name] = true
	return nil
}

// notStarted is the outcome of a resource an interrupt kept from starting.
var notStarted = fmt.Errorf("not started: %w", ErrInterrupted)

// Apply carries out pl and nothing else. Each step binds: a resource whose
// adapter now wants a more destructive change than the approved one fails
// with a *plan.Inconsistent error, untouched, and holds back what depends on
// it; the rest applies.
func (e *Executor) Apply(ctx context.Context, pl *plan.Plan) (*Result, error) {
	r := &run{e: e, pl: pl, doc: map[string]*state.Resource{}, outs: map[string]map[string]any{}, res: &Result{Outcomes: map[string]*Outcome{}},
		acting: map[string]bool{}}
	// The walks start nothing new once the run is interrupted; what they
	// started runs on ctx.
	walkCtx, cancelWalk := context.WithCancelCause(ctx)
	defer cancelWalk(nil)
	if e.Stop != nil {
		defer context.AfterFunc(e.Stop, func() { cancelWalk(ErrInterrupted) })()
	}
	if pl.Prior != nil {
		for n, res := range pl.Prior.Resources {
			r.doc[n] = res.Clone()
		}
	}
	if o, ok := plan.AppOutputsOf(pl.App, pl.Lineage); ok {
		r.outs[plan.AppOutputs] = o
	}
	var removals, converges []*plan.Step
	for _, s := range pl.Steps {
		if pl.Mode == plan.Destroy || s.Remove {
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
		errs := e.Walk(walkCtx, deps, true, func(_ context.Context, name string) error {
			s := pl.Step(name)
			if s.Op == plan.Failed {
				return r.failed(s)
			}
			return r.timed(ctx, name, s.Op, func() (bool, error) { return r.remove(ctx, s) })
		})
		r.collect(errs)
	}
	if len(converges) > 0 && pl.Mode == plan.Deploy {
		deps := map[string][]string{}
		for _, s := range converges {
			deps[s.Resource] = s.DependsOn
		}
		errs := e.Walk(walkCtx, deps, false, func(_ context.Context, name string) error {
			s := pl.Step(name)
			if s.Op == plan.Failed {
				return r.failed(s)
			}
			return r.timed(ctx, name, s.Op, func() (bool, error) { return r.converge(ctx, s) })
		})
		r.collect(errs)
	}
	// What was recorded without waiting is durable before the run says
	// anything happened.
	var flushErr error
	if lp, ok := e.Store.(LaterPersister); ok {
		if err := lp.Flush(context.WithoutCancel(ctx)); err != nil {
			flushErr = fmt.Errorf("persisting state: %w", err)
		}
	}
	if r.stopped() {
		return r.res, errors.Join(&InterruptedError{Result: r.res, Aborted: errors.Is(context.Cause(ctx), ErrAborted)}, flushErr)
	}
	if failed := r.res.Failed(); len(failed) > 0 {
		return r.res, errors.Join(&FailedError{Outcomes: failed}, flushErr)
	}
	return r.res, flushErr
}

// failed records a step that could not be planned as failed, so that what
// depends on it is not started.
func (r *run) failed(s *plan.Step) error {
	// The outcome names the resource already: its error says the rest. The
	// planner's error stays in the chain (errors.Is/As), not parsed back.
	var err error = &stepError{msg: s.ErrorReason(), err: s.Err}
	r.mu.Lock()
	r.res.Outcomes[s.Resource] = &Outcome{Resource: s.Resource, Op: s.Op, Err: err}
	r.mu.Unlock()
	return err
}

func (r *run) timed(ctx context.Context, name string, op plan.Op, fn func() (bool, error)) error {
	start := time.Now()
	changed, err := fn()
	if err != nil && errors.Is(context.Cause(ctx), ErrAborted) && !errors.Is(err, ErrInterrupted) {
		// Cut short by an abort, not failed: say so, and what stays.
		err = r.aborted(name, err)
	}
	o := &Outcome{Resource: name, Op: op, Changed: changed, Err: err, Duration: time.Since(start)}
	r.mu.Lock()
	r.res.Outcomes[name] = o
	r.mu.Unlock()
	switch {
	case errors.Is(err, ErrInterrupted):
		r.emit(Event{Resource: name, Phase: PhaseInterrupted, Message: "not started", Duration: o.Duration})
	case errors.Is(err, ErrAborted):
		r.emit(Event{Resource: name, Phase: PhaseInterrupted, Message: err.Error(), Duration: o.Duration})
	case err != nil:
		r.emit(Event{Resource: name, Phase: PhaseFailed, Message: err.Error(), Duration: o.Duration})
	case changed:
		r.emit(Event{Resource: name, Phase: PhaseDone, Message: string(op), Duration: o.Duration})
	}
	return err
}

// collect records outcomes for resources the walk skipped because
// something they depend on failed, or because the run was interrupted.
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
			r.res.Outcomes[name] = &Outcome{Resource: name, Op: op, Err: err, Skipped: true}
			if !errors.Is(err, ErrInterrupted) {
				r.emit(Event{Resource: name, Phase: PhaseSkipped, Message: err.Error()})
			}
		}
	}
}

// aborted describes an action cut short by an abort: what stays pending.
func (r *run) aborted(name string, err error) error {
	res := r.current(name)
	if res == nil || res.Pending == nil {
		return fmt.Errorf("%w: %v", ErrAborted, err)
	}
	return &AbortedError{Operation: *res.Pending, Err: err}
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

// lineage is the state's lineage, sent on every call.
func (r *run) lineage() string { return r.pl.Lineage }

func (r *run) current(name string) *state.Resource {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res := r.doc[name]; res != nil {
		return res.Clone()
	}
	return nil
}

func (r *run) put(ctx context.Context, res *state.Resource) error {
	return r.write(ctx, res, true)
}

// record is put, not waiting until the change is durable when the store
// can do that (LaterPersister): for what no adapter is asked to act on.
func (r *run) record(ctx context.Context, res *state.Resource) error {
	return r.write(ctx, res, false)
}

func (r *run) write(ctx context.Context, res *state.Resource, durable bool) error {
	res.UpdatedAt = time.Now().UTC()
	var err error
	if lp, ok := r.e.Store.(LaterPersister); ok && !durable {
		err = lp.PutLater(ctx, res)
	} else {
		err = r.e.Store.Put(ctx, res)
	}
	if err != nil {
		return fmt.Errorf("persisting state of %s: %w", res.Name, err)
	}
	r.mu.Lock()
	r.doc[res.Name] = res.Clone()
	r.mu.Unlock()
	return nil
}

func (r *run) forget(ctx context.Context, name string, spent *state.Spent) error {
	if err := r.e.Store.Remove(ctx, name, spent); err != nil {
		return fmt.Errorf("removing %s from state: %w", name, err)
	}
	r.mu.Lock()
	delete(r.doc, name)
	r.mu.Unlock()
	return nil
}

// converge brings one desired resource to VALID, doing no more than its
// approved step.
func (r *run) converge(ctx context.Context, step *plan.Step) (bool, error) {
	want := &plan.Resource{Name: step.Resource, Type: step.Type, Config: step.Config, DependsOn: step.DependsOn}
	cfg, err := r.resolve(ctx, want)
	if err != nil {
		return false, err
	}
	old := r.current(want.Name)
	// What the adapter's answer is held to: the approved step, or, once
	// apply removed what existed (a new adapter image, --replace), the
	// create that is the other half of the approved rebuild.
	expect := step
	if old != nil && old.Type != want.Type {
		if step.Op != plan.Rebuild {
			return false, &plan.Inconsistent{Resource: want.Name, Approved: step.Op, Actual: plan.Rebuild,
				Reason: fmt.Sprintf("its adapter image is now %s, not %s", old.Type, want.Type)}
		}
		// The adapter image changed: the old adapter removes what it made.
		if _, err := r.destroyWith(ctx, old, nil); err != nil {
			return false, fmt.Errorf("removing %s with its previous adapter %s: %w", want.Name, old.Type, err)
		}
		old, expect = nil, recreate(step)
	}
	if step.Replace && old != nil {
		// A rebuild asked for although the adapter is content: what
		// exists is removed, then made anew.
		if _, err := r.destroyWith(ctx, old, nil); err != nil {
			return true, fmt.Errorf("removing %s to replace it: %w", want.Name, err)
		}
		old, expect = nil, recreate(step)
	}
	call := plan.Call{App: r.pl.App, Lineage: r.lineage(), Name: want.Name, AdapterName: plan.AdapterNameOf(want.Name, old), Type: want.Type, Config: cfg, Persisted: plan.PersistedOf(old),
		PlannedCost: step.Cost, CreateBeforeDestroy: step.CreateBeforeDestroy}
	ans := r.approvedAnswer(step, cfg, old)
	if ans == nil {
		r.emit(Event{Resource: want.Name, Phase: PhaseState})
		if ans, err = r.e.Adapters.State(ctx, call, protocol.Present); err != nil {
			return false, err
		}
	}
	if err := plan.Refused(want.Name, want.Type, ans); err != nil {
		return false, err
	}
	if err := expect.Consistent(ans, old); err != nil {
		return false, err
	}
	if ans.Status == protocol.Valid {
		changed := old == nil || old.Status != state.StatusActive || old.Pending != nil ||
			!jsonvalue.Equal(old.Config, cfg) || !jsonvalue.Equal(old.State, ans.State)
		if changed {
			if err := r.record(ctx, activeResource(want, cfg, ans, old)); err != nil {
				return false, err
			}
		}
		r.setOutputs(want.Name, ans.State)
		// A resource found as wanted still keeps what its step planned
		// (a replaced one, say, whose create an adapter adopted).
		if err := step.CheckPlanned(ans.State); err != nil {
			return old == nil, err
		}
		// Recording a confirmed resource is bookkeeping, not a change.
		return old == nil, nil
	}
	kind := opKind(ans, old)
	final, acted, err := r.runActions(ctx, call, want.Type, want.DependsOn, kind, ans, protocol.Present)
	if err != nil {
		return true, err
	}
	// acted is the record as the actions left it, with the identity that
	// came with the last action's answer: recorded here, in the outcome's
	// line.
	res := activeResource(want, cfg, final, acted)
	if kind == state.OpCreate || kind == state.OpRebuild {
		res.CreatedAt = time.Now().UTC()
	}
	if err := r.record(ctx, res); err != nil {
		return true, err
	}
	r.setOutputs(want.Name, final.State)
	// Dependents were planned with the outputs the adapter planned: ending
	// with others fails the resource (recorded as it is), which holds them
	// back.
	if err := step.CheckPlanned(final.State); err != nil {
		return true, err
	}
	return true, nil
}

// recreate is what the create after apply removed a resource to rebuild it
// is held to: a create, whose actions the plan did not ask.
func recreate(step *plan.Step) *plan.Step {
	c := *step
	c.Op, c.Answer, c.Actions, c.Forces = plan.Create, nil, nil, nil
	return &c
}

// approvedAnswer is the answer the step was planned from, when it still
// holds: asked for this very config about the record that is still there,
// in this run (not Recheck). Otherwise the adapter is asked again.
func (r *run) approvedAnswer(step *plan.Step, cfg map[string]any, old *state.Resource) *protocol.StateResult {
	if r.e.Recheck || step.Answer == nil || step.KnownAfterApply || !jsonvalue.Equal(step.After, cfg) {
		return nil
	}
	if prior := r.priorOf(step.Resource); (prior == nil) != (old == nil) {
		return nil
	}
	return step.Answer
}

// priorOf is the record the plan was made against.
func (r *run) priorOf(name string) *state.Resource {
	if r.pl.Prior == nil {
		return nil
	}
	return r.pl.Prior.Resources[name]
}

// runActions records the operation as pending, runs the STALE answer's
// actions in order (persisting identifying attributes as they are reported),
// and asks the state again, which must now be VALID. An interrupted run
// starts no new resource's actions; a resource whose actions started
// finishes them. It returns the final state and the record as the actions
// left it: identity that came with the last action's answer (not reported
// while it ran) is in that record but not yet in the state, for the caller
// to record with the outcome, in the same journal line.
func (r *run) runActions(ctx context.Context, call plan.Call, typ string, deps []string, kind state.OpKind, ans *protocol.StateResult, desired string) (*protocol.StateResult, *state.Resource, error) {
	if err := r.startActions(call.Name); err != nil {
		return nil, nil, err
	}
	res := r.current(call.Name)
	if res == nil {
		res = &state.Resource{Name: call.Name, Type: typ, Status: state.StatusPending, Config: call.Config}
	}
	res.AdapterName = call.AdapterName
	res.Dependencies = deps
	// The state the last action ended with, when its adapter answers it
	// (protocol extension action_state): then no verifying call is made.
	var answered *protocol.StateResult
	for i, a := range ans.Actions {
		res.Pending = &state.Operation{ID: state.NewID(), Kind: kind, Action: a.Name, StartedAt: time.Now().UTC(), Holder: r.e.Holder}
		if err := r.put(ctx, res); err != nil {
			return nil, nil, err
		}
		// The adapter gets the operation only once it is durable: its ID is
		// the key the adapter tags what it creates with.
		act := call
		act.Operation = plan.OperationOf(res.Pending)
		act.Persisted = actionPersisted(res)
		if i == len(ans.Actions)-1 {
			act.AnswerState = desired
		}
		// Identity reported while the action runs is persisted at once:
		// a kill later in the action must not lose what it made.
		var perr error
		remember := func(identity map[string]any) {
			changed := mergeIdentity(res, identity)
			if len(changed) == 0 {
				return
			}
			if err := r.record(ctx, res); err != nil && perr == nil {
				perr = err
			}
			r.emit(Event{Resource: call.Name, Phase: PhaseIdentity, Message: identityText(changed)})
		}
		act.ReportIdentity = remember
		r.emit(Event{Resource: call.Name, Phase: PhaseAction, Message: actionLabel(a)})
		start := time.Now()
		out, err := r.e.Adapters.Action(ctx, act, a, ans.StaleState)
		if perr != nil && err == nil {
			err = perr
		}
		// What was not streamed (or all of it) came with the answer. A
		// failure's record or the outcome's holds it; only when another
		// call to the adapter comes first (a next action, the verifying
		// state call) is it recorded now, so that a kill during that call
		// keeps it.
		var withAnswer []string
		if out != nil {
			withAnswer = mergeIdentity(res, out.Identity)
		}
		if len(withAnswer) > 0 {
			r.emit(Event{Resource: call.Name, Phase: PhaseIdentity, Message: identityText(withAnswer)})
		}
		if err != nil {
			return nil, nil, r.recordFailure(ctx, res, fmt.Errorf("action %s: %w", a.Name, err))
		}
		r.emit(Event{Resource: call.Name, Phase: PhaseActionDone, Message: actionLabel(a), Duration: time.Since(start), Output: out.Output})
		answered = out.State
		if len(withAnswer) > 0 && (i < len(ans.Actions)-1 || answered == nil) {
			if err := r.record(ctx, res); err != nil {
				return nil, nil, err
			}
		}
	}
	final := answered
	if final == nil {
		// The verifying state call sees the record as it is: the last
		// action's operation still pending until this answer confirms it.
		// (An action that answered was asked with that same record.)
		call.Persisted = plan.PersistedOf(res)
		r.emit(Event{Resource: call.Name, Phase: PhaseVerify})
		var err error
		if final, err = r.e.Adapters.State(ctx, call, desired); err != nil {
			return nil, nil, r.recordFailure(ctx, res, fmt.Errorf("state after actions: %w", err))
		}
	}
	if final.Status != protocol.Valid {
		return nil, nil, r.recordFailure(ctx, res, fmt.Errorf("adapter %s answered %s again after its actions ran (it must answer VALID once its actions succeeded): the adapter is broken", typ, final.Status))
	}
	return final, res, nil
}

// recordFailure says in the record of a resource whose step failed after
// its operation was recorded (an action failed, or the state after it
// could not be confirmed) that it failed and why, unless the run was cut
// short: the next run, ps and state show report a failure, not an
// interruption, and never the resource's earlier status as if all were
// well. Still pending: what it did is unknown.
func (r *run) recordFailure(ctx context.Context, res *state.Resource, err error) error {
	if ctx.Err() != nil || res.Pending == nil {
		return err
	}
	now := time.Now().UTC()
	res.Pending.Failed, res.Pending.FailedAt = oneLine(err.Error(), 500), &now
	if perr := r.record(ctx, res); perr != nil {
		return fmt.Errorf("%w (and recording the failure: %v)", err, perr)
	}
	return err
}

// mergeIdentity adds reported attributes to the resource's identity and
// returns the names of those it added or changed, sorted.
func mergeIdentity(res *state.Resource, identity map[string]any) []string {
	var changed []string
	for k, v := range identity {
		if old, ok := res.Identity[k]; ok && jsonvalue.Equal(old, v) {
			continue
		}
		if res.Identity == nil {
			res.Identity = map[string]any{}
		}
		res.Identity[k] = v
		changed = append(changed, k)
	}
	sort.Strings(changed)
	return changed
}

// identityText names the attributes an identity report added or changed,
// for the progress event (values may be long, and are in the state). Not
// the whole report: adapters resend their whole identity each time they
// learn one more thing of it (a Golem service: the agreement, then the
// address, then the activity), and the same list on every line said
// nothing new.
func identityText(changed []string) string {
	return "recorded " + strings.Join(changed, ", ")
}

// actionPersisted is the record an action call is sent: its pending
// operation is the call's own (RequestExt.Operation), so it is not repeated.
func actionPersisted(res *state.Resource) *protocol.Persisted {
	p := plan.PersistedOf(res)
	p.Pending = nil
	return p
}

// remove carries out a delete or forget step.
func (r *run) remove(ctx context.Context, step *plan.Step) (bool, error) {
	if step.Leftover != nil {
		return r.removeLeftover(ctx, step)
	}
	old := r.current(step.Resource)
	if old == nil {
		return false, nil
	}
	if step.Op == plan.Forget {
		return true, r.forget(ctx, step.Resource, spentOf(r.current(step.Resource)))
	}
	return r.destroyWith(ctx, old, step)
}

// removeLeftover asks the adapter's sweep to terminate the one leftover
// the step deletes (protocol SweepRequest.Only). An adapter that
// terminates more than it was asked is reported, loudly.
func (r *run) removeLeftover(ctx context.Context, step *plan.Step) (bool, error) {
	if err := r.startActions(step.Resource); err != nil {
		return false, err
	}
	l := step.Leftover
	var known []protocol.KnownResource
	r.mu.Lock()
	for _, res := range r.doc {
		if res.Type == step.Type {
			known = append(known, protocol.KnownResource{Name: res.CalledAs(), Identity: res.Identity, Pending: plan.OperationOf(res.Pending)})
		}
	}
	r.mu.Unlock()
	sort.Slice(known, func(a, b int) bool { return known[a].Name < known[b].Name })
	r.emit(Event{Resource: step.Resource, Phase: PhaseAction, Message: "sweep: terminate " + l.Kind + " " + l.ID})
	res, err := r.e.Adapters.Sweep(ctx, plan.SweepCall{App: r.pl.App, Lineage: r.lineage(), Type: step.Type, Resource: l.Via, Known: known, Terminate: true, Only: []string{l.ID}})
	if err != nil {
		return false, fmt.Errorf("terminating leftover %s %s with adapter %s: %w", l.Kind, l.ID, step.Type, err)
	}
	found := false
	for _, o := range res.Found {
		switch {
		case o.ID == l.ID && o.Kind == l.Kind:
			found = true
			if o.Action != protocol.OrphanTerminated {
				return false, fmt.Errorf("adapter %s did not terminate leftover %s %s when asked to: it reports it %s", step.Type, l.Kind, l.ID, o.Action)
			}
		case o.Action == protocol.OrphanTerminated:
			r.emit(Event{Resource: step.Resource, Phase: PhaseSwept, Message: fmt.Sprintf("adapter %s also terminated %s %s, which the plan did not list (it ignores sweep.only)", step.Type, o.Kind, o.ID)})
		}
	}
	// Not found: gone since the plan was made, as the plan wanted.
	return found, nil
}

// destroyWith removes what old's adapter made. step is the approved delete
// (nil for the removal half of an approved rebuild).
func (r *run) destroyWith(ctx context.Context, old *state.Resource, step *plan.Step) (bool, error) {
	caps, err := r.e.Adapters.Describe(ctx, old.Type, old.Name)
	if err != nil {
		return false, err
	}
	if !caps.Destroy {
		return true, r.forget(ctx, old.Name, old.Spent)
	}
	call := plan.Call{App: r.pl.App, Lineage: r.lineage(), Name: old.Name, AdapterName: plan.AdapterNameOf(old.Name, old), Type: old.Type, Config: old.Config, Persisted: plan.PersistedOf(old)}
	var ans *protocol.StateResult
	if step != nil && !r.e.Recheck {
		ans = step.Answer
	}
	if ans == nil {
		r.emit(Event{Resource: old.Name, Phase: PhaseState})
		if ans, err = r.e.Adapters.State(ctx, call, protocol.Absent); err != nil {
			return false, err
		}
	}
	if ans.Status != protocol.Valid {
		if step != nil {
			if err := step.Consistent(ans, old); err != nil {
				return false, err
			}
		}
		_, acted, err := r.runActions(ctx, call, old.Type, old.Dependencies, state.OpDelete, ans, protocol.Absent)
		if err != nil {
			return true, err
		}
		// Identity that came with the last answer is recorded before the
		// record goes: should forgetting it fail, the record still names
		// everything the actions reported.
		if cur := r.current(old.Name); cur == nil || !jsonvalue.Equal(acted.Identity, cur.Identity) {
			if err := r.record(ctx, acted); err != nil {
				return true, err
			}
		}
	}
	// What the removal's state call reported spent is the latest figure
	// the ledger can keep; else the one the state recorded.
	sp := SpentOf(ans, time.Now())
	if sp == nil {
		sp = old.Spent
	}
	return true, r.forget(ctx, old.Name, sp)
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
		if r.stopped() {
			return nil, notStarted
		}
		if err := r.requery(ctx, unknown); err != nil {
			return nil, err
		}
		var stop <-chan struct{}
		if r.e.Stop != nil {
			stop = r.e.Stop.Done()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stop:
			return nil, notStarted
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
		ans, err := r.e.Adapters.State(ctx, plan.Call{App: r.pl.App, Lineage: r.lineage(), Name: name, AdapterName: plan.AdapterNameOf(name, dep), Type: dep.Type, Config: dep.Config, Persisted: plan.PersistedOf(dep)}, protocol.Present)
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
	res := &state.Resource{Name: want.Name, AdapterName: plan.AdapterNameOf(want.Name, old), Type: want.Type, Status: state.StatusActive, Config: cfg, State: ans.State, Dependencies: want.DependsOn}
	if old != nil {
		res.ImageID = old.ImageID
		res.Identity = old.Identity
		res.CreatedAt = old.CreatedAt
	}
	if ans.Gcompose != nil {
		mergeIdentity(res, ans.Gcompose.Identity)
	}
	if sp := SpentOf(ans, time.Now()); sp != nil {
		res.Spent = sp
	} else if old != nil {
		res.Spent = old.Spent
	}
	return res
}

// spentOf is what the state recorded res had cost, nil for none.
func spentOf(res *state.Resource) *state.Spent {
	if res == nil {
		return nil
	}
	return res.Spent
}

// SpentOf is what a state answer reports its resource has cost, as the
// state records it; nil when it reports nothing (the adapter client keeps
// spent only from adapters that declared it).
func SpentOf(ans *protocol.StateResult, at time.Time) *state.Spent {
	if ans == nil || ans.Gcompose == nil || ans.Gcompose.Spent == nil {
		return nil
	}
	return spend.FromProtocol(ans.Gcompose.Spent, at)
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

// oneLine is s with its lines joined by "; " (an adapter's stderr tail
// says why on the lines after the first), at most n bytes.
func oneLine(s string, n int) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	s = strings.Join(parts, "; ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
