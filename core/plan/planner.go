package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/state"
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

// observed is what the planner learned about one resource, kept for the
// executor so that nothing is asked twice for one answer within a run.
type observed struct {
	config  map[string]any        // the config the state call was made with
	answer  *protocol.StateResult // the answer
	desired string
	outputs map[string]any // trusted outputs after planning (nil: unknown)
}

// Observations carries the planner's answers to the executor of the same run.
type Observations struct {
	mu sync.Mutex
	m  map[string]*observed
}

func (o *Observations) get(name string) *observed {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[name]
}

func (o *Observations) put(name string, ob *observed) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[name] = ob
}

// Reuse returns the planner's state answer for name if it was made with
// exactly this config and desired state, so the executor need not ask again.
func (o *Observations) Reuse(name string, cfg map[string]any, desired string) *protocol.StateResult {
	ob := o.get(name)
	if ob == nil || ob.answer == nil || ob.desired != desired || !reflect.DeepEqual(ob.config, cfg) {
		return nil
	}
	return ob.answer
}

// Outputs returns what planning found a resource's outputs to be.
func (o *Observations) Outputs(name string) (map[string]any, bool) {
	ob := o.get(name)
	if ob == nil || ob.outputs == nil {
		return nil, false
	}
	return ob.outputs, true
}

// Plan computes the plan. Adapter errors for one resource do not stop the
// others: they are all returned, joined, with the resources they concern.
func (p *Planner) Plan(ctx context.Context, in Input) (*Plan, *Observations, error) {
	doc := in.State
	if doc == nil {
		doc = state.NewDocument(in.App)
	}
	pl := &Plan{FormatVersion: FormatVersion, App: in.App, Mode: in.Mode, Lineage: doc.Lineage, Serial: doc.Serial}
	obs := &Observations{m: map[string]*observed{}}
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

	// A resource's outputs are trusted for planning its dependents unless the
	// resource is about to change: then a dependent that reads them is shown
	// as a knock-on whose inputs are known only after apply. An update may
	// leave outputs as they were; apply finds out and skips the dependent.
	outs := func(name string) (map[string]any, bool) {
		if name == AppOutputs {
			return AppOutputsOf(in.App, doc.Lineage)
		}
		s := stepOf(name)
		if s != nil && (s.Op.Changes() || s.KnownAfterApply) {
			return nil, false
		}
		if o, ok := obs.Outputs(name); ok {
			return o, true
		}
		if r := doc.Resources[name]; r != nil && r.Status == state.StatusActive {
			return r.State, true
		}
		return nil, false
	}

	app := appRef{name: in.App, lineage: doc.Lineage}
	visit := func(ctx context.Context, name string) error {
		var s *Step
		var err error
		if r, ok := desired[name]; ok {
			s, err = p.planPresent(ctx, app, r, doc.Resources[name], outs, obs)
		} else {
			s, err = p.planAbsent(ctx, app, name, doc.Resources[name], in.Mode, obs)
		}
		if err != nil {
			err = Named(name, err)
			if s == nil {
				s = &Step{Resource: name}
				if r, ok := desired[name]; ok {
					s.Type, s.DependsOn = r.Type, r.DependsOn
				} else if old := doc.Resources[name]; old != nil {
					s.Type, s.DependsOn = old.Type, old.Dependencies
				}
			}
			s.Op, s.Error = Failed, err.Error()
		}
		if s != nil {
			addStep(s)
		}
		return err
	}
	errs := p.Walk(ctx, deps, in.Mode == Destroy, visit)
	// What the walk never reached (a dependency failed to plan) cannot be
	// planned either; it still gets a step, so apply and the output say why.
	for name, err := range errs {
		if err != nil && stepOf(name) == nil {
			s := &Step{Resource: name, Op: Failed, Error: Named(name, err).Error()}
			if r, ok := desired[name]; ok {
				s.Type, s.DependsOn = r.Type, r.DependsOn
			} else if old := doc.Resources[name]; old != nil {
				s.Type, s.DependsOn = old.Type, old.Dependencies
			}
			addStep(s)
		}
	}
	pl.finish()
	return pl, obs, joinErrors(errs)
}

// Named prefixes err with the resource name unless it already starts with
// it (adapter errors do), so messages name the resource exactly once.
func Named(name string, err error) error {
	if err == nil || strings.HasPrefix(err.Error(), name+":") || strings.HasPrefix(err.Error(), name+" ") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
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

// PersistedOf is what an adapter is told of a resource's persisted state,
// including an operation recorded on it but never completed.
func PersistedOf(r *state.Resource) *protocol.Persisted {
	if r == nil {
		return nil
	}
	return &protocol.Persisted{State: r.State, Identity: r.Identity, Config: r.Config, Pending: OperationOf(r.Pending)}
}

// OperationOf is a recorded operation as adapters see it (nil for nil).
func OperationOf(op *state.Operation) *protocol.Operation {
	if op == nil {
		return nil
	}
	return &protocol.Operation{ID: op.ID, Kind: string(op.Kind), Action: op.Action, StartedAt: op.StartedAt}
}

func (p *Planner) planPresent(ctx context.Context, app appRef, r *Resource, old *state.Resource, outs Outputs, obs *Observations) (*Step, error) {
	s := &Step{Resource: r.Name, Type: r.Type, DependsOn: r.DependsOn}
	if old != nil {
		s.Before = old.Config
	}
	cfg, unknown, err := ResolveConfig(r.Config, outs)
	if err != nil {
		return nil, err
	}
	s.After = cfg
	if old != nil && old.Type != r.Type {
		s.Op, s.Reason = Rebuild, fmt.Sprintf("adapter image changed from %s to %s", old.Type, r.Type)
		s.Forces = []string{"type"}
		return s, nil
	}
	if len(unknown) > 0 {
		s.KnownAfterApply = true
		s.Reason = "inputs known after apply: " + UnknownText(unknown)
		if old == nil {
			s.Op = Create
		} else {
			s.Op, s.Reason = Update, "knock-on: "+s.Reason
		}
		return s, nil
	}
	if _, err := p.Adapters.Describe(ctx, r.Type, r.Name); err != nil {
		return s, err
	}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: r.Name, Type: r.Type, Config: cfg, Persisted: PersistedOf(old)}, protocol.Present)
	if err != nil {
		return s, err
	}
	ob := &observed{config: cfg, answer: ans, desired: protocol.Present}
	switch ans.Status {
	case protocol.Valid:
		s.Op = NoOp
		ob.outputs = ans.State
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
	obs.put(r.Name, ob)
	return s, nil
}

// fillStale turns a STALE answer into a step: the change kind the adapter
// declared, or for plain Deployster adapters create/update by whether the
// resource is in the state.
func fillStale(s *Step, ans *protocol.StateResult, old *state.Resource) {
	s.Actions = ans.Actions
	ext := ans.Gcompose
	kind := ""
	if ext != nil {
		kind = ext.Change
		s.Reason = ext.Reason
		s.Forces = ext.Forces
		s.Unknown = ext.Unknown
	}
	switch kind {
	case protocol.ChangeCreate:
		s.Op = Create
	case protocol.ChangeRebuild:
		s.Op = Rebuild
	case protocol.ChangeDelete:
		s.Op = Delete
	case protocol.ChangeUpdate:
		s.Op = Update
	default:
		if old == nil {
			s.Op = Create
		} else {
			s.Op = Update
		}
	}
	if old != nil && s.Op == Create {
		// Recorded in state but the adapter must create it: it is gone.
		s.Drift = "gone"
		if s.Reason == "" {
			s.Reason = "recorded in state but missing: recreated"
		}
	}
	if old != nil && old.Pending != nil && s.Reason == "" {
		s.Reason = "finishing " + old.Pending.Describe()
	}
	if s.Reason == "" {
		names := make([]string, len(ans.Actions))
		for i, a := range ans.Actions {
			names[i] = a.Name
		}
		s.Reason = "adapter reports STALE: " + strings.Join(names, ", ")
	}
}

func (p *Planner) planAbsent(ctx context.Context, app appRef, name string, old *state.Resource, mode Mode, obs *Observations) (*Step, error) {
	s := &Step{Resource: name, Type: old.Type, Before: old.Config, DependsOn: old.Dependencies}
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
		return p.planRefresh(ctx, app, name, old, obs)
	}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: name, Type: old.Type, Config: old.Config, Persisted: PersistedOf(old)}, protocol.Absent)
	if err != nil {
		return s, err
	}
	obs.put(name, &observed{config: old.Config, answer: ans, desired: protocol.Absent})
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
func (p *Planner) planRefresh(ctx context.Context, app appRef, name string, old *state.Resource, obs *Observations) (*Step, error) {
	s := &Step{Resource: name, Type: old.Type, Before: old.State, Op: NoOp}
	ans, err := p.Adapters.State(ctx, Call{App: app.name, Lineage: app.lineage, Name: name, Type: old.Type, Config: old.Config, Persisted: PersistedOf(old)}, protocol.Present)
	if err != nil {
		return s, err
	}
	obs.put(name, &observed{config: old.Config, answer: ans, desired: protocol.Present, outputs: ans.State})
	if ans.Status == protocol.Valid {
		s.After = ans.State
		if !SameJSON(ans.State, old.State) {
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

// normalizeJSON makes values decoded from different sources comparable
// (numbers as float64, nested maps as map[string]any).
func normalizeJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// SameJSON reports whether two trees are equal as JSON: numbers compare by
// value whatever their Go type (1 from YAML equals 1.0 from a state file).
// It walks the common decoded shapes directly, because a re-deploy compares
// every resource's config and outputs and a JSON round trip for each was a
// tenth of its time; anything else falls back to the round trip.
func SameJSON(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return ok && len(x) == 0 && len(y) == 0
		}
		for k, v := range x {
			w, found := y[k]
			if !found || !SameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !SameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(normalizeJSON(a), normalizeJSON(b))
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// diffKeys lists the top-level keys whose values differ.
func diffKeys(a, b map[string]any) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		if !SameJSON(a[k], b[k]) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
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
	for i, n := range names {
		msgs[i] = Named(n, errs[n]).Error()
	}
	return &Errors{Resources: names, msg: strings.Join(msgs, "\n")}
}

// Errors reports the resources that failed, each with its reason.
type Errors struct {
	Resources []string
	msg       string
}

func (e *Errors) Error() string { return e.msg }
