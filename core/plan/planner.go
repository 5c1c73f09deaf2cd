package plan

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonvalue"
	"github.com/gcompose/gcompose/protocol"
)

// Input is everything a plan is computed from.
type Input struct {
	App  string
	Mode Mode
	// Desired resources by name; ignored by Destroy and Refresh.
	Desired map[string]*Resource
	// State is the persisted document (never nil: an empty one for a new app).
	State *state.Document
	// Targets limit the plan to these addresses (Matches) and what they
	// need (deploy) or what depends on them (destroy).
	Targets []string
	// Replace forces a rebuild of these deployed resources.
	Replace []string
	// Outputs is the descriptor's outputs section: a reference in it to an
	// output that a deployed, unchanged resource does not report fails
	// the plan.
	Outputs map[string]any
	// Leftovers are objects sweeps found that earlier runs made for this
	// state (its lineage) and no state names, by adapter type: each
	// becomes a delete step, carried out (first) only once the plan is
	// approved. A desired resource that its adapter would adopt from a
	// leftover is planned as made anew after the deletion.
	Leftovers map[string][]Leftover
}

// Walk runs fn over a set of names in dependency order: a name starts once
// every name it depends on finished without error (reverse: once every name
// depending on it did). It returns each name's error; names whose
// dependencies failed get an error saying so. core/graph provides it.
type Walk func(ctx context.Context, deps map[string][]string, reverse bool, fn func(ctx context.Context, name string) error) map[string]error

// Planner is the step generator: it asks adapters what exists and decides
// what each resource needs. It changes nothing.
type Planner struct {
	Adapters Adapters
	Walk     Walk
}

// Plan computes the plan. Adapter errors for one resource do not stop the
// others: they are all returned, joined, with the resources they concern.
func (p *Planner) Plan(ctx context.Context, in Input) (*Plan, error) {
	doc := in.State
	if doc == nil {
		doc = state.NewDocument(in.App)
	}
	pl := &Plan{FormatVersion: FormatVersion, App: in.App, Mode: in.Mode, Lineage: doc.Lineage, Serial: doc.Serial, Prior: doc}
	if in.Mode == Deploy {
		pl.Inputs = InputsHash(in.Desired)
	}
	var mu sync.Mutex
	steps := map[string]*Step{}
	addStep := func(s *Step) {
		mu.Lock()
		steps[s.Resource] = s
		pl.Steps = append(pl.Steps, s)
		mu.Unlock()
	}
	stepOf := func(name string) *Step {
		mu.Lock()
		defer mu.Unlock()
		return steps[name]
	}

	desired := in.Desired
	if in.Mode != Deploy {
		desired = nil
	}
	deps := map[string][]string{}
	for name, r := range desired {
		deps[name] = append([]string(nil), r.DependsOn...)
	}
	for name, r := range doc.Resources {
		if _, ok := desired[name]; !ok {
			deps[name] = keepKnown(r.Dependencies, doc.Resources)
		}
	}
	all := make([]string, 0, len(deps))
	for n := range deps {
		all = append(all, n)
	}
	sort.Strings(all)
	// A --replace or --target that names nothing is a mistake in the
	// command, not a plan with no changes: no plan at all.
	replace, err := matchAll("--replace", in.Replace, all)
	if err != nil {
		return nil, err
	}
	if deps, err = scope(deps, in.Targets, in.Mode); err != nil {
		return nil, err
	}
	pl.Targets = in.Targets

	// A resource's outputs are trusted for planning its dependents unless the
	// resource is about to change: then a dependent that reads them is shown
	// as a knock-on whose inputs are known only after apply, except for the
	// outputs its adapter planned (planned, below). An update may leave
	// outputs as they were; apply finds out and skips the dependent.
	outs := func(name string) (map[string]any, bool) {
		if name == AppOutputs {
			return AppOutputsOf(in.App, doc.Lineage)
		}
		s := stepOf(name)
		if s != nil && (s.Op.Changes() || s.KnownAfterApply) {
			return nil, false
		}
		if s != nil && s.Answer != nil && s.Answer.Status == protocol.Valid {
			return s.Answer.State, true
		}
		if r := doc.Resources[name]; r != nil && r.Status == state.StatusActive {
			return r.State, true
		}
		return nil, false
	}

	// What a resource about to change will output that its adapter knows
	// now: a dependent reading only that is planned with its value, not as
	// a knock-on. A step whose own inputs were unknown was asked with
	// ${...} text for them, so what it planned may hang on them: not used.
	planned := func(name string) (map[string]any, []string) {
		s := stepOf(name)
		if s == nil || s.KnownAfterApply || s.Remove || !s.Op.Changes() {
			return nil, nil
		}
		return s.Planned, s.Unknown
	}

	app := appRef{name: in.App, lineage: doc.Lineage}
	old := func(name string) *state.Resource { return doc.Resources[name] }
	visit := func(ctx context.Context, name string) error {
		var s *Step
		var err error
		if r, ok := desired[name]; ok {
			s, err = p.planPresent(ctx, app, r, doc.Resources[name], outs, planned, p.declared(ctx, desired, doc))
		} else {
			s, err = p.planAbsent(ctx, app, name, doc.Resources[name], in.Mode)
		}
		if err == nil && s != nil && s.Op == Create && old(name) == nil && s.Answer != nil && s.Answer.Status == protocol.Valid && leftoverFor(in.Leftovers, s) {
			// Its adapter found the leftover about to be deleted: made
			// anew after that, asked again then.
			s.Answer, s.Actions = nil, nil
			s.Reason = "created anew once its leftover is deleted"
		}
		if err == nil && s != nil {
			if replace[name] && in.Mode == Deploy {
				replaceStep(s, doc.Resources[name])
				// A new adapter image was asked already (planPresent).
				if s.Replace && doc.Resources[name].Type == s.Type {
					p.planReplaced(ctx, app, s)
				}
			}
			// Protection is read from the descriptor also on destroy.
			err = guard(s, in.Desired[name])
		}
		if err != nil {
			err = Named(name, err)
			if s == nil {
				s = bareStep(name, desired[name], doc.Resources[name])
			}
			s.Op, s.Error, s.Err = Failed, err.Error(), err
		}
		if s != nil {
			addStep(s)
		}
		return err
	}
	errs := p.Walk(ctx, deps, in.Mode == Destroy, visit)
	if in.Mode == Deploy && len(in.Outputs) > 0 {
		exists := func(name string) bool {
			return name == AppOutputs || desired[name] != nil || doc.Resources[name] != nil
		}
		if err := refsExist(in.Outputs, exists); err != nil {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[OutputsSection] = err
		} else if _, _, err := resolveStrict(in.Outputs, outs, p.declared(ctx, desired, doc), planned); err != nil {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[OutputsSection] = err
		}
	}
	// What the walk never reached (a dependency failed to plan) cannot be
	// planned either; it still gets a step, so apply and the output say why.
	for name, err := range errs {
		if err != nil && stepOf(name) == nil && name != OutputsSection {
			s := bareStep(name, desired[name], doc.Resources[name])
			s.Op, s.Err = Failed, Named(name, err)
			s.Error = s.Err.Error()
			addStep(s)
		}
	}
	if in.Mode == Deploy || in.Mode == Destroy {
		for typ, ls := range in.Leftovers {
			for _, l := range ls {
				addStep(leftoverStep(typ, l))
			}
		}
	}
	pl.finish()
	return pl, joinErrors(errs)
}

// leftoverFor says whether a leftover of s's adapter type was made for s
// (by the name its adapter receives).
func leftoverFor(ls map[string][]Leftover, s *Step) bool {
	for _, l := range ls[s.Type] {
		if l.Resource != "" && l.Resource == AdapterNameOf(s.Resource, nil) {
			return true
		}
	}
	return false
}

// OutputsSection names the descriptor's outputs in plan errors.
const OutputsSection = "outputs"

// bareStep is the step of a resource that could not be planned: enough for
// apply to know which walk it belongs to and what it holds back.
func bareStep(name string, want *Resource, old *state.Resource) *Step {
	s := &Step{Resource: name}
	if want != nil {
		s.Type, s.DependsOn, s.Config = want.Type, want.DependsOn, want.Config
	} else {
		s.Remove = true
		if old != nil {
			s.Type, s.DependsOn = old.Type, old.Dependencies
		}
	}
	return s
}

// estimate asks an adapter that can estimate costs what a resource it is
// about to create will cost (nil when it cannot say), also when its inputs
// are known only after apply: a first plan then shows what the app will
// cost before anything exists.
//
// An estimate answer that refuses (protocol.StateExt.Refuse) fails the
// step: what the adapter already knows cannot succeed is refused at plan
// time, also before the resource's inputs are known. The adapter's error is
// returned too: for a resource whose inputs are known only after apply it
// is the only call the plan makes, and what it fails on (a golem-service's
// image tag the registry does not know) would fail the create after its
// dependencies were made.
func (p *Planner) estimate(ctx context.Context, app appRef, r *Resource, cfg map[string]any, old *state.Resource) (*protocol.Cost, error) {
	caps, err := p.Adapters.Describe(ctx, r.Type, r.Name)
	if err != nil || !caps.Estimate {
		return nil, nil
	}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: r.Name, AdapterName: AdapterNameOf(r.Name, old), Type: r.Type, Config: cfg, Persisted: PersistedOf(old), Estimate: true}, protocol.Present)
	if err != nil {
		return nil, err
	}
	if ans.Gcompose == nil {
		return nil, nil
	}
	return ans.Gcompose.Cost, Refused(r.Name, r.Type, ans)
}

// RefusedError is a resource whose adapter said at plan time that the
// change it needs cannot succeed (protocol.StateExt.Refuse): the plan
// fails, and deploy refuses before any action.
type RefusedError struct {
	Resource string
	Type     string
	Message  string
}

func (e *RefusedError) Error() string { return e.Resource + ": " + e.Reason() }

// Reason is the refusal without the resource's address.
func (e *RefusedError) Reason() string {
	return fmt.Sprintf("refused by its adapter %s: %s", e.Type, e.Message)
}

// ResourceAddress is the resource refused.
func (e *RefusedError) ResourceAddress() string { return e.Resource }

// Refused is the *RefusedError of an answer that refuses, else nil.
func Refused(name, typ string, ans *protocol.StateResult) error {
	if ans == nil || ans.Gcompose == nil || ans.Gcompose.Refuse == nil {
		return nil
	}
	return &RefusedError{Resource: name, Type: typ, Message: ans.Gcompose.Refuse.Message}
}

func keepKnown(names []string, known map[string]*state.Resource) []string {
	var out []string
	for _, n := range names {
		if _, ok := known[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// appRef is what every call says of the application: its name and its
// state's lineage.
type appRef struct{ name, lineage string }

func (p *Planner) planPresent(ctx context.Context, app appRef, r *Resource, old *state.Resource, outs Outputs, planned Planned, declared Declared) (*Step, error) {
	s := &Step{Resource: r.Name, Type: r.Type, DependsOn: r.DependsOn, Config: r.Config}
	if old != nil {
		s.Before = old.Config
	}
	cfg, unknown, err := resolveStrict(r.Config, outs, declared, planned)
	if err != nil {
		return nil, err
	}
	s.After = cfg
	if old != nil && old.Type != r.Type {
		s.Op, s.Reason = Rebuild, fmt.Sprintf("adapter image changed from %s to %s", old.Type, r.Type)
		s.Forces = []string{"type"}
		if len(unknown) == 0 {
			p.planReplaced(ctx, app, s)
		}
		return s, nil
	}
	if len(unknown) > 0 {
		s.KnownAfterApply = true
		s.Reason = "inputs known after apply: " + UnknownText(unknown)
		if old == nil {
			s.Op = Create
			s.Cost, err = p.estimate(ctx, app, r, cfg, old)
			return s, err
		}
		return p.planKnockOn(ctx, app, s, old)
	}
	caps, err := p.Adapters.Describe(ctx, r.Type, r.Name)
	if err != nil {
		return s, err
	}
	cbd := r.CreateBeforeDestroy && caps.CreateBeforeDestroy
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: r.Name, AdapterName: AdapterNameOf(r.Name, old), Type: r.Type, Config: cfg, Persisted: PersistedOf(old), CreateBeforeDestroy: cbd}, protocol.Present)
	if err != nil {
		return s, err
	}
	s.CreateBeforeDestroy = cbd
	s.Answer = ans
	if err := Refused(r.Name, r.Type, ans); err != nil {
		return s, err
	}
	if ext := ans.Gcompose; ext != nil {
		s.Cost = ext.Cost
		if s.Cost == nil && ans.Status == protocol.Stale && (ext.Change == protocol.ChangeCreate || ext.Change == protocol.ChangeRebuild) {
			// Asked apart, so that the state calls of apply, which need no
			// estimate, do not pay for one.
			// Its state call answered: a refusal fails the step, any other
			// failure of the estimate only leaves the cost unsaid.
			cost, err := p.estimate(ctx, app, r, cfg, old)
			if refused := (*RefusedError)(nil); errors.As(err, &refused) {
				return s, err
			}
			s.Cost = cost
		}
	}
	switch ans.Status {
	case protocol.Valid:
		s.Op = NoOp
		if old == nil {
			s.Reason = "exists already: adopted"
			s.Op = Create // nothing to run, but the state gains a resource
			s.Actions = nil
		} else if old.Pending != nil {
			s.Reason = old.Pending.Describe() + " found complete"
		}
	default:
		fillStale(s, ans, old)
	}
	return s, nil
}

// planReplaced asks the adapter of a resource that apply will remove and
// create anew (--replace, or a new adapter image) what that create will
// leave known now, so that what reads it is planned with those values, as
// for a rebuild the adapter asked for itself. After the removal apply asks
// the state call with no persisted record; this question carries none
// either, and says replace (protocol RequestExt.Replace), since the
// adapter may still find what exists by name. Only a STALE answer's
// planned and unknown are taken; an adapter that does not speak gcompose,
// fails, or answers VALID leaves the outputs known after apply, as before.
// What the step planned from the answer about what exists is dropped:
// the create after the removal does not promise it.
func (p *Planner) planReplaced(ctx context.Context, app appRef, s *Step) {
	s.Planned, s.Unknown = nil, nil
	if s.KnownAfterApply {
		return
	}
	caps, err := p.Adapters.Describe(ctx, s.Type, s.Resource)
	if err != nil || !caps.Destroy {
		return
	}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: s.Resource, AdapterName: AdapterNameOf(s.Resource, nil), Type: s.Type, Config: s.After, Replace: true}, protocol.Present)
	if err != nil || ans.Status != protocol.Stale || ans.Gcompose == nil {
		return
	}
	s.Planned, s.Unknown = ans.Gcompose.Planned, ans.Gcompose.Unknown
}

// planKnockOn plans a deployed resource whose inputs are known only after
// apply. What it may become is asked of its adapter with the unknown
// values left as their ${...} text: an adapter that would rebuild for any
// change of those fields says so now, and apply is then bound to that
// (Terraform plans with unknown values the same way). An adapter that
// cannot judge such a config is shown as a possible rebuild, the most that
// apply is then allowed to do.
func (p *Planner) planKnockOn(ctx context.Context, app appRef, s *Step, old *state.Resource) (*Step, error) {
	s.Reason = "knock-on: " + s.Reason
	if _, err := p.Adapters.Describe(ctx, s.Type, s.Resource); err != nil {
		return s, err
	}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: s.Resource, AdapterName: AdapterNameOf(s.Resource, old), Type: s.Type, Config: s.After, Persisted: PersistedOf(old)}, protocol.Present)
	if err != nil {
		s.Op, s.Possible = Rebuild, true
		s.Reason += "; may be rebuilt: the adapter could not judge the change before apply (" + firstLine(err.Error()) + ")"
		return s, nil
	}
	if err := Refused(s.Resource, s.Type, ans); err != nil {
		return s, err
	}
	if ans.Status == protocol.Valid {
		s.Op = Update
		return s, nil
	}
	probe := &Step{}
	fillStale(probe, ans, old)
	s.Op, s.Forces, s.Drift = probe.Op, probe.Forces, probe.Drift
	if s.Op == Create {
		s.Op = Rebuild // recorded but gone: made anew
	}
	if ans.Gcompose != nil && ans.Gcompose.Reason != "" {
		s.Reason += "; " + ans.Gcompose.Reason
	}
	return s, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (p *Planner) planAbsent(ctx context.Context, app appRef, name string, old *state.Resource, mode Mode) (*Step, error) {
	s := &Step{Resource: name, Type: old.Type, Before: old.Config, DependsOn: old.Dependencies, Remove: mode != Refresh}
	if mode == Deploy {
		s.Reason = "gone from the descriptor"
	}
	caps, err := p.Adapters.Describe(ctx, old.Type, name)
	if err != nil {
		return s, err
	}
	if !caps.Destroy {
		if mode == Refresh {
			s.Op = NoOp
			s.Reason = "adapter cannot report absence; not refreshed"
			return s, nil
		}
		s.Op = Forget
		s.Reason = "adapter speaks plain Deployster and cannot destroy: forgotten, not removed"
		return s, nil
	}
	if mode == Refresh {
		return p.planRefresh(ctx, app, name, old)
	}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: name, AdapterName: AdapterNameOf(name, old), Type: old.Type, Config: old.Config, Persisted: PersistedOf(old)}, protocol.Absent)
	if err != nil {
		return s, err
	}
	s.Answer = ans
	if ans.Status == protocol.Valid {
		s.Op = Forget
		s.Drift = "gone"
		if s.Reason == "" {
			s.Reason = "already gone"
		} else {
			s.Reason += "; already gone"
		}
		return s, nil
	}
	s.Op = Delete
	s.Actions = ans.Actions
	if ans.Gcompose != nil && ans.Gcompose.Reason != "" && s.Reason == "" {
		s.Reason = ans.Gcompose.Reason
	}
	return s, nil
}

// planRefresh asks whether a persisted resource still matches what the state
// recorded, without planning any change to it (gcompose refresh).
// diffKeys lists the top-level keys whose values differ.
func diffKeys(a, b map[string]any) []string {
	var out []string
	for k := range a {
		if !jsonvalue.Equal(a[k], b[k]) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (p *Planner) planRefresh(ctx context.Context, app appRef, name string, old *state.Resource) (*Step, error) {
	s := &Step{Resource: name, Type: old.Type, Before: old.State, Op: NoOp}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: name, AdapterName: AdapterNameOf(name, old), Type: old.Type, Config: old.Config, Persisted: PersistedOf(old), Refresh: true}, protocol.Present)
	if err != nil {
		return s, err
	}
	s.Answer = ans
	if ans.Status == protocol.Valid {
		s.After = ans.State
		if !jsonvalue.Equal(ans.State, old.State) {
			s.Drift = "changed"
			s.Reason = "outputs changed: " + strings.Join(diffKeys(old.State, ans.State), ", ")
		}
		return s, nil
	}
	fillStale(s, ans, old)
	if s.Drift == "" {
		s.Drift = "stale"
	}
	s.Op = NoOp // refresh only reports
	return s, nil
}

// UnknownText lists the distinct references not known yet, sorted:
// "${a.state.x}, ${b.state.y}".
func UnknownText(u []expr.Unknown) string {
	seen := map[string]bool{}
	var names []string
	for _, x := range u {
		t := x.Ref.Text()
		if !seen[t] {
			seen[t] = true
			names = append(names, t)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func joinErrors(errs map[string]error) error {
	names := make([]string, 0, len(errs))
	for n, e := range errs {
		if e != nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	msgs := make([]string, len(names))
	each := make([]error, len(names))
	for i, n := range names {
		each[i] = Named(n, errs[n])
		msgs[i] = each[i].Error()
	}
	return &Errors{Resources: names, msg: strings.Join(msgs, "\n"), errs: each}
}

// Errors reports the resources that failed, each with its reason.
type Errors struct {
	Resources []string
	msg       string
	errs      []error
}

func (e *Errors) Error() string { return e.msg }

// Unwrap gives each resource's error, so that callers match them with
// errors.As (*UndeclaredOutputError, *ProtectedError, ...) past the summary.
func (e *Errors) Unwrap() []error { return e.errs }

// declared asks a resource's adapter which outputs it declares.
func (p *Planner) declared(ctx context.Context, desired map[string]*Resource, doc *state.Document) Declared {
	return func(name string) ([]string, bool) {
		typ := ""
		if r := desired[name]; r != nil {
			typ = r.Type
		} else if r := doc.Resources[name]; r != nil {
			typ = r.Type
		}
		if typ == "" {
			return nil, false
		}
		caps, err := p.Adapters.Describe(ctx, typ, name)
		if err != nil || caps.Outputs == nil {
			return nil, false
		}
		return caps.Outputs, true
	}
}
