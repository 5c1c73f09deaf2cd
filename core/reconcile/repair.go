package reconcile

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

// Drifted is a deployed resource that is not what the state recorded.
type Drifted struct {
	Resource string `json:"resource"`
	// Drift is refresh's word: "gone", "stale" (its adapter wants to
	// change it: dead, terminated, unreachable, half-made) or "changed"
	// (running, with other outputs).
	Drift string `json:"drift"`
	// Reason is the adapter's explanation.
	Reason string `json:"reason,omitempty"`
}

func (d Drifted) String() string {
	if d.Reason == "" {
		return d.Resource + " (" + d.Drift + ")"
	}
	return d.Resource + " (" + d.Drift + ": " + d.Reason + ")"
}

// driftOf lists the drifted resources of a refresh plan, sorted.
func driftOf(pl *plan.Plan) []Drifted {
	var out []Drifted
	for _, s := range pl.Steps {
		if s.Drift != "" {
			out = append(out, Drifted{Resource: s.Resource, Drift: s.Drift, Reason: s.Reason})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// withDrift adds to drifted (sorted) what more drifted, each resource
// once.
func withDrift(drifted, more []Drifted) []Drifted {
	for _, d := range more {
		if !slices.ContainsFunc(drifted, func(x Drifted) bool { return x.Resource == d.Resource }) {
			drifted = append(drifted, d)
		}
	}
	sort.Slice(drifted, func(i, j int) bool { return drifted[i].Resource < drifted[j].Resource })
	return drifted
}

// targetsOf is the smallest repair of what drifted: the drifted resources
// and, transitively, what depends on them (whose inputs are their
// outputs: the knock-ons). Dependencies come from the state, which records
// each resource's. The planner adds what the targets depend on, planned
// and normally unchanged.
func targetsOf(drifted []Drifted, doc *state.Document) (targets, knockOns []string) {
	deps := make(map[string][]string, len(doc.Resources))
	for name, r := range doc.Resources {
		deps[name] = r.Dependencies
	}
	starts := make([]string, 0, len(drifted))
	drift := map[string]bool{}
	for _, d := range drifted {
		starts = append(starts, d.Resource)
		drift[d.Resource] = true
	}
	in := graph.Descendants(deps, starts)
	for n := range in {
		if !drift[n] {
			knockOns = append(knockOns, n)
		}
	}
	targets = sortedNames(in)
	sort.Strings(knockOns)
	return targets, knockOns
}

// RefusedError is a repair the reconciler would not apply: what it would
// do is more than a repair, or costs more than the budget allows.
type RefusedError struct {
	// Reason says why, in one line.
	Reason string
	// Budget is true when the budget refused it.
	Budget bool
}

func (e *RefusedError) Error() string { return "repair refused: " + e.Reason }

// checkRepair refuses a repair plan that does more than repair what was
// deployed: it never deletes or forgets, never creates what the state
// does not hold (the user never deployed it), and changes nothing but the
// targets.
func checkRepair(pl *plan.Plan, doc *state.Document, targets []string) error {
	want := map[string]bool{}
	for _, t := range targets {
		want[t] = true
	}
	var why []string
	for _, s := range pl.Steps {
		switch {
		case s.Op == plan.Delete || s.Op == plan.Forget:
			why = append(why, fmt.Sprintf("it would %s %s (%s): a reconciler never removes anything", s.Op.Verb(), s.Resource, s.Reason))
		case !s.Op.Changes():
		case doc.Resources[s.Resource] == nil:
			why = append(why, fmt.Sprintf("it would %s %s, which was never deployed", s.Op.Verb(), s.Resource))
		case !want[s.Resource]:
			why = append(why, fmt.Sprintf("it would %s %s, which did not drift (%s)", s.Op.Verb(), s.Resource, s.Reason))
		}
	}
	if len(why) > 0 {
		return &RefusedError{Reason: strings.Join(why, "; ")}
	}
	return nil
}

// changesOf names what a repair plan may change: "rebuild services.db".
func changesOf(pl *plan.Plan) []string {
	var out []string
	for _, s := range pl.Steps {
		if s.Op.Changes() {
			out = append(out, s.Op.Verb()+" "+s.Resource)
		}
	}
	return out
}
