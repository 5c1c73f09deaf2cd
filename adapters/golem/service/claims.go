package service

import (
	"net/netip"
	"slices"
	"sync"
)

// Concurrent creates of one adapter server (a deploy of many services runs
// their creates at once) read the same offers (the market watcher's warm
// book, the same providers answering each demand) and rank them alike: left
// alone, every create counters the same cheapest providers, the provider
// approves one agreement and rejects the others, and those creates start
// over with the next offer. The claims spread them instead:
//
//   - a provider countered by a create is claimed (counters): another create
//     counters the best provider nobody here is negotiating with first, and
//     a claimed one only when no other is left;
//   - the provider a create signs with is taken (take) until that create
//     ends: no other create signs with it meanwhile (it would be rejected
//     by a provider of one agreement, and rent a provider twice on one VPN
//     before either joined: vpnNodes), nor waits for its offer;
//   - a VPN address picked by a create (a network without planned
//     addresses) is reserved until that create ends, so that concurrent
//     joins pick distinct addresses; the node map stays the judge of what
//     yagna holds (join).
//
// Claims are the adapter's own bookkeeping, not the market's: a provider
// taken by another process (another deploy, another requestor) is found out
// as before, by its rejection.
type claims struct {
	mu       sync.Mutex
	next     int
	counters map[string]int   // provider key -> counter-proposals out to it
	taken    map[string]claim // provider key -> the create signing with it or running on it
	ips      map[string]claim // VPN address key -> the create that picked it
}

// claim names the create that holds a claim.
type claim struct {
	owner int
	name  string // the resource, for messages
}

// claimer is one create's handle on the adapter's claims: everything it
// holds is released by done.
type claimer struct {
	c    *claims
	me   claim
	base string // the yagna the providers are of
}

// claimer returns a handle for a create of resource name on the yagna at
// url. A nil *claims gives a nil handle, whose methods claim nothing (every
// provider free).
func (c *claims) claimer(url, name string) *claimer {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	return &claimer{c: c, me: claim{owner: c.next, name: name}, base: url}
}

func (h *claimer) key(provider string) string { return h.base + "|" + provider }

// counter records a counter-proposal out to provider; uncounter its end.
func (h *claimer) counter(provider string) {
	if h == nil {
		return
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.c.counters == nil {
		h.c.counters = map[string]int{}
	}
	h.c.counters[h.key(provider)]++
}

func (h *claimer) uncounter(provider string) {
	if h == nil {
		return
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	k := h.key(provider)
	if h.c.counters[k] <= 1 {
		delete(h.c.counters, k)
		return
	}
	h.c.counters[k]--
}

// takenBy names the other create that took provider ("" when none did).
func (h *claimer) takenBy(provider string) string {
	if h == nil {
		return ""
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if t, ok := h.c.taken[h.key(provider)]; ok && t.owner != h.me.owner {
		return t.name
	}
	return ""
}

// take claims provider for this create; false (and the other create's
// name) when another create holds it.
func (h *claimer) take(provider string) (bool, string) {
	if h == nil {
		return true, ""
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	k := h.key(provider)
	if t, ok := h.c.taken[k]; ok && t.owner != h.me.owner {
		return false, t.name
	}
	if h.c.taken == nil {
		h.c.taken = map[string]claim{}
	}
	h.c.taken[k] = h.me
	return true, ""
}

// untake releases provider if this create holds it.
func (h *claimer) untake(provider string) {
	if h == nil {
		return
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	k := h.key(provider)
	if t, ok := h.c.taken[k]; ok && t.owner == h.me.owner {
		delete(h.c.taken, k)
	}
}

// spread orders ranked (best first) for countering: the providers no other
// create is negotiating with or has taken keep their order and come first,
// then those countered already, and last those another create took (a
// create counters each provider once: its own counters are of providers it
// leaves out anyway).
func (h *claimer) spread(ranked []Offer) []Offer {
	if h == nil || len(ranked) < 2 {
		return ranked
	}
	h.c.mu.Lock()
	type load struct{ taken, counters int }
	loads := make(map[string]load, len(ranked))
	for _, o := range ranked {
		k := h.key(o.Provider)
		l := load{counters: h.c.counters[k]}
		if t, ok := h.c.taken[k]; ok && t.owner != h.me.owner {
			l.taken = 1
		}
		loads[o.Provider] = l
	}
	h.c.mu.Unlock()
	out := slices.Clone(ranked)
	slices.SortStableFunc(out, func(a, b Offer) int {
		la, lb := loads[a.Provider], loads[b.Provider]
		if la.taken != lb.taken {
			return la.taken - lb.taken
		}
		return min(la.counters, 1) - min(lb.counters, 1)
	})
	return out
}

// pickIP picks an address of VPN netID with pick, given the addresses
// other creates of this adapter hold there, and reserves it for this
// create; one lock around both, so two creates never pick the same one.
func (h *claimer) pickIP(netID string, pick func(others []string) (string, error)) (string, error) {
	if h == nil {
		return pick(nil)
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	var others []string
	for k, c := range h.c.ips {
		if n, ip, ok := cutIPKey(k); ok && c.owner != h.me.owner && n == h.base+"|"+netID {
			others = append(others, ip)
		}
	}
	slices.Sort(others)
	ip, err := pick(others)
	if err != nil {
		return "", err
	}
	if h.c.ips == nil {
		h.c.ips = map[string]claim{}
	}
	h.c.ips[h.base+"|"+netID+"#"+ip] = h.me
	return ip, nil
}

// unreserve releases address ip of VPN netID if this create holds it.
func (h *claimer) unreserve(netID, ip string) {
	if h == nil {
		return
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	k := h.base + "|" + netID + "#" + ip
	if c, ok := h.c.ips[k]; ok && c.owner == h.me.owner {
		delete(h.c.ips, k)
	}
}

// cutIPKey splits an address key into its network part and the address.
func cutIPKey(k string) (string, string, bool) {
	i := len(k) - 1
	for i >= 0 && k[i] != '#' {
		i--
	}
	if i < 0 {
		return "", "", false
	}
	if _, err := netip.ParseAddr(k[i+1:]); err != nil {
		return "", "", false
	}
	return k[:i], k[i+1:], true
}

// done releases everything this create holds: its takes and addresses
// (its counters are released by the negotiation that made them).
func (h *claimer) done() {
	if h == nil {
		return
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	for k, t := range h.c.taken {
		if t.owner == h.me.owner {
			delete(h.c.taken, k)
		}
	}
	for k, c := range h.c.ips {
		if c.owner == h.me.owner {
			delete(h.c.ips, k)
		}
	}
}
