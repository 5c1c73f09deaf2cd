package reconcile

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/internal/jsonvalue"
)

// Intent is what the reconciler keeps an application at: its descriptor,
// loaded, resolved and lowered again for the cycle.
type Intent struct {
	App string
	// Desired are the resources the descriptor lowers to.
	Desired map[string]*plan.Resource
	// Outputs is the descriptor's outputs: section.
	Outputs map[string]any
	// Budget is the descriptor's budget: (zero: none).
	Budget Budget
}

// Mismatches says how the intent differs from what the state records as
// last deployed (Compare).
func Mismatches(in *Intent, doc *state.Document) []string {
	mismatches, _ := Compare(in, doc)
	return mismatches
}

// Compare says how the intent differs from what the state records as last
// deployed: resources in one and not the other, another adapter image, or
// a config that, resolved against the outputs the state records, is not
// the config last applied. mismatches is empty when the descriptor is the
// one deployed.
//
// This is how a descriptor change is never picked up silently: the state
// holds each resource's config as last applied, so a descriptor edited
// since (and not deployed) shows here, and the reconciler repairs nothing
// until a person deploys it or puts the old one back. A resource whose
// config reads outputs the state does not record (a dependency that is
// not Active) cannot be compared and is left out; its dependency is
// compared on its own.
//
// One difference is not the descriptor's: a knock-on that a repair did not
// get to (stopped, or the knock-on failed) after its dependency was rebuilt
// with new outputs. Its config differs only where it reads them, and its
// dependency was written after it, or its own operation is pending:
// leftBehind lists it, to be repaired as a drift of its own.
func Compare(in *Intent, doc *state.Document) (mismatches []string, leftBehind []Drifted) {
	if doc == nil || len(doc.Resources) == 0 {
		return []string{fmt.Sprintf("nothing of %s is deployed (never, or destroyed since): the reconciler keeps a deployed application running and deploys nothing itself; it repairs again once a person deploys it (gcompose deploy)", in.App)}, nil
	}
	outs := plan.RecordedOutputs(doc)
	for _, name := range sortedNames(in.Desired) {
		want, have := in.Desired[name], doc.Resources[name]
		switch {
		case have == nil:
			mismatches = append(mismatches, name+": in the descriptor, never deployed")
			continue
		case have.Type != want.Type:
			mismatches = append(mismatches, fmt.Sprintf("%s: the descriptor says adapter %s, %s was deployed", name, want.Type, have.Type))
			continue
		case have.Pending != nil && have.Config == nil:
			// Its first create never finished: there is no applied config
			// to compare with.
			continue
		}
		cfg, unknown, err := plan.ResolveConfig(want.Config, outs)
		if err != nil {
			mismatches = append(mismatches, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if len(unknown) > 0 || jsonvalue.Equal(cfg, have.Config) {
			continue
		}
		if why := changedSince(have, want, doc); why != "" && sameBesideReferences(want.Config, have.Config) {
			leftBehind = append(leftBehind, Drifted{Resource: name, Drift: DriftInputs,
				Reason: "the outputs it reads changed since it was applied (" + why + ")"})
			continue
		}
		mismatches = append(mismatches, fmt.Sprintf("%s: its config differs from the one deployed (%s)", name, strings.Join(changedKeys(have.Config, cfg), ", ")))
	}
	for _, name := range sortedNames(doc.Resources) {
		if _, ok := in.Desired[name]; !ok {
			mismatches = append(mismatches, name+": deployed, no longer in the descriptor")
		}
	}
	return mismatches, leftBehind
}

// DriftInputs is the drift of a knock-on left behind: what it reads changed.
const DriftInputs = "inputs"

// changedSince says why have may not have followed its dependencies: its
// own operation did not finish, or a dependency was written after it; ""
// when neither.
func changedSince(have *state.Resource, want *plan.Resource, doc *state.Document) string {
	if have.Pending != nil {
		return "its " + have.Pending.Describe() + " did not finish"
	}
	deps := append(slices.Clone(want.DependsOn), have.Dependencies...)
	slices.Sort(deps)
	for _, d := range slices.Compact(deps) {
		if r := doc.Resources[d]; r != nil && r.UpdatedAt.After(have.UpdatedAt) {
			return d + " was written after it"
		}
	}
	return ""
}

// sameBesideReferences reports whether the applied config equals the
// descriptor's everywhere but where the descriptor reads outputs (the
// places a runtime reference leaves unknown when nothing is known).
func sameBesideReferences(want, applied map[string]any) bool {
	template, unknown, err := plan.ResolveConfig(want, func(string) (map[string]any, bool) { return nil, false })
	if err != nil {
		return false
	}
	refs := map[string]bool{}
	for _, u := range unknown {
		refs[u.Pointer] = true
	}
	return equalBeside(template, applied, "", refs)
}

// equalBeside compares a and b but at the JSON pointers in skip.
func equalBeside(a, b any, at string, skip map[string]bool) bool {
	if skip[at] {
		return true
	}
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !equalBeside(v, w, at+"/"+jsonpointer.Escape(k), skip) {
				return false
			}
		}
		return true
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !equalBeside(a[i], bl[i], at+"/"+strconv.Itoa(i), skip) {
				return false
			}
		}
		return true
	}
	return jsonvalue.Equal(a, b)
}

// changedKeys are the top-level keys whose values differ, sorted.
func changedKeys(a, b map[string]any) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !jsonvalue.Equal(v, w) {
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

func sortedNames[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
