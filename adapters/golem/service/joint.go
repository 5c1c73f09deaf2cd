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
	Service string         `json:"service"`
	NodeIP  string         `json:"node_ip"`
	Params  map[string]any `json:"params,omitempty"`
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
}

// assignment is what a joint plan gives one claimant.
type assignment struct {
	Service string
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
		for _, o := range offers {
			j := c.Market.Judge(&yagna.Proposal{ProposalID: o.ProposalID, IssuerID: o.Provider, Properties: o.props}, exp)
			// A skip for all (an avoided provider, a node of the VPN
			// already, unusable terms) stays; the lists are each member's.
			if o.Skip != "" && j.Skip == "" && !strings.Contains(o.Skip, "(providers_") {
				j.Skip = o.Skip
			}
			judged = append(judged, j)
		}
		a := assignment{Service: c.Service, Within: Rank(judged)}
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
// cheaper providers they take, and that apply rents them at once.
func jointNote(network string, as []assignment, me int) string {
	a := as[me]
	if len(as) < 2 || len(a.Within) == 0 {
		return ""
	}
	var took []string
	for i, b := range as {
		if i != me && b.OK && b.Offer.Cost < a.Offer.Cost+1e-12 && slices.ContainsFunc(a.Within, func(o Offer) bool { return o.Provider == b.Offer.Provider }) {
			took = append(took, b.Service+" on "+b.Offer.Who())
		}
	}
	s := fmt.Sprintf("planned with the %d services of VPN %s that rent now, on distinct providers", len(as), network)
	if len(took) > 0 {
		s += " (" + strings.Join(took, ", ") + ")"
	}
	if a.Offer.Provider != a.Within[0].Provider {
		s += fmt.Sprintf("; may cost less: apply rents them at once, and %s goes to whichever agrees first", a.Within[0].Who())
	} else if len(took) == 0 {
		for i, b := range as {
			if i > me && !b.OK || (i > me && b.OK && len(b.Within) > 0 && b.Within[0].Provider == a.Offer.Provider) {
				s += fmt.Sprintf("; may cost more: apply rents them at once, and %s may go to %s first", a.Offer.Who(), b.Service)
				break
			}
		}
	}
	return s
}
