package service

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// VPNMember is one rented instance on a service's VPN as the lowering lists
// it (config vpn_members, adapters/golem/lowering vpnMembers): the members
// of one VPN need distinct providers (a provider is one node of a VPN; the
// create skips a provider that is a node already), so the plan's estimate
// plans them together.
type VPNMember struct {
	Service string `json:"service"`
	// Name is the name the member's adapter receives (its demand's
	// gcompose.resource tag): "db", "web-1", not the address
	// "services.db".
	Name   string `json:"name,omitempty"`
	NodeIP string `json:"node_ip"`
	// Config fingerprints what decides the member's rebuild (its lowered
	// payload, init, ip, node_ip and network); its rental's demand carries
	// the one it was made for (tag.Config).
	Config string         `json:"config,omitempty"`
	Params map[string]any `json:"params,omitempty"`
	// After are the members created before it for certain (it depends on
	// them); the list is in that order.
	After []string `json:"after,omitempty"`
}

// market is the member's Market: its own caps and lists over the rest of
// cfg's (the members share a VPN, not their payloads' params).
func (v VPNMember) market(cfg Config) (Market, error) {
	c := cfg
	c.Payload.Params = map[string]any{}
	for k, x := range cfg.Payload.Params {
		c.Payload.Params[k] = x
	}
	for _, k := range []string{"max_start_price", "max_cpu_per_hour", "max_env_per_hour", "expected_cpu_load", "providers_allow", "providers_deny"} {
		delete(c.Payload.Params, k)
		if x, ok := v.Params[k]; ok {
			c.Payload.Params[k] = x
		}
	}
	m, err := c.Market()
	if err != nil {
		return m, fmt.Errorf("vpn member %s: %w", v.Service, err)
	}
	return m, nil
}

// claimant is a member that takes a provider from the market the estimate
// sees: Market judges offers for it.
type claimant struct {
	Service string
	Market  Market
	After   []string
	// Freed are the offers, at their agreed prices, of the providers that
	// members it is created after leave when they are rebuilt: free for it
	// only, once those rebuilds are done.
	Freed []Offer
}

// assignment is what a joint plan gives one claimant.
type assignment struct {
	Service string
	After   []string
	// Offer is the offer it is planned on; OK false when none is left.
	Offer Offer
	OK    bool
	// Within are the providers whose offers are within its caps, best first.
	Within []Offer
}

// assign plans claimants onto offers as apply's creates take them: each
// gets the cheapest offer within its own caps and lists whose provider no
// claimant before it took. offers are the market as the estimate saw it
// (judged by any Market: each claimant judges them again).
func assign(offers []Offer, claimants []claimant, exp time.Duration) []assignment {
	taken := map[string]bool{}
	out := make([]assignment, 0, len(claimants))
	for _, c := range claimants {
		var judged []Offer
		for _, o := range withFreed(offers, c.Freed) {
			j := c.Market.Judge(&yagna.Proposal{ProposalID: o.ProposalID, IssuerID: o.Provider, Properties: o.props}, exp)
			// A skip for all (an avoided provider, a node of the VPN
			// already, unusable terms) stays; the lists are each member's.
			if o.Skip != "" && j.Skip == "" && !strings.Contains(o.Skip, "(providers_") {
				j.Skip = o.Skip
			}
			judged = append(judged, j)
		}
		a := assignment{Service: c.Service, After: c.After, Within: Rank(judged)}
		for _, o := range a.Within {
			if !taken[o.Provider] {
				a.Offer, a.OK = o, true
				taken[o.Provider] = true
				break
			}
		}
		out = append(out, a)
	}
	return out
}

// withFreed is offers with a claimant's freed providers at their agreed
// prices in place of what they offer now (a node of the VPN: skipped).
func withFreed(offers, freed []Offer) []Offer {
	if len(freed) == 0 {
		return offers
	}
	out := make([]Offer, 0, len(offers)+len(freed))
	for _, o := range offers {
		if !slices.ContainsFunc(freed, func(f Offer) bool { return f.Provider == o.Provider }) {
			out = append(out, o)
		}
	}
	return append(out, freed...)
}

// conflict is the refusal of a member left without a provider although
// offers within its caps exist: the members before it took them.
func conflict(network string, as []assignment, me int) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Service
	}
	var within []string
	for _, o := range as[me].Within {
		within = append(within, o.Who())
	}
	var took []string
	for _, a := range as[:me] {
		if a.OK && slices.ContainsFunc(as[me].Within, func(o Offer) bool { return o.Provider == a.Offer.Provider }) {
			took = append(took, a.Service+" takes "+a.Offer.Who())
		}
	}
	return fmt.Sprintf("%d services on VPN %s need distinct providers (%s), and %d offer(s) are within the caps of %s: %s; %s: raise the caps or widen the provider lists",
		len(as), network, strings.Join(names, ", "), len(within), as[me].Service, strings.Join(within, ", "), strings.Join(took, ", "))
}

// jointNote says how a member's estimate depends on the others: which
// cheaper providers they take, and, where apply rents them at once (neither
// depends on the other), that the offer goes to whichever agrees first.
func jointNote(network string, as []assignment, me int) string {
	a := as[me]
	if len(as) < 2 || !a.OK {
		return ""
	}
	within := func(x assignment, p string) bool {
		return slices.ContainsFunc(x.Within, func(o Offer) bool { return o.Provider == p })
	}
	s := fmt.Sprintf("planned with the %d services of VPN %s that rent now, on distinct providers", len(as), network)
	var took, race []string
	for _, b := range as[:me] {
		if b.OK && within(a, b.Offer.Provider) && better(b.Offer, a.Offer) < 0 {
			took = append(took, b.Service+" on "+b.Offer.Who())
			if !slices.Contains(a.After, b.Service) {
				race = append(race, b.Service)
			}
		}
	}
	if len(took) > 0 {
		s += " (" + strings.Join(took, ", ") + ")"
	}
	if len(race) > 0 {
		return s + fmt.Sprintf("; may cost less: apply rents it and %s at once, and a cheaper offer goes to whichever agrees first", strings.Join(race, ", "))
	}
	for _, b := range as[me+1:] {
		if slices.Contains(b.After, a.Service) || !within(b, a.Offer.Provider) {
			continue
		}
		if !b.OK || better(a.Offer, b.Offer) < 0 {
			return s + fmt.Sprintf("; may cost more: apply rents it and %s at once, and %s may go to %s first", b.Service, a.Offer.Who(), b.Service)
		}
	}
	return s
}
