// Package lowering turns a resolved application into the resources the engine
// converges: generic resources as written, and GAP-16 networks and services
// as resources of the Golem adapter images.
//
// The Golem lowering (docs/golem.md) adds, for an app with services:
//   - resources.golem-payments (golem-payments): the app's allocation and its
//     long-lived payments keeper; every rented service depends on it and
//     reads ${resources.golem-payments.state.allocation_id}. A descriptor
//     sets the budget or platform by writing that resource itself
//     (resources: golem-payments: {type: <payments image>, config: {...}});
//   - resources.golem-proxy-<service>[-<i>] (golem-proxy) per instance of a
//     service with http_proxy / tcp_proxy: a long-lived local proxy that
//     depends on the service and reads its node address and VPN id;
//   - a service whose payload runtime is local-http-proxy is not rented: it
//     becomes a golem-proxy resource (keeping its services.<name> id) in
//     front of the service it depends on.
//
// The two adapters that run long-lived containers declare the plug
// payments.DockerPlug (the Docker socket); ImplicitPlugs offers it to those
// adapter images only, without the descriptor naming it.
package lowering

import (
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"

	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/payloadbuild"
	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/lower"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/resolve"
)

// Images names the adapter images that GAP-16 entries map to.
type Images struct {
	Network  string
	Service  string
	Payments string
	Proxy    string
}

// DefaultImages are the adapters this repository builds (make images).
func DefaultImages() Images {
	return Images{
		Network: "gcompose/golem-network:dev", Service: "gcompose/golem-service:dev",
		Payments: "gcompose/golem-payments:dev", Proxy: "gcompose/golem-proxy:dev",
	}
}

func (img Images) withDefaults() Images {
	d := DefaultImages()
	if img.Network == "" {
		img.Network = d.Network
	}
	if img.Service == "" {
		img.Service = d.Service
	}
	if img.Payments == "" {
		img.Payments = d.Payments
	}
	if img.Proxy == "" {
		img.Proxy = d.Proxy
	}
	return img
}

// Names of the resources the Golem lowering adds.
const (
	PaymentsResource = address.Resources + ".golem-payments"
	proxyPrefix      = address.Resources + ".golem-proxy-"
)

// ProxyResource is the name of the proxy resource of a service instance.
func ProxyResource(service string, index, instances int) string {
	if instances <= 1 {
		return proxyPrefix + service
	}
	return proxyPrefix + service + "-" + strconv.Itoa(index)
}

// Payment defaults of the lowering (docs/golem.md). No platform is set by
// default: the payments adapter picks one of the requestor's funded accounts.
const (
	DefaultBudget = "5"
	// LocalProxyRuntime is GAP-16's runtime for a requestor-side proxy.
	LocalProxyRuntime = "local-http-proxy"
)

// DockerPlug is the plug the golem-payments and golem-proxy adapters declare.
const DockerPlug = "golem-docker-socket"

// ImplicitPlugs are the plugs the Golem lowering offers without the
// descriptor naming it: the Docker socket, to the payments and proxy
// adapter images only (they run the long-lived containers). The socket is
// the one of the engine gcompose runs its adapters on: engine is
// DOCKER_HOST as the Docker client reads it ("": the default socket).
func ImplicitPlugs(img Images, engine string) map[string]adapter.Plug {
	img = img.withDefaults()
	pl := adapter.Plug{ResourceTypes: []string{regexp.QuoteMeta(img.Payments) + "$", regexp.QuoteMeta(img.Proxy) + "$"}}
	pl.Path, pl.Err = EngineSocket(engine)
	return map[string]adapter.Plug{DockerPlug: pl}
}

// EngineSocket is the host path of the socket of the engine DOCKER_HOST
// names (engine; "": the Docker client's default,
// unix:///var/run/docker.sock): the payments and proxy
// adapters mount it at /var/run/docker.sock and create their long-lived
// containers on the engine gcompose runs them on (Podman's socket too,
// docs/engines.md). An engine reached otherwise (tcp://, ssh://) has no
// socket here to mount: an error says what to do.
func EngineSocket(engine string) (string, error) {
	if engine == "" {
		engine = client.DefaultDockerHost
	}
	u, err := client.ParseHostURL(engine)
	if err != nil {
		return "", fmt.Errorf("DOCKER_HOST=%s: %w", engine, err)
	}
	if u.Scheme != "unix" {
		return "", fmt.Errorf("DOCKER_HOST=%s is not a unix socket: the Golem payments and proxy adapters run their long-lived containers "+
			"through the engine's socket, mounted into them, and an engine reached over %s has none on this machine; "+
			"run gcompose on the engine's machine with DOCKER_HOST=unix:///path/to/its.sock (docs/engines.md)", engine, u.Scheme)
	}
	// As written: the engine resolves a bind mount's source in its own
	// filesystem (a symlink too), which may not be gcompose's (gcompose in
	// a container).
	return u.Host, nil
}

// Golem is the Golem lowering (core/lower.Lowering) with its adapter images
// and the engine the adapters run on (DOCKER_HOST; "": the default socket).
type Golem struct {
	Images Images
	Engine string
}

var _ lower.Lowering = Golem{}

func (g Golem) Resources(r *resolve.Resolved) (map[string]*plan.Resource, error) {
	return Resources(r, g.Images)
}
func (g Golem) Plugs() map[string]adapter.Plug                { return ImplicitPlugs(g.Images, g.Engine) }
func (g Golem) Outputs() map[resolve.Kind]map[string][]string { return Outputs() }

// Outputs are what the Golem adapters report for a service and a network
// (the golem-service and golem-network state), with the known sub-fields
// of each (nil: any): ${services.db.network_node.ip} is known at apply time.
func Outputs() map[resolve.Kind]map[string][]string {
	return map[resolve.Kind]map[string][]string{
		resolve.ServiceNode: {
			"network_node": {"ip", "node_id"},
			"agreement":    {"id", "provider_id", "provider_name"},
			"activity":     {"id"},
			"state":        nil,
		},
		resolve.NetworkNode: {"network_id": nil, "owner_id": nil, "state": nil},
	}
}

// Resources returns the desired resources of r by name.
func Resources(r *resolve.Resolved, img Images) (map[string]*plan.Resource, error) {
	img = img.withDefaults()
	out := make(map[string]*plan.Resource, len(r.Nodes))
	nodeIPs, err := planNodeIPs(r)
	if err != nil {
		return nil, err
	}
	rented := 0
	hashes := map[string]string{} // build context -> its hash, once per lowering
	for _, n := range r.Nodes {
		if n.Kind == resolve.ServiceNode && !isLocalProxy(n) {
			rented++
		}
	}
	for _, n := range r.Nodes {
		res := &plan.Resource{Name: n.ID, DependsOn: r.Graph.DependenciesOf(n.ID), Pos: n.Pos}
		// protect: true guards the resource in the plan; no adapter is told.
		res.Protect, _ = n.Spec["protect"].(bool)
		switch n.Kind {
		case resolve.ResourceNode:
			g, err := lower.Resource(r, n)
			if err != nil {
				return nil, err
			}
			res = g
		case resolve.NetworkNode:
			res.Type = img.Network
			res.Config = maps.Clone(n.Spec)
			res.Config["name"] = n.Name
		case resolve.ServiceNode:
			if isLocalProxy(n) {
				p, err := localProxy(r, n, img)
				if err != nil {
					return nil, err
				}
				out[n.ID] = p
				continue
			}
			res.Type = img.Service
			res.Config = maps.Clone(n.Spec)
			delete(res.Config, "protect")
			if err := builtImage(res.Config, hashes); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", n.Pos, n.ID, err)
			}
			res.Config["name"] = n.Name
			res.Config["instance"] = n.Index
			if net, ok := n.Spec["network"].(string); ok && net != "" {
				// The service adapter joins the VPN that the network
				// adapter created: its id is an output of that resource.
				res.Config["network"] = map[string]any{"name": net, "id": address.OutputRef(address.Network(net), "network_id")}
			}
			if ip, ok := nodeIPs[n.ID]; ok {
				res.Config[NodeIPKey] = ip
				if m := vpnMembers(r, n, nodeIPs); len(m) > 1 {
					res.Config[VPNMembersKey] = m
				}
			}
			// Paid from the app's allocation.
			res.Config["allocation_id"] = address.OutputRef(PaymentsResource, "allocation_id")
			res.DependsOn = appendDep(res.DependsOn, PaymentsResource)
			if p, err := proxyOf(n, img); err != nil {
				return nil, err
			} else if p != nil {
				out[p.Name] = p
			}
		default:
			return nil, fmt.Errorf("%s: unknown node kind %q", n.ID, n.Kind)
		}
		if res.Type == "" {
			return nil, fmt.Errorf("%s: %s: no adapter image", n.Pos, n.ID)
		}
		out[n.ID] = res
	}
	fingerprintMembers(out)
	if own, ok := out[PaymentsResource]; ok {
		// The descriptor may write the payments resource itself to set the
		// budget or the platform; it must be of the payments image.
		if own.Type != img.Payments {
			return nil, fmt.Errorf("%s: %s is the Golem payments resource: its type must be %s (or rename it)", own.Pos, PaymentsResource, img.Payments)
		}
		cfg := maps.Clone(own.Config)
		if _, ok := cfg["budget"]; !ok {
			cfg["budget"] = DefaultBudget
		}
		own.Config = cfg
	} else if rented > 0 {
		out[PaymentsResource] = &plan.Resource{Name: PaymentsResource, Type: img.Payments,
			Config: map[string]any{"budget": DefaultBudget}}
	}
	return out, nil
}

func appendDep(deps []string, d string) []string {
	for _, x := range deps {
		if x == d {
			return deps
		}
	}
	out := append(append([]string(nil), deps...), d)
	sort.Strings(out)
	return out
}

func isLocalProxy(n *resolve.Node) bool {
	p, _ := n.Spec["payload"].(map[string]any)
	rt, _ := p["runtime"].(string)
	return rt == LocalProxyRuntime
}

// ports reads a service's http_proxy / tcp_proxy ports.
func ports(spec map[string]any, key string) []any {
	m, _ := spec[key].(map[string]any)
	l, _ := m["ports"].([]any)
	return l
}

// proxyOf is the proxy resource of a rented service instance with
// http_proxy / tcp_proxy, nil when it has none.
func proxyOf(n *resolve.Node, img Images) (*plan.Resource, error) {
	http, tcp := ports(n.Spec, "http_proxy"), ports(n.Spec, "tcp_proxy")
	if len(http) == 0 && len(tcp) == 0 {
		return nil, nil
	}
	net, _ := n.Spec["network"].(string)
	if net == "" {
		return nil, fmt.Errorf("%s: %s: http_proxy/tcp_proxy need the service on a network (the proxy tunnels through its VPN)", n.Pos, n.ID)
	}
	if n.Instances > 1 {
		for _, p := range append(append([]any(nil), http...), tcp...) {
			if s, _ := p.(string); containsColon(s) {
				return nil, fmt.Errorf("%s: %s: a fixed local port (%q) cannot serve %d instances; give the remote port only", n.Pos, n.ID, s, n.Instances)
			}
		}
	}
	cfg := map[string]any{
		"service":    n.ID,
		"network_id": address.OutputRef(address.Network(net), "network_id"),
		"ip":         address.OutputRef(n.ID, "network_node.ip"),
	}
	if len(http) > 0 {
		cfg["http"] = http
	}
	if len(tcp) > 0 {
		cfg["tcp"] = tcp
	}
	return &plan.Resource{Name: ProxyResource(n.Name, n.Index, n.Instances), Type: img.Proxy, Config: cfg,
		DependsOn: []string{address.Network(net), n.ID}, Pos: n.Pos}, nil
}

func containsColon(s string) bool {
	for _, c := range s {
		if c == ':' {
			return true
		}
	}
	return false
}

// localProxy lowers a local-http-proxy service: a proxy in front of the
// (first) service it depends on, on that service's network.
func localProxy(r *resolve.Resolved, n *resolve.Node, img Images) (*plan.Resource, error) {
	deps, _ := n.Spec["depends_on"].([]any)
	if len(deps) == 0 {
		return nil, fmt.Errorf("%s: %s: a %s service proxies the service it depends on: add depends_on", n.Pos, n.ID, LocalProxyRuntime)
	}
	target, _ := deps[0].(string)
	t := r.Node(resolve.ServiceID(target, 0, 1))
	if t == nil {
		return nil, fmt.Errorf("%s: %s: depends_on %q must name a single-instance service", n.Pos, n.ID, target)
	}
	net, _ := t.Spec["network"].(string)
	if net == "" {
		net, _ = n.Spec["network"].(string)
	}
	if net == "" {
		return nil, fmt.Errorf("%s: %s: the proxied service %s is on no network", n.Pos, n.ID, target)
	}
	http := ports(n.Spec, "http_proxy")
	if len(http) == 0 {
		http = ports(t.Spec, "http_proxy")
	}
	if len(http) == 0 {
		http = []any{"80"}
	}
	cfg := map[string]any{
		"service":    t.ID,
		"network_id": address.OutputRef(address.Network(net), "network_id"),
		"ip":         address.OutputRef(t.ID, "network_node.ip"),
		"http":       http,
	}
	return &plan.Resource{Name: n.ID, Type: img.Proxy, Config: cfg,
		DependsOn: appendDep(appendDep(r.Graph.DependenciesOf(n.ID), t.ID), address.Network(net)), Pos: n.Pos}, nil
}

// builtImage replaces a payload's build: (its context folder) by the params.image_hash of the image built
// from it: the hash of the context (adapters/golem/payloadbuild), known from the files alone, so that the
// plan shows a changed source as a rebuild of the services of that payload. The service adapter never
// sees build:; the image is built before the plan (cmd/gcompose), on the devnet only.
func builtImage(cfg map[string]any, hashes map[string]string) error {
	p, _ := cfg["payload"].(map[string]any)
	dir, _ := p["build"].(string)
	if dir == "" {
		return nil
	}
	hash, ok := hashes[dir]
	if !ok {
		h, err := payloadbuild.Hash(dir)
		if err != nil {
			return fmt.Errorf("payload build: %w", err)
		}
		hash, hashes[dir] = h, h
	}
	p = maps.Clone(p)
	delete(p, "build")
	params, _ := p["params"].(map[string]any)
	params = maps.Clone(params)
	if params == nil {
		params = map[string]any{}
	}
	params["image_hash"] = hash
	p["params"] = params
	cfg["payload"] = p
	return nil
}
