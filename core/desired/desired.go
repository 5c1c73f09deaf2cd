// Package desired turns a resolved application into the resources the engine
// converges: generic resources as written, and GAP-16 networks and services
// as resources of the Golem adapter images.
package desired

import (
	"fmt"
	"maps"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/resolve"
)

// Images names the adapter images that GAP-16 entries map to.
type Images struct {
	Network string
	Service string
}

// DefaultImages are the adapters this repository builds (make images).
func DefaultImages() Images {
	return Images{Network: "gcompose/golem-network:dev", Service: "gcompose/golem-service:dev"}
}

// Resources returns the desired resources of r by name.
func Resources(r *resolve.Resolved, img Images) (map[string]*plan.Resource, error) {
	out := make(map[string]*plan.Resource, len(r.Nodes))
	for _, n := range r.Nodes {
		res := &plan.Resource{Name: n.ID, DependsOn: r.Graph.DependenciesOf(n.ID), Pos: n.Pos}
		switch n.Kind {
		case resolve.ResourceNode:
			t, _ := n.Spec["type"].(string)
			res.Type = t
			if cfg, ok := n.Spec["config"].(map[string]any); ok {
				res.Config = cfg
			} else {
				res.Config = map[string]any{}
			}
		case resolve.NetworkNode:
			res.Type = img.Network
			res.Config = maps.Clone(n.Spec)
			res.Config["name"] = n.Name
		case resolve.ServiceNode:
			res.Type = img.Service
			res.Config = maps.Clone(n.Spec)
			res.Config["name"] = n.Name
			res.Config["instance"] = n.Index
			if net, ok := n.Spec["network"].(string); ok && net != "" {
				// The service adapter joins the VPN that the network
				// adapter created: its id is an output of that resource.
				res.Config["network"] = map[string]any{"name": net, "id": "${networks." + net + ".network_id}"}
			}
		default:
			return nil, fmt.Errorf("%s: unknown node kind %q", n.ID, n.Kind)
		}
		if res.Type == "" {
			return nil, fmt.Errorf("%s: %s: no adapter image", n.Pos, n.ID)
		}
		out[n.ID] = res
	}
	return out, nil
}
