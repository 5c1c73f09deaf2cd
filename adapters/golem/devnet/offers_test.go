package devnet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestOfferPriceChangeAndWithdraw: a provider that changes its price makes
// a new offer, which a live demand receives as a new Initial proposal; one
// that withdraws its offer tells the requestor nothing, a counter to its
// proposal fails with yagna's 400, and a new demand no longer gets it.
func TestOfferPriceChangeAndWithdraw(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "steady", Count: 1, Cores: 4, MemGib: 16, StorageGib: 64, Coeffs: []float64{0.0001, 0.0002, 0}},
		{Name: "repricer", Count: 1, Cores: 4, MemGib: 16, StorageGib: 64, Coeffs: []float64{0.0001, 0.0002, 0}},
		{Name: "leaver", Count: 1, Cores: 4, MemGib: 16, StorageGib: 64, Coeffs: []float64{0.0001, 0.0002, 0}},
	}})
	ctx := ctxT(t, time.Minute)
	demand := yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public", "golem.srv.comp.task_package": taskPackage(testHash)}),
		Constraints: "(golem.node.debug.subnet=public)"}
	sub, err := e.c.SubscribeDemand(ctx, demand)
	if err != nil {
		t.Fatalf("SubscribeDemand: %v", err)
	}
	t.Cleanup(func() { _ = e.c.UnsubscribeDemand(ctxT(t, 10*time.Second), sub) })
	first := collectByName(t, e, sub)
	if len(first) != 3 {
		t.Fatalf("first proposals from %v, want steady, repricer and leaver", keys(first))
	}

	put := func(name string, body devnet.OfferChange) devnet.OfferStatus {
		t.Helper()
		st, b := e.raw(http.MethodPut, devnet.AdminPrefix+"/providers/"+name+"/offer", testKey, body)
		if st != http.StatusOK {
			t.Fatalf("PUT offer of %s: %d %s", name, st, b)
		}
		var out devnet.OfferStatus
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("PUT offer answer %s: %v", b, err)
		}
		return out
	}
	if st, b := e.raw(http.MethodPut, devnet.AdminPrefix+"/providers/repricer/offer", testKey, map[string]any{"coeffs": []float64{1}}); st != http.StatusBadRequest {
		t.Errorf("PUT offer with 1 coefficient: %d %s, want 400", st, b)
	}

	// The price change: a new offer, proposed to the live demand at once.
	re := put("repricer", devnet.OfferChange{Coeffs: []float64{0.0001, 0.0005, 0}})
	if re.Withdrawn || re.OfferID == "" {
		t.Fatalf("repriced offer = %+v", re)
	}
	second := collectByName(t, e, sub)
	p, ok := second["repricer"]
	if len(second) != 1 || !ok {
		t.Fatalf("after the price change, proposals from %v, want repricer's new offer only", keys(second))
	}
	if got := coeffs(p); len(got) != 3 || got[0] != 0.0005 {
		t.Errorf("repricer's new proposal coeffs %v, want [0.0005 0.0001 0] (cpu_sec, duration_sec, start)", got)
	}
	// The old offer's proposal is of an unsubscribed offer now.
	if _, err := e.c.CounterProposal(ctx, sub, first["repricer"].ProposalID, demand); yagna.StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "was already unsubscribed") {
		t.Errorf("counter to the old offer's proposal: %v, want 400 ...was already unsubscribed", err)
	}

	// The withdrawal: not a word to the demand.
	if w := put("leaver", devnet.OfferChange{Withdrawn: true}); !w.Withdrawn {
		t.Fatalf("withdrawn offer = %+v", w)
	}
	if evs, err := e.c.CollectOffers(ctx, sub, 300*time.Millisecond, 10); err != nil || len(evs) != 0 {
		t.Errorf("after the withdrawal the demand got %d event(s), %v; yagna sends none", len(evs), err)
	}
	if _, err := e.c.CounterProposal(ctx, sub, first["leaver"].ProposalID, demand); yagna.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("counter to the withdrawn offer's proposal: %v, want 400", err)
	}
	if _, err := e.c.CounterProposal(ctx, sub, first["steady"].ProposalID, demand); err != nil {
		t.Errorf("counter to steady's proposal: %v", err)
	}
	// A new demand gets the live offers only: steady and repricer at its new price.
	sub2, err := e.c.SubscribeDemand(ctx, demand)
	if err != nil {
		t.Fatalf("SubscribeDemand again: %v", err)
	}
	t.Cleanup(func() { _ = e.c.UnsubscribeDemand(ctxT(t, 10*time.Second), sub2) })
	fresh := collectByName(t, e, sub2)
	if _, gone := fresh["leaver"]; gone || len(fresh) != 2 {
		t.Errorf("a new demand got proposals from %v, want steady and repricer", keys(fresh))
	}
	if got := coeffs(fresh["repricer"]); len(got) != 3 || got[0] != 0.0005 {
		t.Errorf("a new demand got repricer at %v, want its new price", got)
	}
	// Offering again is a new offer, proposed to the live demands.
	if back := put("leaver", devnet.OfferChange{}); back.Withdrawn {
		t.Fatalf("offer back = %+v", back)
	}
	if again := collectByName(t, e, sub2); len(again) != 1 || again["leaver"] == nil {
		t.Errorf("after offering again, proposals from %v, want leaver", keys(again))
	}
}

// collectByName collects a demand's proposals until none comes for 300 ms,
// by provider name.
func collectByName(t *testing.T, e *env, sub string) map[string]*yagna.Proposal {
	t.Helper()
	out := map[string]*yagna.Proposal{}
	for {
		evs, err := e.c.CollectOffers(ctxT(t, 10*time.Second), sub, 300*time.Millisecond, 50)
		if err != nil {
			t.Fatalf("CollectOffers: %v", err)
		}
		if len(evs) == 0 {
			return out
		}
		for _, ev := range evs {
			if ev.Proposal != nil {
				name, _ := ev.Proposal.Properties["golem.node.id.name"].(string)
				out[name] = ev.Proposal
			}
		}
	}
}

func keys(m map[string]*yagna.Proposal) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func coeffs(p *yagna.Proposal) []float64 {
	if p == nil {
		return nil
	}
	l, _ := p.Properties["golem.com.pricing.model.linear.coeffs"].([]any)
	var out []float64
	for _, v := range l {
		f, _ := v.(float64)
		out = append(out, f)
	}
	return out
}
