package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// Swept is one object a sweep found that no state names.
type Swept struct {
	// Type is the adapter image that found it.
	Type string `json:"type"`
	protocol.Orphan
}

// Terminated says whether the sweep removed it.
func (s Swept) Terminated() bool { return s.Action == protocol.OrphanTerminated }

// Describe is one line for people: what was found, what happened to it, why.
func (s Swept) Describe(lineage string) string {
	var b strings.Builder
	what := s.Kind + " " + s.ID
	switch {
	case s.Terminated():
		b.WriteString("terminated " + what + " of an interrupted run")
	case s.Lineage != "" && lineage != "" && s.Lineage != lineage:
		b.WriteString("found " + what + " of another state of this app (lineage " + s.Lineage + "), left as is")
	case s.ours(lineage):
		b.WriteString("found " + what + " of an interrupted run that no state names: the plan deletes it")
	default:
		b.WriteString("found " + what + " that no state names, left as is")
	}
	var about []string
	if s.Resource != "" {
		about = append(about, "made for "+s.Resource)
	}
	if s.Detail != "" {
		about = append(about, s.Detail)
	}
	about = append(about, "adapter "+s.Type)
	b.WriteString(" (" + strings.Join(about, "; ") + ")")
	return b.String()
}

// SweepError is a sweep that failed: the run stops before planning, since a
// plan made over leftovers nobody could look at might create them again.
type SweepError struct {
	Type string
	Err  error
}

func (e *SweepError) Error() string {
	return fmt.Sprintf("sweeping what earlier runs left of adapter %s failed, so nothing was planned: %v", e.Type, e.Err)
}

func (e *SweepError) Unwrap() error { return e.Err }

// sweep asks every sweep-capable adapter type of the desired resources and
// of the state for what it made for the app that no state names;
// terminate says whether to remove it or only report it. Types are swept
// in parallel; the result is sorted by type, in each adapter's order.
// swept are the types whose sweep answered.
func (e *Engine) sweep(ctx context.Context, app string, desired map[string]*plan.Resource, doc *state.Document, terminate bool) (found []Swept, swept map[string]bool, err error) {
	// One resource name per type (the first in order) decides the plugs
	// mounted into the sweep's container, as for that resource's calls.
	types, first := typesOf(desired, doc)
	known := map[string][]protocol.KnownResource{}
	for _, r := range doc.Resources {
		known[r.Type] = append(known[r.Type], protocol.KnownResource{Name: r.CalledAs(), Identity: r.Identity, Pending: plan.OperationOf(r.Pending)})
	}

	results := make([][]Swept, len(types))
	errs := make([]error, len(types))
	answered := make([]bool, len(types))
	e.eachType(types, func(i int, typ string) {
		ks := known[typ]
		sort.Slice(ks, func(a, b int) bool { return ks[a].Name < ks[b].Name })
		res, err := e.Adapters.Sweep(ctx, plan.SweepCall{App: app, Lineage: doc.Lineage, Type: typ, Resource: first[typ], Known: ks, Terminate: terminate})
		if errors.Is(err, plan.ErrNoSweep) {
			// Nothing to sweep; an adapter that cannot even init fails
			// its resources' planning, which says why.
			return
		}
		if err != nil {
			errs[i] = &SweepError{Type: typ, Err: err}
			return
		}
		answered[i] = true
		for _, o := range res.Found {
			if !terminate && o.Action == protocol.OrphanTerminated {
				errs[i] = &SweepError{Type: typ, Err: fmt.Errorf("asked to report only, the adapter says it terminated %s %s: the adapter is broken", o.Kind, o.ID)}
				return
			}
			results[i] = append(results[i], Swept{Type: typ, Orphan: o})
		}
	})
	// What the sweeps that worked terminated is reported even when another
	// failed: it is gone either way.
	var out []Swept
	var firstErr error
	swept = map[string]bool{}
	for i, typ := range types {
		if errs[i] != nil && firstErr == nil {
			firstErr = errs[i]
		}
		if answered[i] && errs[i] == nil {
			swept[typ] = true
		}
		out = append(out, results[i]...)
	}
	return out, swept, firstErr
}

// reportSwept shows what a sweep found that is not this state's to delete
// (what is becomes a plan step, shown with the plan).
func (e *Engine) reportSwept(found []Swept, lineage string) {
	for _, s := range found {
		if !s.ours(lineage) {
			e.emit(apply.Event{Phase: apply.PhaseSwept, Message: s.Describe(lineage)})
		}
	}
}

// ours says whether the object is tagged with this state's lineage: a
// leftover a deploy or destroy plan deletes.
func (s Swept) ours(lineage string) bool {
	return lineage != "" && s.Lineage == lineage && s.Action == protocol.OrphanReported
}

// leftovers are the swept objects of this state, by adapter type, for the
// plan to delete (none before the first deploy: no state names them yet).
func leftovers(found []Swept, doc *state.Document, desired map[string]*plan.Resource, firstDeploy bool) map[string][]plan.Leftover {
	if firstDeploy {
		return nil
	}
	_, first := typesOf(desired, doc)
	out := map[string][]plan.Leftover{}
	for _, s := range found {
		if s.ours(doc.Lineage) {
			out[s.Type] = append(out[s.Type], plan.Leftover{Orphan: s.Orphan, Via: first[s.Type]})
		}
	}
	return out
}

func (e *Engine) emit(ev apply.Event) {
	if e.Observer != nil {
		e.Observer(ev)
	}
}
