package diff

import (
	"fmt"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

// FromState is a snapshot of a persisted state document.
func FromState(label string, doc *state.Document) Snapshot {
	s := Snapshot{Label: label, Kind: "state", Resources: map[string]Resource{}}
	if doc == nil {
		return s
	}
	for n, r := range doc.Resources {
		s.Resources[n] = Resource{Type: r.Type, Status: string(r.Status), Config: r.Config, State: r.State,
			Identity: r.Identity, Dependencies: r.Dependencies}
	}
	return s
}

// FromDesired is a snapshot of what a descriptor asks for. Configs may hold
// ${...} references to other resources' outputs, compared as text.
func FromDesired(label string, want map[string]*plan.Resource) Snapshot {
	s := Snapshot{Label: label, Kind: "descriptor", Resources: map[string]Resource{}}
	for n, r := range want {
		s.Resources[n] = Resource{Type: r.Type, Config: r.Config, Dependencies: r.DependsOn}
	}
	return s
}

// ResolveWith substitutes the ${...} references of a descriptor snapshot's
// configs with the outputs a state snapshot records, so that a reference
// whose value would not change compares equal. References the state cannot
// answer stay as text.
func ResolveWith(desc, st Snapshot) (Snapshot, error) {
	outs := func(res string) (map[string]any, bool) {
		r, ok := st.Resources[res]
		return r.State, ok && r.State != nil
	}
	out := Snapshot{Label: desc.Label, Kind: desc.Kind, Resources: make(map[string]Resource, len(desc.Resources))}
	for n, r := range desc.Resources {
		cfg, _, err := plan.ResolveConfig(r.Config, outs)
		if err != nil {
			return Snapshot{}, fmt.Errorf("resolving %s: %w", n, err)
		}
		r.Config = cfg
		out.Resources[n] = r
	}
	return out, nil
}
