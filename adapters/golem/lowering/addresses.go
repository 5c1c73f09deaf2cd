package lowering

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/resolve"
)

// NodeIPKey is the service config key that carries the instance's planned
// VPN address.
const NodeIPKey = "node_ip"

// planNodeIPs gives every instance of a service on a network its VPN
// address, once, at lowering time: the descriptor's ip[i] when it names
// one, else a free host address chosen from a hash of the instance's id.
//
// Planned here, not by each create: yagna answers 200, not 409, when a node
// is added at an address another node holds, and keeps that other node
// (core/vpn/src/network.rs, Handler<AddNode>: Err(IpAddrTaken) ignored), so
// two services created in parallel that each pick "the first free address"
// both succeed and one of them is unreachable. A planned address is the same
// on every deploy, for every rebuild of the instance, and in every parallel
// create; the hash keeps an instance's address when services are added to
// or removed from the network, except for the rare instance whose slot
// collides with a new one's.
//
// Not planned: the network's own address and broadcast address, the
// requestor's address, the gateway (yagna's default is the first host,
// core/vpn/src/network.rs create_network), and in networks of more than 16
// hosts the two highest (the devnet's Docker bridge holds them). A network whose range is not a literal (a
// reference) is left to the service adapter, which picks a free address
// and checks the node map.
func planNodeIPs(r *resolve.Resolved) (map[string]string, error) {
	nets := map[string]*resolve.Node{}
	members := map[string][]*resolve.Node{}
	for _, n := range r.Nodes {
		switch {
		case n.Kind == resolve.NetworkNode:
			nets[n.Name] = n
		case n.Kind == resolve.ServiceNode && !isLocalProxy(n):
			if net, _ := n.Spec["network"].(string); net != "" {
				members[net] = append(members[net], n)
			}
		}
	}
	out := map[string]string{}
	for name, svcs := range members {
		nn := nets[name]
		if nn == nil {
			continue
		}
		pool, ok := addressPool(nn.Spec)
		if !ok {
			continue
		}
		sort.Slice(svcs, func(i, j int) bool { return svcs[i].ID < svcs[j].ID })
		var open []*resolve.Node
		for _, s := range svcs {
			ip, ok := explicitIP(s)
			if !ok {
				open = append(open, s)
				continue
			}
			a, err := netip.ParseAddr(ip)
			if err != nil || !pool.prefix.Contains(a) {
				continue // core/descriptor reports it; the adapter fails on it with the same message
			}
			pool.take(a)
			out[s.ID] = a.String()
		}
		for _, s := range open {
			a, ok := pool.claim(s.ID)
			if !ok {
				return nil, fmt.Errorf("%s: %s: no free address left in network %s (%s) for it", s.Pos, s.ID, name, pool.prefix)
			}
			out[s.ID] = a.String()
		}
	}
	return out, nil
}

// explicitIP is the descriptor's address for the instance, if any.
func explicitIP(s *resolve.Node) (string, bool) {
	var list []string
	switch v := s.Spec["ip"].(type) {
	case string:
		list = []string{v}
	case []any:
		for _, x := range v {
			str, _ := x.(string)
			list = append(list, str)
		}
	case []string:
		list = v
	}
	if s.Index < len(list) && list[s.Index] != "" && !strings.Contains(list[s.Index], "${") {
		return list[s.Index], true
	}
	return "", false
}

// pool is the plannable host addresses of a network.
type pool struct {
	prefix netip.Prefix
	hosts  []netip.Addr
	taken  map[netip.Addr]bool
}

func addressPool(spec map[string]any) (*pool, bool) {
	ip, _ := spec["ip"].(string)
	mask, _ := spec["mask"].(string)
	owner, _ := spec["owner_ip"].(string)
	gateway, _ := spec["gateway"].(string)
	for _, s := range []string{ip, mask, owner, gateway} {
		if strings.Contains(s, "${") {
			return nil, false
		}
	}
	if ip == "" {
		return nil, false
	}
	rg, err := network.ParseRange(ip, mask, owner)
	if err != nil {
		return nil, false
	}
	p := &pool{prefix: rg.Prefix, taken: map[netip.Addr]bool{rg.OwnerIP: true}}
	first := rg.Prefix.Addr().Next()
	if gw, err := netip.ParseAddr(gateway); err == nil {
		p.taken[gw] = true
	} else {
		p.taken[first] = true
	}
	bcast := network.Broadcast(rg.Prefix)
	for a := first; a.IsValid() && a.Less(bcast); a = a.Next() {
		p.hosts = append(p.hosts, a)
	}
	if len(p.hosts) > 16 {
		p.hosts = p.hosts[:len(p.hosts)-2]
	}
	return p, true
}

func (p *pool) take(a netip.Addr) { p.taken[a] = true }

// claim takes the first free address from the instance's hash slot on.
func (p *pool) claim(id string) (netip.Addr, bool) {
	if len(p.hosts) == 0 {
		return netip.Addr{}, false
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	start := int(h.Sum32() % uint32(len(p.hosts)))
	for i := range p.hosts {
		a := p.hosts[(start+i)%len(p.hosts)]
		if !p.taken[a] {
			p.taken[a] = true
			return a, true
		}
	}
	return netip.Addr{}, false
}

// VPNMembersKey is the service config key that lists every rented instance
// on the service's network (itself included), for the plan's joint
// estimate: one provider is one node of a VPN (the node id is the
// provider's), so the members need distinct providers, and the service
// adapter's estimate plans them together as the creates will take them.
const VPNMembersKey = "vpn_members"

// marketParams are the payload params that decide which offers a service
// takes (adapters/golem/service Config.Market): a member's estimate judges
// the market with each member's own.
var marketParams = []string{"max_start_price", "max_cpu_per_hour", "max_env_per_hour", "expected_cpu_load", "providers_allow", "providers_deny"}

// vpnMembers lists the rented instances on n's network that have a planned
// address, in the order apply creates them (a member after those it depends
// on, directly or not; by id otherwise): {"service", "name", "node_ip",
// "params", "after"}, and "config" once every resource is lowered
// (fingerprintMembers). The planned address identifies a member in the
// VPN's node map, its name (what its adapter receives) and config the
// rental that runs there; "after" names the members created before it for
// certain.
func vpnMembers(r *resolve.Resolved, n *resolve.Node, nodeIPs map[string]string) []any {
	net, _ := n.Spec["network"].(string)
	var ids []string
	byID := map[string]*resolve.Node{}
	for _, m := range r.Nodes {
		if m.Kind != resolve.ServiceNode || isLocalProxy(m) {
			continue
		}
		if mn, _ := m.Spec["network"].(string); mn != net {
			continue
		}
		if _, ok := nodeIPs[m.ID]; !ok {
			continue
		}
		ids = append(ids, m.ID)
		byID[m.ID] = m
	}
	sort.Strings(ids)
	// after: the members each one depends on, through any resource.
	after := map[string][]string{}
	for _, id := range ids {
		seen := map[string]bool{}
		stack := []string{id}
		for len(stack) > 0 {
			cur := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, d := range r.Graph.DependenciesOf(cur) {
				if !seen[d] {
					seen[d] = true
					stack = append(stack, d)
				}
			}
		}
		for _, o := range ids {
			if o != id && seen[o] {
				after[id] = append(after[id], o)
			}
		}
	}
	// Created order: repeatedly the first (by id) whose members before it
	// are placed (the graph has no cycles: resolve refuses them).
	var order []string
	placed := map[string]bool{}
	for len(order) < len(ids) {
		progressed := false
		for _, id := range ids {
			if placed[id] {
				continue
			}
			ready := true
			for _, d := range after[id] {
				ready = ready && placed[d]
			}
			if ready {
				placed[id] = true
				order = append(order, id)
				progressed = true
				break
			}
		}
		if !progressed {
			break
		}
	}
	out := make([]any, 0, len(order))
	for _, id := range order {
		params := map[string]any{}
		p, _ := byID[id].Spec["payload"].(map[string]any)
		pp, _ := p["params"].(map[string]any)
		for _, k := range marketParams {
			if v, ok := pp[k]; ok {
				params[k] = v
			}
		}
		m := map[string]any{"service": id, "name": address.AdapterName(id), "node_ip": nodeIPs[id], "params": params}
		if len(after[id]) > 0 {
			a := make([]any, len(after[id]))
			for i, x := range after[id] {
				a[i] = x
			}
			m["after"] = a
		}
		out = append(out, m)
	}
	return out
}

// memberConfigFields are what decides a member's rebuild in its lowered
// config: the service adapter's rebuild fields (adapters/golem/service
// rebuildFields) and the planned address (a node elsewhere is moved).
var memberConfigFields = []string{"payload", "init", "ip", NodeIPKey, "network"}

// ConfigFingerprint is a lowered service config's fingerprint in
// vpn_members: 16 hex digits of the SHA-256 of its memberConfigFields as
// JSON (keys sorted). References are hashed as written: a member whose
// config changes only through a value known at apply time keeps its
// fingerprint.
func ConfigFingerprint(cfg map[string]any) string {
	m := make(map[string]any, len(memberConfigFields))
	for _, k := range memberConfigFields {
		m[k] = cfg[k]
	}
	b, _ := json.Marshal(m) // map keys are sorted: canonical
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// fingerprintMembers gives every vpn_members entry of the lowered
// resources the fingerprint of its member's lowered config (a payload's
// build already replaced by its image_hash), which the member's create
// tags its demand with: a later plan sees which running members the
// deploy rebuilds.
func fingerprintMembers(out map[string]*plan.Resource) {
	for _, res := range out {
		list, _ := res.Config[VPNMembersKey].([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			id, _ := m["service"].(string)
			if r := out[id]; r != nil && m != nil {
				m["config"] = ConfigFingerprint(r.Config)
			}
		}
	}
}
