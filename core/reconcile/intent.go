package reconcile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
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
// last deployed: resources in one and not the other, another adapter image,
// or a config that, resolved against the outputs the state records, is not
// the config last applied. Empty when the descriptor is the one deployed.
//
// This is how a descriptor change is never picked up silently: the state
// holds each resource's config as last applied, so a descriptor edited
// since (and not deployed) shows here, and the reconciler repairs nothing
// until a person deploys it or puts the old one back. A resource whose
// config reads outputs the state does not record (a dependency that is
// not Active) cannot be compared and is left out; its dependency is
// compared on its own.
func Mismatches(in *Intent, doc *state.Document) []string {
	var out []string
	if doc == nil || len(doc.Resources) == 0 {
		return []string{fmt.Sprintf("nothing of %s is deployed (never, or destroyed since): the reconciler keeps a deployed application running and deploys nothing itself; it repairs again once a person deploys it (gcompose deploy)", in.App)}
	}
	outs := plan.RecordedOutputs(doc)
	for _, name := range sortedNames(in.Desired) {
		want, have := in.Desired[name], doc.Resources[name]
		switch {
		case have == nil:
			out = append(out, name+": in the descriptor, never deployed")
			continue
		case have.Type != want.Type:
			out = append(out, fmt.Sprintf("%s: the descriptor says adapter %s, %s was deployed", name, want.Type, have.Type))
			continue
		case have.Pending != nil && have.Config == nil:
			// Its first create never finished: there is no applied config
			// to compare with.
			continue
		}
		cfg, unknown, err := plan.ResolveConfig(want.Config, outs)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if len(unknown) > 0 {
			continue
		}
		if !jsonvalue.Equal(cfg, have.Config) {
			out = append(out, fmt.Sprintf("%s: its config differs from the one deployed (%s)", name, strings.Join(changedKeys(have.Config, cfg), ", ")))
		}
	}
	for _, name := range sortedNames(doc.Resources) {
		if _, ok := in.Desired[name]; !ok {
			out = append(out, name+": deployed, no longer in the descriptor")
		}
	}
	return out
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
