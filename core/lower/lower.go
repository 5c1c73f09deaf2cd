// Package lower is the seam between the generic engine and what maps a
// descriptor's services and networks onto adapter images. core knows no
// Golem: a Lowering says what the application lowers to, which plugs it
// offers adapters unasked, and which fields of services and networks are
// their adapters' outputs. adapters/golem/lowering is the Golem one;
// Generic lowers resources as written and nothing else.
package lower

import (
	"fmt"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/resolve"
)

// Lowering maps a resolved application onto the resources the engine
// converges.
type Lowering interface {
	// Resources are the desired resources, by address.
	Resources(r *resolve.Resolved) (map[string]*plan.Resource, error)
	// Plugs are offered to adapters without the descriptor naming them.
	Plugs() map[string]adapter.Plug
	// Outputs are the fields of services and networks that their adapters
	// report (resolve.Options.Outputs).
	Outputs() map[resolve.Kind]map[string][]string
}

// Implicit is implemented by a lowering that adds resources of its own
// (not written in the descriptor) whose state the outputs section may read
// (resolve.Options.Implicit).
type Implicit interface {
	// Implicit tells whether the lowering may add a resource of this name.
	Implicit(resource string) bool
}

// ImplicitOf is l's Implicit, nil when it adds no resources of its own.
func ImplicitOf(l Lowering) func(string) bool {
	if im, ok := l.(Implicit); ok {
		return im.Implicit
	}
	return nil
}

// Generic is the lowering of an engine that knows only generic resources:
// each is its adapter image with its config, as written.
type Generic struct{}

func (Generic) Resources(r *resolve.Resolved) (map[string]*plan.Resource, error) {
	out := make(map[string]*plan.Resource, len(r.Nodes))
	for _, n := range r.Nodes {
		if n.Kind != resolve.ResourceNode {
			return nil, fmt.Errorf("%s: %s: services and networks need a lowering that maps them onto adapters (this one has none)", n.Pos, n.ID)
		}
		res, err := Resource(r, n)
		if err != nil {
			return nil, err
		}
		out[n.ID] = res
	}
	return out, nil
}

func (Generic) Plugs() map[string]adapter.Plug                { return nil }
func (Generic) Outputs() map[resolve.Kind]map[string][]string { return nil }

// Resource is a generic resource node as the engine converges it: its
// type, its config, its dependencies.
func Resource(r *resolve.Resolved, n *resolve.Node) (*plan.Resource, error) {
	t, _ := n.Spec["type"].(string)
	if t == "" {
		return nil, fmt.Errorf("%s: %s: no adapter image", n.Pos, n.ID)
	}
	cfg, ok := n.Spec["config"].(map[string]any)
	if !ok {
		cfg = map[string]any{}
	}
	// protect: true guards the resource in the plan; its adapter is not told.
	protect, _ := n.Spec["protect"].(bool)
	// create_before_destroy: true is asked of adapters that declare it.
	cbd, _ := n.Spec["create_before_destroy"].(bool)
	return &plan.Resource{Name: n.ID, Type: t, Config: cfg, DependsOn: r.Graph.DependenciesOf(n.ID), Pos: n.Pos, Protect: protect, CreateBeforeDestroy: cbd}, nil
}
