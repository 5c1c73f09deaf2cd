// Package resolve turns a normalized descriptor.App into addressable nodes
// (networks, service instances, generic resources), resolves the ${...}
// references that the descriptor itself can answer, keeps those that only
// apply can answer (runtime outputs) and turns each of them, with networks,
// depends_on and generic dependencies, into a labelled edge of the
// dependency graph.
package resolve

import (
	"sort"
	"strconv"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/source"
)

// Options are the inputs from outside the descriptor.
type Options struct {
	// Vars are the values of ${var.NAME} (from --var k=v and --var-file).
	Vars map[string]string
	// Env looks up ${env.NAME}; nil means the process environment.
	Env func(string) (string, bool)
	// AppID is the value of ${app.id}; when empty, ${app.id} is kept for
	// apply time (the engine gives it: the state lineage, core/plan.OutputRef).
	AppID string
	// ReadFile reads a descriptor file to place a reference's column exactly
	// (quoted scalars, escapes); nil means os.ReadFile. Failing reads only
	// make columns approximate.
	ReadFile func(name string) ([]byte, error)
	// Outputs are the fields of services and networks that their adapters
	// report at apply time, by node kind, each with its known sub-fields
	// (nil: any): a reference to one is kept for apply and makes an edge;
	// any other field is read from the descriptor. The lowering that maps
	// services and networks onto adapters knows them (the Golem one:
	// adapters/golem/lowering.Outputs); nil: none, every field is static.
	Outputs map[Kind]map[string][]string
	// Implicit tells the resources a lowering adds of its own (the Golem
	// one: golem-payments, golem-proxy-<service>) by name: the outputs
	// section may read their state (${resources.golem-proxy-web.state.url});
	// the planner checks that the lowering really made one. Nil: none.
	Implicit func(resource string) bool
}

// Kind is what a node is.
type Kind string

const (
	NetworkNode  Kind = "network"
	ServiceNode  Kind = "service"
	ResourceNode Kind = "resource"
)

// Node is one addressable thing apply creates: a network, one instance of a
// service, or a generic resource.
type Node struct {
	// ID addresses the node: networks.default, services.db,
	// services.web[0] (when the service has instances > 1), resources.files.
	ID   string
	Kind Kind
	// Name is the descriptor entry that made the node.
	Name string
	// Index is the instance index (0 for a single instance, networks and
	// resources); Instances is the entry's instance count (1 unless expanded).
	Index, Instances int
	// Entry is the JSON pointer of the descriptor entry (/services/web).
	Entry string
	// Spec is the entry's canonical subtree with static references
	// substituted and runtime references kept as ${...} templates in
	// canonical form (${services.db.network_node.ip}). Every string in Spec
	// is in template form: a literal "${" (written "$${" by the user) stays
	// "$${", so evaluating the whole Spec at apply time (core/plan.ResolveConfig, or
	// expr.EvalTree with your own lookup) gives the right text. For a service,
	// "payload" holds the payload's subtree (with its "name") instead of its
	// name, and "instances" is left out: an instance's spec does not change
	// when the count does.
	Spec map[string]any
	// Templates are the JSON pointers, in Spec, of the strings that still
	// hold runtime references.
	Templates []string
	// Runtime lists the runtime references kept in Spec.
	Runtime []RuntimeRef
	Pos     source.Pos
}

// RuntimeRef is a reference that only apply can resolve.
type RuntimeRef struct {
	// Target is the node whose output is read (services.db); Field the path
	// inside its outputs (network_node.ip).
	Target, Field string
	// Text is the reference as written by the user; Pointer where it
	// stands in the descriptor; Pos its location.
	Text    string
	Pointer string
	Pos     source.Pos
}

// Resolved is the result of Resolve.
type Resolved struct {
	App   *descriptor.App
	Nodes []*Node // sorted by entry, then instance index
	Graph *graph.Graph
	// Counts for `gcompose validate`'s summary: descriptor services,
	// networks and resources, expanded service instances, labelled edges.
	Services, Networks, Resources, Instances, Edges int
	// Secrets are the values of the ${secret.NAME} references resolved, by
	// name: register them with the run's redactor before printing anything.
	Secrets map[string]string
	// Outputs is the descriptor's outputs section, its references to
	// resources' outputs kept for after apply (plan.ResolveConfig reads
	// them from the state).
	Outputs map[string]any

	byID map[string]*Node
}

// Node returns the node with the given ID, or nil.
func (r *Resolved) Node(id string) *Node { return r.byID[id] }

// Summary is the one-line summary `gcompose validate` prints:
// "2 services, 1 network, 5 edges".
func (r *Resolved) Summary() string {
	s := plural(r.Services, "service") + ", " + plural(r.Networks, "network")
	if r.Resources > 0 {
		s += ", " + plural(r.Resources, "resource")
	}
	return s + ", " + plural(r.Edges, "edge")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// Resolve builds the nodes and the dependency graph of app. It reports every
// problem found (unknown reference roots, names or fields, a multi-instance
// service referenced without an index, unset variables, bad depends_on,
// cycles) as diagnostics at their exact location. The result is usable only
// when the diagnostics hold no error.
func Resolve(app *descriptor.App, opts Options) (*Resolved, source.Diagnostics) {
	rv := newResolver(app, opts)
	rv.makeNodes()
	rv.resolveSpecs()
	rv.addStructuralEdges()
	out := &Resolved{
		App:       app,
		Nodes:     rv.nodes,
		Graph:     rv.g,
		Services:  len(app.Services),
		Networks:  len(app.Networks),
		Resources: len(app.Resources),
		Secrets:   rv.secrets,
		Outputs:   rv.outputs,
		byID:      rv.byID,
	}
	for _, n := range rv.nodes {
		if n.Kind == ServiceNode {
			out.Instances++
		}
	}
	out.Edges = rv.g.EdgeCount()
	rv.reportCycles()
	rv.diags.Sort()
	return out, rv.diags
}

// sortNodes orders nodes by entry and then numerically by instance index, so
// services.web[2] comes before services.web[10].
func sortNodes(ns []*Node) {
	sort.Slice(ns, func(i, j int) bool {
		a, b := ns[i], ns[j]
		if a.Entry != b.Entry {
			return entryKey(a) < entryKey(b)
		}
		return a.Index < b.Index
	})
}

func entryKey(n *Node) string { return string(n.Kind) + "s." + n.Name }
