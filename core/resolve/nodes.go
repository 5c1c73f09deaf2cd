package resolve

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/internal/jsonpointer"
)

// resolver holds the state of one Resolve call.
type resolver struct {
	app   *descriptor.App
	opts  Options
	tree  map[string]any
	diags source.Diagnostics
	g     *graph.Graph

	nodes []*Node
	byID  map[string]*Node
	// outputs is the outputs section, resolved as far as now possible.
	outputs map[string]any
	// instances of each service, in index order.
	services map[string][]*Node
	lines    *lineCache
	// kept counts strings left as templates for apply, so a caller can tell
	// whether resolving a value left any.
	kept int
	// failures counts strings whose resolution failed (and were reported).
	failures int
	// reported dedupes diagnostics: a payload shared by several services
	// or instances is resolved once per instance.
	reported map[source.Diagnostic]bool
	// secrets holds the values of the ${secret.NAME} read so far.
	secrets map[string]string
}

func newResolver(app *descriptor.App, opts Options) *resolver {
	if opts.Env == nil {
		opts.Env = os.LookupEnv
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	return &resolver{
		app:      app,
		opts:     opts,
		tree:     app.Tree(),
		g:        graph.New(),
		byID:     map[string]*Node{},
		services: map[string][]*Node{},
		lines:    newLineCache(opts.ReadFile),
		reported: map[source.Diagnostic]bool{},
	}
}

// ServiceID is the ID of instance index of a service with n instances
// (package address holds the grammar).
func ServiceID(name string, index, n int) string { return address.Service(name, index, n) }

// NetworkID and ResourceID are the IDs of a network and a generic resource.
func NetworkID(name string) string  { return address.Network(name) }
func ResourceID(name string) string { return address.Resource(name) }

func (rv *resolver) add(n *Node) {
	rv.nodes = append(rv.nodes, n)
	rv.byID[n.ID] = n
	attrs := map[string]any{"name": n.Name, "entry": n.Entry}
	if n.Instances > 1 {
		attrs["index"] = n.Index
		attrs["instances"] = n.Instances
	}
	if n.Pos.IsValid() {
		attrs["pos"] = n.Pos.String()
	}
	rv.g.AddVertex(n.ID, string(n.Kind), attrs)
}

func (rv *resolver) makeNodes() {
	total := len(rv.app.Networks) + len(rv.app.Resources)
	for _, s := range rv.app.Services {
		total += max(s.Instances, 1)
	}
	rv.g.Grow(total, 2*total) // a network edge each, and some more
	rv.nodes = make([]*Node, 0, total)
	for _, name := range slices.Sorted(maps.Keys(rv.app.Networks)) {
		rv.add(&Node{ID: NetworkID(name), Kind: NetworkNode, Name: name, Instances: 1,
			Entry: pointer("networks", name), Pos: rv.entryPos(rv.app.Networks[name].Pos, "networks", name)})
	}
	for _, name := range slices.Sorted(maps.Keys(rv.app.Services)) {
		svc := rv.app.Services[name]
		n := max(svc.Instances, 1)
		for i := 0; i < n; i++ {
			node := &Node{ID: ServiceID(name, i, n), Kind: ServiceNode, Name: name, Index: i, Instances: n,
				Entry: pointer("services", name), Pos: rv.entryPos(svc.Pos, "services", name)}
			rv.add(node)
			rv.services[name] = append(rv.services[name], node)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rv.app.Resources)) {
		rv.add(&Node{ID: ResourceID(name), Kind: ResourceNode, Name: name, Instances: 1,
			Entry: pointer("resources", name), Pos: rv.entryPos(rv.app.Resources[name].Pos, "resources", name)})
	}
	sortNodes(rv.nodes)
}

func (rv *resolver) entryPos(p source.Pos, tokens ...string) source.Pos {
	if p.IsValid() {
		return p
	}
	return rv.app.Pos(pointer(tokens...))
}

// resolveSpecs builds every node's Spec, resolving references in the
// context of that node (instance.index differs per instance), and checks
// the references in meta.
func (rv *resolver) resolveSpecs() {
	for _, n := range rv.nodes {
		switch n.Kind {
		case NetworkNode:
			n.Spec, n.Templates = rv.specOf(n, "networks", n.Name)
		case ResourceNode:
			n.Spec, n.Templates = rv.specOf(n, "resources", n.Name)
		case ServiceNode:
			spec, templates := rv.specOf(n, "services", n.Name)
			delete(spec, "instances")
			if p := rv.app.Services[n.Name].Payload; p != "" {
				if _, ok := rv.app.Payloads[p]; ok {
					var payload map[string]any
					var ptmpl []string
					payload, ptmpl = rv.specOf(n, "payloads", p)
					payload["name"] = p
					spec["payload"] = payload
					kept := templates[:0]
					for _, t := range templates {
						if t != "/payload" {
							kept = append(kept, t)
						}
					}
					templates = kept
					for _, t := range ptmpl {
						templates = append(templates, "/payload"+t)
					}
				}
			}
			n.Spec, n.Templates = spec, templates
		}
	}
	if meta, ok := rv.tree["meta"]; ok {
		rv.resolveValue(&scope{}, "/meta", meta, false)
	}
	if outs, ok := rv.tree["outputs"]; ok {
		v, _ := rv.resolveValue(&scope{outputs: true}, "/outputs", outs, true)
		rv.outputs, _ = v.(map[string]any)
	}
}

// specOf resolves the subtree tree[section][name] for node n, and returns
// the pointers of the strings still holding runtime references.
func (rv *resolver) specOf(n *Node, section, name string) (map[string]any, []string) {
	sub, _ := rv.tree[section].(map[string]any)
	entry, _ := sub[name].(map[string]any)
	v, templates := rv.resolveValue(&scope{node: n}, pointer(section, name), entry, true)
	out, _ := v.(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out, templates
}

// errorf reports a problem once, however many instances met it.
func (rv *resolver) errorf(p source.Pos, format string, args ...any) {
	d := source.Diagnostic{Pos: p, Severity: source.Error, Message: fmt.Sprintf(format, args...)}
	if !rv.reported[d] {
		rv.reported[d] = true
		rv.diags = append(rv.diags, d)
	}
}

// addStructuralEdges adds the edges the descriptor states directly: a
// service's network, depends_on, generic dependencies.
func (rv *resolver) addStructuralEdges() {
	for _, name := range slices.Sorted(maps.Keys(rv.app.Services)) {
		svc := rv.app.Services[name]
		from := rv.services[name]
		// An undefined network (or payload, or resource dependency below) is
		// reported by the descriptor's semantic checks: only the edge is
		// left out here, so the problem is not reported twice.
		if _, ok := rv.app.Networks[svc.Network]; ok {
			ptr := pointer("services", name, "network")
			for _, n := range from {
				rv.edge(graph.Edge{From: n.ID, To: NetworkID(svc.Network), Kind: graph.Network, Reason: svc.Network, Pos: rv.app.Pos(ptr)})
			}
		}
		for i, dep := range svc.DependsOn {
			ptr := pointer("services", name, "depends_on", strconv.Itoa(i))
			targets, ok := rv.services[dep]
			if !ok {
				rv.errorf(rv.app.Pos(ptr), "service %q: depends_on %q names no service%s", name, dep, source.Suggest(dep, slices.Sorted(maps.Keys(rv.app.Services))))
				continue
			}
			for _, n := range from {
				for _, t := range targets { // every instance of a multi-instance service
					rv.edge(graph.Edge{From: n.ID, To: t.ID, Kind: graph.DependsOn, Reason: dep, Pos: rv.app.Pos(ptr)})
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rv.app.Resources)) {
		res := rv.app.Resources[name]
		for _, alias := range slices.Sorted(maps.Keys(res.Dependencies)) {
			dep := res.Dependencies[alias]
			ptr := pointer("resources", name, "dependencies", alias)
			if _, ok := rv.app.Resources[dep]; !ok {
				continue // reported by the descriptor's semantic checks
			}
			rv.edge(graph.Edge{From: ResourceID(name), To: ResourceID(dep), Kind: graph.Dependency, Reason: alias, Pos: rv.app.Pos(ptr)})
		}
	}
}

// edge adds an edge between two nodes (every node exists before the first
// edge is added).
func (rv *resolver) edge(e graph.Edge) {
	if err := rv.g.AddEdge(e); err != nil { // cannot happen: both ends are nodes
		rv.errorf(e.Pos, "internal: %v", err)
	}
}

// reportCycles turns every cycle into one diagnostic at its first edge,
// printing the cycle whole with each edge's location.
func (rv *resolver) reportCycles() {
	for _, c := range rv.g.Cycles() {
		rv.errorf(c.Edges[0].Pos, "%s", c.String())
	}
}

// pointer builds a JSON pointer from unescaped tokens.
func pointer(tokens ...string) string {
	var b []byte
	for _, t := range tokens {
		b = append(b, '/')
		b = append(b, jsonpointer.Escape(t)...)
	}
	return string(b)
}
