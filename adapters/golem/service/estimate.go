package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// estimate is what plan shows a service will cost: the cheapest offer
// within the caps on the market now, asked with the demand the create will
// make (less the allocation's decorations, unknown before the payments
// resource exists); when the market cannot be asked or has nothing within
// the caps, the most the caps let a provider charge. The providers the
// create will refuse (avoided, the same rule as the state call's) are left
// out, and the provider a rebuild leaves is counted in at the price it
// agreed to when it is not avoided: the delete frees it before the create
// asks the market (a provider busy with our rental offers nothing now). So
// the estimate is the offer the create will try first.
func estimate(ctx context.Context, yc *yagna.Client, req *sdk.Request, cfg Config) (*protocol.Cost, error) {
	m, err := cfg.Market()
	if err != nil {
		return nil, err
	}
	exp, err := cfg.Expiration()
	if err != nil {
		return nil, err
	}
	left, err := leaving(ctx, yc, identityOf(req.Persisted().Identity), m, exp)
	if err != nil {
		return nil, err
	}
	// References known after apply (the allocation, the VPN) are left out.
	// The demand keeps the app's tags: one a killed plan leaves behind is
	// ended by the next sweep like any other.
	cfg.AllocationID = ""
	if a := req.App(); a != "" {
		cfg.App = a
	}
	if cfg.Network != nil {
		cfg.Network = &NetRef{Name: cfg.Network.Name}
	}
	var offers []Offer
	why := ""
	for _, subnet := range cfg.Subnets() {
		got, err := marketOffers(ctx, yc, req, cfg, subnet, m, exp)
		if err != nil {
			why = "market not asked: " + err.Error()
			break
		}
		got = left.apply(got, subnet)
		offers = append(offers, got...)
		if ranked := Rank(got); len(ranked) > 0 {
			best := ranked[0]
			note := fmt.Sprintf("cheapest of %d offer(s) within the caps in subnet %s: %s", len(ranked), subnet, best.Who())
			if left.freed != nil && best.Provider == left.freed.Provider && best.ProposalID == "" {
				note += ", at the price of the rental the rebuild ends (it offers again once freed)"
			}
			if a := left.said(); a != "" {
				note += "; avoided: " + a
			}
			c := costOf(best.Price, m, exp, protocol.CostMarket, note)
			c.Hint = hintOf(subnet, ranked, time.Now())
			return c, nil
		}
	}
	if why == "" {
		if len(offers) == 0 {
			why = "no offer on the market now"
		} else {
			why = NoOfferError(offers, m, exp).Error()
		}
	}
	return costOf(m.CapsPrice(), m, exp, protocol.CostCaps, "the most the caps allow; "+why), nil
}

func costOf(p Price, m Market, exp time.Duration, basis, note string) *protocol.Cost {
	return &protocol.Cost{Currency: "GLM", PerHour: p.PerHour(m.CPULoad), Start: p.Start, Hours: exp.Hours(),
		Total: p.Total(exp, m.CPULoad), Basis: basis, Note: note}
}

// agreedCost is the cost of a rented service: its agreed price.
func agreedCost(a *Agreed) *protocol.Cost {
	if a == nil {
		return nil
	}
	return &protocol.Cost{Currency: "GLM", PerHour: a.GLMPerHour, Start: a.Start, Hours: a.Hours, Total: a.Total,
		Basis: protocol.CostAgreed, Note: a.Price.String()}
}

// marketOffers subscribes the demand for one subnet for the offer window
// and judges what comes.
func marketOffers(ctx context.Context, yc *yagna.Client, req *sdk.Request, cfg Config, subnet string, m Market, exp time.Duration) ([]Offer, error) {
	r := &rental{yc: yc, req: req, cfg: cfg}
	d, _, err := r.demand(ctx, subnet)
	if err != nil {
		return nil, err
	}
	sub, err := yc.SubscribeDemand(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("subscribing a demand: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = yc.UnsubscribeDemand(uctx, sub)
	}()
	var offers []Offer
	end := time.Now().Add(m.Window)
	for time.Now().Before(end) {
		evs, err := yc.CollectOffers(ctx, sub, max(min(3*time.Second, time.Until(end)), time.Second), 50)
		if err != nil && !yagna.IsTimeout(err) {
			return offers, fmt.Errorf("collecting offers: %w", err)
		}
		for _, ev := range evs {
			if ev.EventType == yagna.EventProposal && ev.Proposal != nil && ev.Proposal.State == yagna.ProposalInitial {
				o := m.Judge(ev.Proposal, exp)
				if o.Skip == "" {
					if _, err := Terms(ev.Proposal.Properties, exp); err != nil {
						o.Skip = err.Error()
					}
				}
				offers = append(offers, o)
			}
		}
	}
	req.Log.Debug("market asked for the plan's estimate", "subnet", subnet, "offers", len(offers), "explain", strings.TrimSpace(Explain(offers, m, exp)))
	return offers, nil
}

// rebuilt is what the create that follows a plan will make of the rental it
// replaces: the providers it refuses (avoided) and the provider it frees.
type rebuilt struct {
	failed []string
	why    map[string]string
	// freed is the offer of the provider whose rental the rebuild ends, as
	// agreed (ProposalID ""), nil when there is none or it is avoided.
	freed *Offer
}

// leaving reads the resource's rental, if any, and judges it by the state
// call's rule (avoided).
func leaving(ctx context.Context, yc *yagna.Client, id Identity, m Market, exp time.Duration) (rebuilt, error) {
	var o observed
	if id.AgreementID != "" || id.ActivityID != "" {
		var err error
		if o, err = observe(ctx, yc, id); err != nil {
			return rebuilt{}, err
		}
	}
	r := rebuilt{}
	r.failed, r.why = avoided(id, o)
	if a := o.agreement; a != nil && a.State == yagna.AgreementApproved && id.ProviderID != "" && !slices.Contains(r.failed, id.ProviderID) {
		f := m.Judge(&yagna.Proposal{IssuerID: id.ProviderID, Properties: a.Offer.Properties}, exp)
		f.ProposalID = ""
		r.freed = &f
	}
	return r, nil
}

// apply leaves the avoided providers' offers out (skipped, saying why) and
// adds the freed provider's when it is of subnet and did not offer itself.
func (r rebuilt) apply(offers []Offer, subnet string) []Offer {
	out := make([]Offer, 0, len(offers)+1)
	seen := false
	for _, o := range offers {
		if slices.Contains(r.failed, o.Provider) {
			o.Skip = "avoided: " + r.why[o.Provider]
		}
		seen = seen || (r.freed != nil && o.Provider == r.freed.Provider)
		out = append(out, o)
	}
	if r.freed != nil && !seen && r.freed.Subnet == subnet {
		out = append(out, *r.freed)
	}
	return out
}

// said lists the avoided providers with why, for the estimate's note.
func (r rebuilt) said() string {
	parts := make([]string, 0, len(r.failed))
	for _, p := range r.failed {
		parts = append(parts, p+" ("+r.why[p]+")")
	}
	return strings.Join(parts, ", ")
}
