package service

import (
	"context"
	"fmt"
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
// the caps, the most the caps let a provider charge.
func estimate(ctx context.Context, yc *yagna.Client, req *sdk.Request, cfg Config) (*protocol.Cost, error) {
	m, err := cfg.Market()
	if err != nil {
		return nil, err
	}
	exp, err := cfg.Expiration()
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
		offers = append(offers, got...)
		if ranked := Rank(got); len(ranked) > 0 {
			best := ranked[0]
			c := costOf(best.Price, m, exp, protocol.CostMarket,
				fmt.Sprintf("cheapest of %d offer(s) within the caps in subnet %s: %s", len(ranked), subnet, best.Who()))
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
