package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// The plan's estimate gathers offers for the offer window; the create used
// to gather them again for as long, so a deploy waited the window twice. The
// estimate now leaves a hint in its cost (protocol Cost.Hint): the offers it
// saw within the caps, best first. gcompose hands the plan's cost back to
// the create (RequestExt.PlannedCost), which still negotiates only on its
// own demand subscription (yagna answers a counter-proposal to another
// subscription's proposal with 404: core/market/src/negotiation/common.rs
// counter_proposal, get_proposal) but counters as soon as it holds an offer
// no provider the plan saw can beat: the window then only bounds the wait
// for providers that were cheaper at plan time and have not offered again
// (docs/golem.md, "One offer window per deploy").

// hintOffers is how many of the plan's offers the hint lists: enough for
// the services of an app that cannot share a provider on one VPN to find
// theirs; the plan's JSON grows by about 120 bytes an offer.
const hintOffers = 8

// hintFresh is how old a plan's view of the market may be and still stand
// for the market now. Providers re-broadcast their offers every 4 minutes
// on average (yagna core/market/src/config.rs mean_cyclic_bcast_interval),
// so a view older than two rounds is not today's market: a saved plan
// applied later gathers offers for the whole window again.
const hintFresh = 10 * time.Minute

// marketHint is what the plan's estimate saw in the subnet it priced.
type marketHint struct {
	At     time.Time   `json:"at"`
	Subnet string      `json:"subnet"`
	Offers []hintOffer `json:"offers"`
	// Rest is the price of the best offer left out of Offers (nil when all
	// are listed): no provider the hint does not name was cheaper.
	Rest *Price `json:"rest,omitempty"`
}

type hintOffer struct {
	Provider string `json:"provider"`
	Name     string `json:"name,omitempty"`
	Price    Price  `json:"price"`
}

func (h hintOffer) who() string {
	return Offer{Provider: h.Provider, Name: h.Name}.Who()
}

// hintOf is the hint of an estimate from ranked, the usable offers of
// subnet best first.
func hintOf(subnet string, ranked []Offer, at time.Time) json.RawMessage {
	h := marketHint{At: at.UTC(), Subnet: subnet}
	for i, o := range ranked {
		if i == hintOffers {
			p := o.Price
			h.Rest = &p
			break
		}
		h.Offers = append(h.Offers, hintOffer{Provider: o.Provider, Name: o.Name, Price: o.Price})
	}
	raw, _ := json.Marshal(h)
	return raw
}

// planned is what the approved plan said of a create: its cost, and the
// market it saw when that view is fresh enough to act on.
type planned struct {
	cost *protocol.Cost
	hint *marketHint
	// why says why there is no hint to act on ("" when there is one).
	why string
}

// plannedOf reads the plan's cost from the action request.
func plannedOf(req *sdk.Request, now time.Time) planned {
	if req.Gcompose == nil || req.Gcompose.PlannedCost == nil {
		return planned{why: "no estimate in the plan"}
	}
	p := planned{cost: req.Gcompose.PlannedCost}
	if p.cost.Basis != protocol.CostMarket || len(p.cost.Hint) == 0 {
		p.why = "the plan's estimate is from the " + p.cost.Basis + ", not from offers"
		return p
	}
	var h marketHint
	if err := json.Unmarshal(p.cost.Hint, &h); err != nil || len(h.Offers) == 0 || h.At.IsZero() {
		p.why = "the plan's estimate names no offers"
		return p
	}
	switch age := now.Sub(h.At); {
	case age > hintFresh:
		p.why = fmt.Sprintf("the plan saw the market %s ago (more than %s)", age.Round(time.Second), hintFresh)
		return p
	case age < -hintFresh:
		p.why = fmt.Sprintf("the plan's view of the market is dated %s ahead of this clock", (-age).Round(time.Second))
		return p
	}
	p.hint = &h
	return p
}

// in is the hint for a subnet (nil when the plan priced another one).
func (p planned) in(subnet string) *marketHint {
	if p.hint == nil || p.hint.Subnet != subnet {
		return nil
	}
	return p.hint
}

// waitFor is the lowest cost the plan saw from a provider that may still
// offer: one not seen in this negotiation yet (seen holds the latest offer
// of each provider judged here) nor ruled out (out: tried, failed); false
// when the plan saw no such provider.
func (h *marketHint) waitFor(seen map[string]Offer, out func(provider string) bool, m Market, exp time.Duration) (float64, bool) {
	for _, o := range h.Offers {
		if _, ok := seen[o.Provider]; ok || out(o.Provider) {
			continue
		}
		return o.Price.Total(exp, m.CPULoad), true
	}
	if h.Rest != nil {
		return h.Rest.Total(exp, m.CPULoad), true
	}
	return 0, false
}

// enough says whether best, the best offer held, can be countered now: no
// provider the plan saw that may still offer was cheaper.
func (h *marketHint) enough(best Offer, seen map[string]Offer, out func(string) bool, m Market, exp time.Duration) bool {
	cost, waiting := h.waitFor(seen, out, m, exp)
	return !waiting || withinCaps(best.Cost, cost)
}

// dearer says, when the agreed offer costs more than the plan's estimate,
// by how much and why, for the action's output; "" when it does not. why
// holds what ruled a provider out here.
func (p planned) dearer(agreed Offer, m Market, exp time.Duration, seen map[string]Offer, why map[string]string) string {
	if p.cost == nil || withinCaps(agreed.Cost, p.cost.Total) {
		return ""
	}
	s := fmt.Sprintf("dearer than the plan's estimate of %s/hour, %s for %s (%s)", glm(p.cost.PerHour), glm(p.cost.Total), exp, p.cost.Basis)
	if p.hint == nil {
		return s
	}
	var reasons []string
	for _, o := range p.hint.Offers {
		if o.Price.Total(exp, m.CPULoad) >= agreed.Cost {
			break
		}
		now, offered := seen[o.Provider]
		switch {
		case why[o.Provider] != "" && o.Provider != agreed.Provider:
			reasons = append(reasons, o.who()+": "+why[o.Provider])
		case offered:
			reasons = append(reasons, fmt.Sprintf("%s asks %s/hour now, %s/hour at plan time", o.who(), glm(now.Price.PerHour(m.CPULoad)), glm(o.Price.PerHour(m.CPULoad))))
		default:
			reasons = append(reasons, o.who()+" did not offer again")
		}
	}
	if len(reasons) > 0 {
		s += ": " + strings.Join(reasons, "; ")
	}
	return s
}

// bookHint is a hint from the market watcher's book when it is warm (its
// page of the first subnet has had its window): the offers the market has
// now, so the create counters as soon as it holds one no offer in the book
// beats, as with the plan's hint. nil without a watcher or a warm page.
func (r *rental) bookHint(ctx context.Context, m Market, exp time.Duration) *marketHint {
	if r.wc == nil {
		return nil
	}
	subnets := r.cfg.Subnets()
	if len(subnets) == 0 {
		return nil
	}
	subnet := subnets[0]
	// The estimate's demand: the allocation and the VPN are left out.
	cfg := r.cfg
	cfg.AllocationID = ""
	if cfg.Network != nil {
		cfg.Network = &NetRef{Name: cfg.Network.Name}
	}
	d, bd, err := bookDemandOf(ctx, r.yc, r.req, cfg, subnet)
	if err != nil {
		return nil
	}
	sbd := bd.shared()
	if left, err := r.wc.open(ctx, sbd, m.Window); err != nil || left > 0 {
		return nil
	}
	props, _, err := r.wc.read(ctx, sbd, d, m.Window)
	if err != nil {
		return nil
	}
	var offers []Offer
	for _, p := range props {
		o := m.Judge(p, exp)
		if o.Skip == "" {
			if _, err := Terms(p.Properties, exp); err != nil {
				o.Skip = err.Error()
			}
		}
		if slices.Contains(r.id.Failed, o.Provider) {
			continue
		}
		offers = append(offers, o)
	}
	ranked := Rank(offers)
	if len(ranked) == 0 {
		return nil
	}
	var h marketHint
	if err := json.Unmarshal(hintOf(subnet, ranked, time.Now()), &h); err != nil {
		return nil
	}
	return &h
}
