package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/tag"
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
// wc is the market watcher (watch.go), nil when none runs: the adapter's
// own book is read then.
func estimate(ctx context.Context, b *book, wc *WatchClient, yc *yagna.Client, req *sdk.Request, cfg Config) (*protocol.Cost, string, error) {
	m, err := cfg.Market()
	if err != nil {
		return nil, "", err
	}
	exp, err := cfg.Expiration()
	if err != nil {
		return nil, "", err
	}
	left, err := leaving(ctx, yc, identityOf(req.Persisted().Identity), m, exp)
	if err != nil {
		return nil, "", err
	}
	app := cfg.App
	if a := req.App(); a != "" {
		app = a
	}
	j, err := jointOf(ctx, yc, req.Name, app, req.Lineage(), cfg, cfg.VPNMembers, m, exp)
	if err != nil {
		return nil, "", err
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
	// Every subnet's page opens at once: the fallback subnet's window runs
	// while the preferred one's does, so the estimate waits one window,
	// not one per subnet. What fails here fails again below, said there.
	if subnets := cfg.Subnets(); len(subnets) > 1 {
		for _, subnet := range subnets {
			if _, bd, err := bookDemandOf(ctx, yc, req, cfg, subnet); err == nil {
				if wc == nil {
					_, _ = b.page(ctx, yc, req.Log, bd, m.Window)
				} else if _, err := wc.open(ctx, bd.shared(), m.Window); err != nil {
					wc = nil
				}
			}
		}
	}
	var offers []Offer
	why, conflicted := "", ""
	for _, subnet := range cfg.Subnets() {
		got, err := marketOffers(ctx, b, wc, yc, req, cfg, subnet, m, exp)
		if err != nil {
			why = "market not asked: " + err.Error()
			break
		}
		got = j.skip(left.apply(got, subnet))
		offers = append(offers, got...)
		ranked := Rank(got)
		if len(ranked) == 0 {
			continue
		}
		as := assign(got, j.claimants, exp)
		mine := as[j.me]
		if !mine.OK {
			conflicted = conflict(j.network, as, j.me)
			continue
		}
		// Ranked as the member judged them: with the providers freed for
		// it by the rebuilds it is created after.
		ranked = mine.Within
		best := mine.Offer
		note := fmt.Sprintf("cheapest of %d offer(s) within the caps in subnet %s: %s", len(ranked), subnet, best.Who())
		if best.Provider != ranked[0].Provider {
			note = fmt.Sprintf("offer %d of %d within the caps in subnet %s: %s", slices.IndexFunc(ranked, func(o Offer) bool { return o.Provider == best.Provider })+1, len(ranked), subnet, best.Who())
		}
		if left.freed != nil && best.Provider == left.freed.Provider && best.ProposalID == "" {
			note += ", at the price of the rental the rebuild ends (it offers again once freed)"
		} else if by, ok := j.freedBy[best.Provider]; ok && best.ProposalID == "" {
			note += ", at the price of " + by + "'s rental, which " + by + "'s rebuild ends before this is rented"
		}
		if left.running != "" {
			note += "; rented before the running one on " + left.running + " ends"
		}
		if a := left.said(); a != "" {
			note += "; avoided: " + a
		}
		if jn := jointNote(j.network, as, j.me); jn != "" {
			note += "; " + jn
		}
		c := costOf(best.Price, m, exp, protocol.CostMarket, note)
		c.Hint = hintOf(subnet, ranked, time.Now())
		return c, "", nil
	}
	refusal := ""
	switch {
	case why != "":
	case len(offers) == 0:
		// Not refused: a market that made no offer in the window may make
		// one later (the create waits up to its negotiation timeout), and
		// a demand no provider of a test network matches still plans.
		why = "no offer on the market now"
		if left.running != "" {
			why += " (the provider it runs on, " + left.running + ", is busy with it until the replacement is agreed)"
		}
	default:
		// Offers came and the create would fail as this says: the plan
		// refuses it (protocol StateExt.Refuse).
		why = conflicted
		if why == "" {
			why = NoOfferError(offers, m, exp).Error()
		}
		if left.running != "" {
			why += "; the provider it runs on, " + left.running + ", is not counted: the replacement is agreed while it runs"
		}
		refusal = why
	}
	return costOf(m.CapsPrice(), m, exp, protocol.CostCaps, "the most the caps allow; "+why), refusal, nil
}

// joint is how one service's estimate is planned with the other members of
// its VPN: the claimants in order (itself at me), the providers that are
// nodes of the VPN already at another address (the create skips them), and
// of those, the ones a member's rebuild frees, by that member.
type joint struct {
	network   string
	claimants []claimant
	me        int
	inVPN     map[string]string
	freedBy   map[string]string
}

// jointOf reads the VPN's node map (when the VPN exists) and lists the
// claimants: the members that rent now, i.e. this service, every other
// member whose planned address no node holds, and every member that runs
// but this deploy rebuilds: its rental's agreement (the app's, on the
// node's provider, tagged with the member's name) was made for another
// config fingerprint than the member's now. Such a member's replacement
// rents anew while it runs, and its old provider is free only once that
// rebuild is done: the members created after it for certain are offered
// it at its agreed price (Freed); the others are not. A member that runs
// and keeps its config holds its provider, which the market then does not
// offer for this one.
func jointOf(ctx context.Context, yc *yagna.Client, name, app, lineage string, cfg Config, members []VPNMember, m Market, exp time.Duration) (joint, error) {
	j := joint{claimants: []claimant{{Service: name, Market: m}}, inVPN: map[string]string{}, freedBy: map[string]string{}}
	if cfg.Network == nil {
		return j, nil
	}
	j.network = cfg.Network.Name
	held := map[string]string{}
	if id := cfg.Network.ID; id != "" && !strings.Contains(id, "${") {
		nodes, err := yc.Nodes(ctx, id)
		switch {
		case err == nil:
			for _, n := range nodes {
				held[n.IP] = n.ID
				if n.IP != cfg.PlannedIP() || cfg.PlannedIP() == "" {
					j.inVPN[n.ID] = n.IP
				}
			}
		case yagna.IsNotFound(err) || yagna.IsGone(err):
		default:
			// Not knowing who runs, the others are not counted: the
			// estimate is this service's alone, as the create's is.
			return j, nil
		}
	}
	me := cfg.PlannedIP()
	if me == "" || !slices.ContainsFunc(members, func(v VPNMember) bool { return v.NodeIP == me }) {
		return j, nil
	}
	rentals, err := memberRentals(ctx, yc, app, lineage, members, held, me)
	if err != nil {
		// As when the node map cannot be read: the members that run are
		// counted as keeping their providers, as before the fingerprints.
		slog.Warn("the VPN's members that this deploy rebuilds are not known: counted as keeping their providers", "network", j.network, "err", err)
		rentals = nil
	}
	j.claimants = nil
	freed := map[string]Offer{} // by the service whose rebuild frees it
	for _, v := range members {
		if v.NodeIP == me {
			j.me = len(j.claimants)
			j.claimants = append(j.claimants, claimant{Service: v.Service, Market: m, After: v.After})
			continue
		}
		a, rebuilt := rentals[v.Service]
		if _, runs := held[v.NodeIP]; runs && !rebuilt {
			continue
		}
		vm, err := v.market(cfg)
		if err != nil {
			return j, err
		}
		j.claimants = append(j.claimants, claimant{Service: v.Service, Market: vm, After: v.After})
		if rebuilt {
			f := vm.Judge(&yagna.Proposal{IssuerID: a.Offer.ProviderID, Properties: a.Offer.Properties}, exp)
			freed[v.Service] = f
			j.freedBy[f.Provider] = v.Service
		}
	}
	for i, c := range j.claimants {
		for _, dep := range c.After {
			if f, ok := freed[dep]; ok {
				j.claimants[i].Freed = append(j.claimants[i].Freed, f)
			}
		}
	}
	return j, nil
}

// memberRentals finds, for the members other than the one at me that run
// (a node holds their planned address), the app's approved agreement on
// that node's provider tagged with the member's name, and keeps those made
// for another config fingerprint than the member's now (tag.Config): the
// members this deploy rebuilds, by service. A rental without the tag (made
// before it existed) or a member without a fingerprint counts as kept.
func memberRentals(ctx context.Context, yc *yagna.Client, app, lineage string, members []VPNMember, held map[string]string, me string) (map[string]yagna.Agreement, error) {
	want := map[string]VPNMember{} // by provider
	for _, v := range members {
		if p, runs := held[v.NodeIP]; runs && v.NodeIP != me && v.Config != "" && v.Name != "" {
			want[p] = v
		}
	}
	out := map[string]yagna.Agreement{}
	if app == "" || len(want) == 0 {
		return out, nil
	}
	list, err := yc.ListAgreements(ctx, tag.SessionID(app), yagna.AgreementApproved)
	if err != nil {
		return nil, fmt.Errorf("listing the app's agreements for the VPN's members: %w", err)
	}
	for _, e := range list {
		a, err := yc.GetAgreement(ctx, e.ID)
		if yagna.IsNotFound(err) || yagna.IsGone(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading agreement %s of a VPN member: %w", e.ID, err)
		}
		v, ok := want[a.Offer.ProviderID]
		if !ok || a.State != yagna.AgreementApproved {
			continue
		}
		p := a.Demand.Properties
		a2, l, _, res := tagsOf(p)
		if a2 != app || (lineage != "" && l != "" && l != lineage) || res != v.Name {
			continue
		}
		if f, _ := p[tag.Config].(string); f != "" && f != v.Config {
			out[v.Service] = a
		}
	}
	return out, nil
}

// skip marks the offers of providers that are nodes of the VPN at another
// address, as the create does (negotiateIn).
func (j joint) skip(offers []Offer) []Offer {
	for i, o := range offers {
		if addr, ok := j.inVPN[o.Provider]; ok && o.Skip == "" {
			offers[i].Skip = "already a node of the VPN at " + addr + " for another service"
		}
	}
	return offers
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

// marketOffers reads the offers of the payload's demand in one subnet from
// the offer book (one window for every estimate of the adapter's life, see
// book.go) and judges them.
func marketOffers(ctx context.Context, b *book, wc *WatchClient, yc *yagna.Client, req *sdk.Request, cfg Config, subnet string, m Market, exp time.Duration) ([]Offer, error) {
	d, bd, err := bookDemandOf(ctx, yc, req, cfg, subnet)
	if err != nil {
		return nil, err
	}
	props, waited, err := watchedOffers(ctx, wc, req, bd, d, m.Window)
	if err != nil {
		req.Log.Warn("market watcher not read: the adapter's own offer book is", "err", err)
	}
	if wc == nil || err != nil {
		props, waited, err = b.read(ctx, yc, req.Log, bd, d, m.Window, func(s string) { req.Printf("service %s: %s", req.Name, s) })
		if err != nil {
			return nil, err
		}
	}
	var offers []Offer
	for _, p := range props {
		o := m.Judge(p, exp)
		if o.Skip == "" {
			if _, err := Terms(p.Properties, exp); err != nil {
				o.Skip = err.Error()
			}
		}
		offers = append(offers, o)
	}
	req.Log.Debug("market asked for the plan's estimate", "subnet", subnet, "offers", len(offers), "waited", waited.Round(time.Millisecond), "explain", strings.TrimSpace(Explain(offers, m, exp)))
	return offers, nil
}

// bookDemandOf is the estimate's demand in subnet and its book page's
// demand.
func bookDemandOf(ctx context.Context, yc *yagna.Client, req *sdk.Request, cfg Config, subnet string) (yagna.DemandOfferBase, bookDemand, error) {
	r := &rental{yc: yc, req: req, cfg: cfg}
	d, _, err := r.demand(ctx, subnet)
	if err != nil {
		return d, bookDemand{}, err
	}
	bd, err := broadDemand(yc.BaseURL+"|"+keyOf(yc.AppKey), cfg, subnet, d)
	return d, bd, err
}

// keyOf stands for an app key in a book key: the requestor identity,
// without the secret itself.
func keyOf(appKey string) string {
	sum := sha256.Sum256([]byte(appKey))
	return hex.EncodeToString(sum[:8])
}

// rebuilt is what the create that follows a plan will make of the rental it
// replaces: the providers it refuses (avoided) and the provider it frees.
type rebuilt struct {
	failed []string
	why    map[string]string
	// freed is the offer of the provider whose rental the rebuild ends, as
	// agreed (ProposalID ""), nil when there is none or it is avoided.
	freed *Offer
	// running is the provider of a rental that runs and is replaced: the
	// replacement is agreed before it ends, so it is rented elsewhere.
	running string
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
	if o.alive() && !id.InitPending {
		// Replaced (the replace action): the replacement is agreed while
		// this rental runs, so its provider is not free for it.
		r.running = id.ProviderID
		return r, nil
	}
	if a := o.agreement; a != nil && a.State == yagna.AgreementApproved && id.ProviderID != "" && !slices.Contains(r.failed, id.ProviderID) {
		f := m.Judge(&yagna.Proposal{IssuerID: id.ProviderID, Properties: a.Offer.Properties}, exp)
		f.ProposalID = ""
		r.freed = &f
	}
	return r, nil
}

// apply leaves the avoided providers' offers out (skipped, saying why),
// drops the offers of the provider a replaced rental runs on, and adds the
// freed provider's when it is of subnet and did not offer itself. The
// running provider is busy with the rental until its replacement is agreed
// (a provider takes one agreement at a time, as the devnet's do): an offer
// of it in the market watcher's book predates that rental, and the create
// will not see it again (TestKilledCreateKeepsTheCheapProvider).
func (r rebuilt) apply(offers []Offer, subnet string) []Offer {
	out := make([]Offer, 0, len(offers)+1)
	seen := false
	for _, o := range offers {
		if r.running != "" && o.Provider == r.running {
			continue
		}
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

// watchedOffers reads the offers of d from the market watcher's page of bd:
// at once when the page is warm; a cold one (just opened) waits what is
// left of its window, once for every run to come, and says so.
func watchedOffers(ctx context.Context, wc *WatchClient, req *sdk.Request, bd bookDemand, d yagna.DemandOfferBase, window time.Duration) ([]*yagna.Proposal, time.Duration, error) {
	if wc == nil {
		return nil, 0, nil
	}
	sbd := bd.shared()
	left, err := wc.open(ctx, sbd, window)
	if err != nil {
		return nil, 0, err
	}
	if left > 0 {
		req.Printf("service %s: offer book cold: gathering offers for the %s offer window (%s left); the market watcher keeps them current for the next runs", req.Name, window, left.Round(100*time.Millisecond))
	}
	return wc.read(ctx, sbd, d, window)
}
