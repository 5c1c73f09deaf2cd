// Package plan computes what a deployment must change: desired resources
// (from the descriptor), persisted resources (from the state store) and actual
// resources (each adapter's state call) become a Plan, which is plain data:
// printed for people, serialized for machines, executed by package apply.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonout"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/internal/jsonvalue"
	"github.com/gcompose/gcompose/protocol"
)

// Op is what a step does to one resource.
type Op string

const (
	NoOp    Op = "noop"    // already converged
	Create  Op = "create"  // +
	Update  Op = "update"  // ~ in place
	Rebuild Op = "rebuild" // -/+
	Delete  Op = "delete"  // -
	// Forget drops a resource from state whose adapter reports it already gone,
	// or whose adapter cannot destroy (plain Deployster adapters).
	Forget Op = "forget"
	// Failed marks a resource the planner could not plan (its adapter
	// failed or lied); apply skips it and what depends on it.
	Failed Op = "error"
)

// Symbol is how plan output marks an op, Terraform-style.
func (o Op) Symbol() string {
	switch o {
	case Create:
		return "+"
	case Update:
		return "~"
	case Rebuild:
		return "-/+"
	case Delete:
		return "-"
	case Forget:
		return "x"
	case Failed:
		return "!"
	default:
		return " "
	}
}

// Symbol is how plan output marks the step: a rebuild that creates the
// replacement first is +/-.
func (s *Step) Symbol() string {
	if s.Op == Rebuild && s.CreateBeforeDestroy {
		return "+/-"
	}
	return s.Op.Symbol()
}

// Changes reports whether the op changes anything outside the state store.
func (o Op) Changes() bool { return o != NoOp && o != Forget && o != Failed }

// Resource is one desired resource, ready for planning: an adapter image and a
// config that may still hold ${...} references to other resources' outputs.
type Resource struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Config    map[string]any `json:"config,omitempty"`
	DependsOn []string       `json:"depends_on,omitempty"`
	Pos       source.Pos     `json:"pos,omitempty"`
	// Protect refuses any plan that would delete or rebuild the resource
	// (protect: true in the descriptor).
	Protect bool `json:"protect,omitempty"`
	// CreateBeforeDestroy asks an adapter that declares it to create a
	// rebuild's replacement before it removes what exists
	// (create_before_destroy: true in the descriptor).
	CreateBeforeDestroy bool `json:"create_before_destroy,omitempty"`
}

// Step is the plan for one resource.
type Step struct {
	Resource string `json:"resource"`
	Type     string `json:"type"`
	Op       Op     `json:"op"`
	// Reason explains the op in one line ("config /content changed",
	// "knock-on: services.db is rebuilt", "gone from the descriptor").
	Reason string   `json:"reason,omitempty"`
	Forces []string `json:"forces,omitempty"`
	// Actions the adapter announced; empty when the config is only known
	// after apply.
	Actions []protocol.ActionSpec `json:"actions,omitempty"`
	// KnownAfterApply is set when the resource's inputs depend on outputs
	// that other steps will produce, so the adapter could not be asked yet.
	KnownAfterApply bool `json:"known_after_apply,omitempty"`
	// CreateBeforeDestroy: the resource's state calls ask its adapter to
	// create before it destroys (it declared it can), so a rebuild makes
	// the replacement first (+/-).
	CreateBeforeDestroy bool `json:"create_before_destroy,omitempty"`
	// Possible marks an op that is only the most apply may do: the
	// adapter could not judge a knock-on before apply. Otherwise apply
	// does exactly the op, or nothing.
	Possible bool `json:"possible,omitempty"`
	// Unknown lists output fields (JSON pointers) known only after apply.
	Unknown []string `json:"unknown,omitempty"`
	// Planned are the outputs the resource's actions will leave that its
	// adapter knows now (JSON pointer -> value; protocol StateExt.Planned):
	// dependents that read them were planned with these values, and apply
	// fails the resource if it ends with others.
	Planned   map[string]any `json:"planned,omitempty"`
	Before    map[string]any `json:"before,omitempty"`
	After     map[string]any `json:"after,omitempty"`
	DependsOn []string       `json:"depends_on,omitempty"`
	// Drift describes how the actual resource differs from what the state
	// recorded (refresh), e.g. "gone" or "terminated".
	Drift string `json:"drift,omitempty"`
	// Error says why the resource could not be planned (Op Failed); Err is
	// that error itself, typed, in the process that planned (a saved plan
	// keeps only the text).
	Error string `json:"error,omitempty"`
	Err   error  `json:"-"`

	// What apply needs, so that the plan is its only input:
	// Config is the resource's config as the descriptor wants it, its
	// runtime references unresolved (After is it resolved as far as
	// planning could).
	Config map[string]any `json:"config,omitempty"`
	// Remove: the resource leaves (gone from the descriptor, or destroy).
	Remove bool `json:"remove,omitempty"`
	// Replace: a rebuild asked for (--replace) although the adapter is
	// content; apply removes the resource and creates it anew.
	Replace bool `json:"replace,omitempty"`
	// Answer is the adapter's state answer the op was planned from (none
	// for a knock-on: its config was not known yet).
	Answer *protocol.StateResult `json:"answer,omitempty"`
	// Cost is what the adapter says the resource costs to run (an estimate
	// before it exists, the agreed price after).
	Cost *protocol.Cost `json:"cost,omitempty"`
	// Leftover is set on the delete of an object an earlier run made for
	// the application that no state names (a sweep found it): apply asks
	// its adapter's sweep to terminate it, and it alone.
	Leftover *Leftover `json:"leftover,omitempty"`
}

// Leftover is an object a sweep reported that the plan deletes.
type Leftover struct {
	protocol.Orphan
	// Via is the resource whose plugs the sweep call mounts.
	Via string `json:"via,omitempty"`
}

// LeftoverName is the plan's name for a leftover object of an adapter
// type: "leftovers.KIND.ID".
func LeftoverName(o protocol.Orphan) string {
	return "leftovers." + o.Kind + "." + o.ID
}

// leftoverStep is the delete of a leftover of adapter type typ.
func leftoverStep(typ string, l Leftover) *Step {
	why := []string{"leftover of an interrupted run that no state names"}
	if l.Resource != "" {
		why = append(why, "made for "+l.Resource)
	}
	if l.Detail != "" {
		why = append(why, l.Detail)
	}
	why = append(why, "tagged with this app and state lineage "+l.Lineage)
	return &Step{Resource: LeftoverName(l.Orphan), Type: typ, Op: Delete, Remove: true, Reason: strings.Join(why, "; "), Leftover: &l}
}

// Allows says whether apply may carry out actual where the approved step
// said s.Op: the plan is the whole contract, so only the same op, or
// nothing to do. A step marked Possible (the adapter could not judge a
// knock-on before apply: the plan showed the most it may do) allows less
// destructive ops too.
func (s *Step) Allows(actual Op) bool {
	if s.Op == Failed {
		return false
	}
	if actual == NoOp || actual == s.Op {
		return true
	}
	if !s.Possible {
		return false
	}
	switch s.Op {
	case Rebuild:
		return actual == Create || actual == Update
	case Create:
		return actual == Update
	}
	return false
}

// Consistent checks a state answer apply got for the step's resource
// (old is its record as apply found it) against the approved step: the
// same op, the same actions (by name, in order) and forces the plan
// showed, or nothing to do. A step planned without an answer (its inputs
// were known only after apply) binds its op only. Anything else is an
// *Inconsistent error: the resource is left untouched.
func (s *Step) Consistent(ans *protocol.StateResult, old *state.Resource) error {
	actual := OpOf(ans, old)
	if actual == Create && old != nil && s.Op == Rebuild {
		actual = Rebuild // recorded but gone: made anew, as approved
	}
	if s.Op == Delete && ans.Status == protocol.Stale && (ans.Gcompose == nil || ans.Gcompose.Change == "") {
		actual = Delete // asked for absence, the actions remove it (planAbsent judges so too)
	}
	if actual == NoOp {
		if s.Op == Failed {
			return &Inconsistent{Resource: s.Resource, Approved: s.Op, Actual: actual}
		}
		return nil
	}
	reason := ""
	if ans.Gcompose != nil {
		reason = ans.Gcompose.Reason
	}
	if !s.Allows(actual) {
		return &Inconsistent{Resource: s.Resource, Approved: s.Op, Actual: actual, Reason: reason}
	}
	if s.KnownAfterApply || s.Answer == nil || s.Possible {
		return nil
	}
	if got, want := actionNames(ans.Actions), actionNames(s.Actions); !slices.Equal(got, want) {
		return &Inconsistent{Resource: s.Resource, Approved: s.Op, Actual: actual, Reason: reason,
			What: fmt.Sprintf("approved the actions %s, but the adapter now answers %s", listOr(want, "none"), listOr(got, "none"))}
	}
	var forces []string
	if ans.Gcompose != nil {
		forces = ans.Gcompose.Forces
	}
	if got, want := sorted(forces), sorted(s.Forces); !slices.Equal(got, want) {
		return &Inconsistent{Resource: s.Resource, Approved: s.Op, Actual: actual, Reason: reason,
			What: fmt.Sprintf("approved a %s forced by %s, but the adapter now says forced by %s", s.Op.Verb(), listOr(want, "nothing"), listOr(got, "nothing"))}
	}
	return nil
}

func actionNames(as []protocol.ActionSpec) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Name
	}
	return out
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}

// Inconsistent is the error of a resource whose adapter, at apply time,
// answers other than the step that was approved (another op, other
// actions or forces): the resource is left untouched and what depends on
// it is held back.
type Inconsistent struct {
	Resource string
	Approved Op
	Actual   Op
	Reason   string // the adapter's, if it gave one
	// What differs when the op is the same (actions, forces).
	What string
}

func (e *Inconsistent) Error() string {
	s := fmt.Sprintf("inconsistent with the approved plan: approved %s, but the adapter now wants %s", e.Approved.Verb(), e.Actual.Verb())
	if e.What != "" {
		s = "inconsistent with the approved plan: " + e.What
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s + "; left untouched: plan again to see and approve the change"
}

// CheckPlanned compares the state a resource reached by its actions with
// the outputs its step planned (Planned): dependents were planned with
// those values, so another one is an error, not news. A planned field also
// listed as unknown was not promised.
func (s *Step) CheckPlanned(st map[string]any) error {
	ptrs := make([]string, 0, len(s.Planned))
	for p := range s.Planned {
		ptrs = append(ptrs, p)
	}
	sort.Strings(ptrs)
	for _, p := range ptrs {
		if overlapsUnknown(p, s.Unknown) {
			continue
		}
		got, ok := jsonpointer.Lookup(map[string]any(st), p)
		if !ok || !jsonvalue.Equal(got, s.Planned[p]) {
			return &UnplannedOutputError{Resource: s.Resource, Pointer: p, Planned: s.Planned[p], Actual: got, Missing: !ok}
		}
	}
	return nil
}

// overlapsUnknown says whether the pointer is, is inside, or holds a field
// known only after apply.
func overlapsUnknown(ptr string, unknown []string) bool {
	toks, ok := jsonpointer.Split(ptr)
	if !ok {
		return true
	}
	for _, u := range unknown {
		if ut, ok := jsonpointer.Split(u); ok && (isPrefix(ut, toks) || isPrefix(toks, ut)) {
			return true
		}
	}
	return false
}

// UnplannedOutputError is a resource whose actions left an output other
// than its adapter planned: what was planned from it is held back.
type UnplannedOutputError struct {
	Resource string
	Pointer  string
	Planned  any
	Actual   any
	Missing  bool
}

func (e *UnplannedOutputError) Error() string {
	got := "reports none"
	if !e.Missing {
		got = "reports " + jsonText(e.Actual)
	}
	return fmt.Sprintf("its adapter planned the output %s = %s, but after its actions it %s: what was planned with that value is held back (the adapter broke its promise: plan again)",
		e.Pointer, jsonText(e.Planned), got)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Verb is the op as a word.
func (o Op) Verb() string {
	switch o {
	case NoOp:
		return "no change"
	case Failed:
		return "error"
	}
	return string(o)
}

// Mode says what a plan is for.
type Mode string

const (
	Deploy  Mode = "deploy"
	Destroy Mode = "destroy"
	Refresh Mode = "refresh"
)

// Plan is the outcome of planning: data only.
type Plan struct {
	FormatVersion int    `json:"format_version"`
	App           string `json:"app"`
	Mode          Mode   `json:"mode"`
	// Lineage and Serial of the state the plan was made against; apply refuses
	// a plan made against another state.
	Lineage string `json:"lineage,omitempty"`
	Serial  uint64 `json:"serial"`
	// Inputs is a hash of the desired resources the plan was made from
	// (descriptor, variables, secrets, images: everything lowered into
	// them); a saved plan is refused once they hash otherwise.
	Inputs string `json:"inputs,omitempty"`
	// Targets the plan was limited to (--target); empty: everything.
	Targets []string `json:"targets,omitempty"`
	Steps   []*Step  `json:"steps"`
	// Prior is the state document the plan was made against. It is not
	// serialized: a saved plan gets it back from the store once its
	// lineage and serial are found unchanged.
	Prior   *state.Document `json:"-"`
	Summary Summary         `json:"summary"`
	// Cost sums the steps' costs by currency, for what the plan leaves
	// present (deleted resources cost nothing).
	Cost []CostTotal `json:"cost,omitempty"`
}

// CostTotal is the plan's cost in one currency.
type CostTotal struct {
	Currency string  `json:"currency"`
	PerHour  float64 `json:"per_hour"`
	Total    float64 `json:"total"`
	// Resources counts the steps with a cost.
	Resources int `json:"resources"`
}

// Summary counts steps by op.
type Summary struct {
	Create    int `json:"create"`
	Update    int `json:"update"`
	Rebuild   int `json:"rebuild"`
	Delete    int `json:"delete"`
	Forget    int `json:"forget"`
	Unchanged int `json:"unchanged"`
	Failed    int `json:"failed,omitempty"`
}

// HasChanges reports whether applying the plan would do anything.
func (p *Plan) HasChanges() bool {
	s := p.Summary
	return s.Create+s.Update+s.Rebuild+s.Delete+s.Forget > 0
}

// Step returns the step for a resource, or nil.
func (p *Plan) Step(name string) *Step {
	i := sort.Search(len(p.Steps), func(i int) bool { return p.Steps[i].Resource >= name })
	if i < len(p.Steps) && p.Steps[i].Resource == name {
		return p.Steps[i]
	}
	return nil
}

func (p *Plan) finish() {
	sort.Slice(p.Steps, func(i, j int) bool { return p.Steps[i].Resource < p.Steps[j].Resource })
	var s Summary
	for _, st := range p.Steps {
		switch st.Op {
		case Create:
			s.Create++
		case Update:
			s.Update++
		case Rebuild:
			s.Rebuild++
		case Delete:
			s.Delete++
		case Forget:
			s.Forget++
		case Failed:
			s.Failed++
		default:
			s.Unchanged++
		}
	}
	p.Summary = s
	p.Cost = nil
	for _, st := range p.Steps {
		if st.Cost == nil || st.Op == Delete || st.Op == Forget || st.Op == Failed {
			continue
		}
		i := slices.IndexFunc(p.Cost, func(c CostTotal) bool { return c.Currency == st.Cost.Currency })
		if i < 0 {
			p.Cost = append(p.Cost, CostTotal{Currency: st.Cost.Currency})
			i = len(p.Cost) - 1
		}
		p.Cost[i].PerHour += st.Cost.PerHour
		p.Cost[i].Total += st.Cost.Total
		p.Cost[i].Resources++
	}
}

// MarshalIndent is the machine form of a plan (`plan --json`, `plan -out`).
// Nothing is HTML-escaped: a ">" in a command stays ">" for whoever reads it.
func (p *Plan) MarshalIndent() ([]byte, error) {
	var b bytes.Buffer
	if err := jsonout.Indented(&b, p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// InputsHash is the hash of a desired set that Plan.Inputs records: SHA-256
// of its canonical JSON (names sorted, map keys sorted by encoding/json).
func InputsHash(desired map[string]*Resource) string {
	names := make([]string, 0, len(desired))
	for n := range desired {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, n := range names {
		r := desired[n]
		// Pos is where the resource was written, not what it is.
		_ = enc.Encode([]any{r.Name, r.Type, jsonvalue.Normalize(map[string]any(r.Config)), r.DependsOn})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// FormatVersion of the serialized plan.
const FormatVersion = 1
