package service

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// perHour is an offer costing v GLM an hour (env-hours only), judged for 1 h.
func perHour(provider string, v float64) Offer {
	p := Price{EnvHour: v}
	return Offer{Provider: provider, Name: provider, Price: p, Cost: p.Total(time.Hour, 1)}
}

func hintWith(offers ...Offer) *marketHint {
	var h marketHint
	if err := json.Unmarshal(hintOf("public", offers, time.Now()), &h); err != nil {
		panic(err)
	}
	return &h
}

func TestHintOfKeepsTheBestAndTheFloorOfTheRest(t *testing.T) {
	var ranked []Offer
	for i := range hintOffers + 3 {
		ranked = append(ranked, perHour(fmt.Sprintf("p%02d", i), 0.1*float64(i+1)))
	}
	h := hintWith(ranked...)
	if len(h.Offers) != hintOffers || h.Offers[0].Provider != "p00" || h.Offers[hintOffers-1].Provider != fmt.Sprintf("p%02d", hintOffers-1) {
		t.Fatalf("hint offers %+v, want the best %d in order", h.Offers, hintOffers)
	}
	if h.Rest == nil || *h.Rest != ranked[hintOffers].Price || h.Subnet != "public" || time.Since(h.At) > time.Minute {
		t.Fatalf("hint %+v, want rest %+v, subnet public, made now", h, ranked[hintOffers].Price)
	}
	if h := hintWith(ranked[:2]...); h.Rest != nil || len(h.Offers) != 2 {
		t.Fatalf("a hint of every offer: %+v, want no rest", h)
	}
}

// TestHintEnough: the best offer held is countered at once unless a
// provider the plan saw cheaper may still offer.
func TestHintEnough(t *testing.T) {
	m, exp := Market{CPULoad: 1}, time.Hour
	plan := hintWith(perHour("cheap", 0.144), perHour("mid", 0.36))
	withRest := hintWith(perHour("cheap", 0.144), perHour("mid", 0.36), perHour("far", 0.5))
	withRest.Offers, withRest.Rest = withRest.Offers[:1], &Price{EnvHour: 0.3}
	for _, tc := range []struct {
		name  string
		hint  *marketHint
		best  Offer
		seen  []Offer
		out   []string
		want  bool
		about string
	}{
		{"the plan's choice came", plan, perHour("cheap", 0.144), []Offer{perHour("cheap", 0.144)}, nil, true, ""},
		{"as cheap from another", plan, perHour("other", 0.144), []Offer{perHour("other", 0.144)}, nil, true, "ties are enough"},
		{"cheaper than the plan", plan, perHour("other", 0.1), []Offer{perHour("other", 0.1)}, nil, true, ""},
		{"dearer, the plan's choice may come", plan, perHour("mid", 0.36), []Offer{perHour("mid", 0.36)}, nil, false, "cheap not seen yet"},
		{"dearer, the plan's choice tried", plan, perHour("mid", 0.36), []Offer{perHour("mid", 0.36)}, []string{"cheap"}, true, "tried or failed: will not be rented"},
		{"dearer, the plan's choice skipped here", plan, perHour("mid", 0.36), []Offer{perHour("mid", 0.36), {Provider: "cheap", Skip: "already a node of the VPN"}}, nil, true, ""},
		{"the plan's choice asks more now", plan, perHour("cheap", 0.2), []Offer{perHour("cheap", 0.2), perHour("mid", 0.36)}, nil, true, "every provider the plan saw has offered"},
		{"a provider beyond the hint may be cheaper", withRest, perHour("x", 0.4), []Offer{perHour("cheap", 0.4)}, nil, false, "the rest cost 0.3"},
		{"nothing beyond the hint is cheaper", withRest, perHour("x", 0.3), []Offer{perHour("cheap", 0.4)}, nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]Offer{}
			for _, o := range tc.seen {
				seen[o.Provider] = o
			}
			out := func(p string) bool { return slices.Contains(tc.out, p) }
			if got := tc.hint.enough(tc.best, seen, out, m, exp); got != tc.want {
				t.Fatalf("enough = %v, want %v (%s)", got, tc.want, tc.about)
			}
		})
	}
}

func requestWith(c *protocol.Cost) *sdk.Request {
	return &sdk.Request{Request: protocol.Request{Gcompose: &protocol.RequestExt{Call: protocol.CallAction, PlannedCost: c}}}
}

// TestPlannedOf: the hint is acted on only when the plan priced offers and
// saw them recently; otherwise the create gathers for the whole window and
// says why.
func TestPlannedOf(t *testing.T) {
	now := time.Now()
	market := func(at time.Time) *protocol.Cost {
		h, _ := json.Marshal(marketHint{At: at, Subnet: "public", Offers: []hintOffer{{Provider: "cheap", Price: Price{EnvHour: 0.144}}}})
		return &protocol.Cost{Currency: "GLM", PerHour: 0.144, Total: 0.432, Basis: protocol.CostMarket, Hint: h}
	}
	for _, tc := range []struct {
		name string
		req  *sdk.Request
		hint bool
		why  string
	}{
		{"no gcompose member", &sdk.Request{}, false, "no estimate in the plan"},
		{"no planned cost", requestWith(nil), false, "no estimate in the plan"},
		{"from the caps", requestWith(&protocol.Cost{Currency: "GLM", Basis: protocol.CostCaps}), false, "from the caps, not from offers"},
		{"market without a hint (an older gcompose)", requestWith(&protocol.Cost{Currency: "GLM", Basis: protocol.CostMarket}), false, "from the market, not from offers"},
		{"a hint that is not ours", requestWith(&protocol.Cost{Currency: "GLM", Basis: protocol.CostMarket, Hint: json.RawMessage(`{"x":1}`)}), false, "names no offers"},
		{"fresh", requestWith(market(now.Add(-time.Minute))), true, ""},
		{"stale (a saved plan applied later)", requestWith(market(now.Add(-2 * time.Hour))), false, "the plan saw the market 2h0m0s ago (more than 10m0s)"},
		{"from the future", requestWith(market(now.Add(time.Hour))), false, "dated 1h0m0s ahead of this clock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plannedOf(tc.req, now)
			if (p.hint != nil) != tc.hint || !strings.Contains(p.why, tc.why) {
				t.Fatalf("hint %v, why %q; want hint %v, why %q", p.hint != nil, p.why, tc.hint, tc.why)
			}
			if tc.hint && (p.in("public") == nil || p.in("edge") != nil) {
				t.Fatalf("the hint is for subnet public only")
			}
		})
	}
}

// TestDearer: a create that agrees above the plan's estimate says by how
// much and what became of each offer the plan saw cheaper.
func TestDearer(t *testing.T) {
	m, exp := Market{CPULoad: 1}, time.Hour
	h := hintWith(perHour("drift", 0), perHour("cheap", 0.144), perHour("gone", 0.2), perHour("mid", 0.36))
	raw, _ := json.Marshal(h)
	p := planned{cost: &protocol.Cost{Currency: "GLM", PerHour: 0, Total: 0, Basis: protocol.CostMarket, Hint: raw}, hint: h}
	seen := map[string]Offer{"drift": perHour("drift", 0.108), "cheap": perHour("cheap", 0.144), "mid": perHour("mid", 0.36)}
	why := map[string]string{"cheap": "already a node of the VPN at 10.0.0.2 for another service"}
	got := p.dearer(perHour("mid", 0.36), m, exp, seen, why)
	want := "dearer than the plan's estimate of 0 GLM/hour, 0 GLM for 1h0m0s (market): drift (drift) asks 0.108 GLM/hour now, 0 GLM/hour at plan time; " +
		"cheap (cheap): already a node of the VPN at 10.0.0.2 for another service; gone (gone) did not offer again"
	if got != want {
		t.Fatalf("dearer:\n got %s\nwant %s", got, want)
	}
	if got := p.dearer(perHour("x", 0), m, exp, seen, why); got != "" {
		t.Fatalf("as cheap as planned: %q, want nothing", got)
	}
	caps := planned{cost: &protocol.Cost{Currency: "GLM", PerHour: 2, Total: 2, Basis: protocol.CostCaps}}
	if got := caps.dearer(perHour("mid", 0.36), m, exp, seen, why); got != "" {
		t.Fatalf("below the caps' estimate: %q, want nothing", got)
	}
	if got := (planned{}).dearer(perHour("mid", 0.36), m, exp, seen, why); got != "" {
		t.Fatalf("without a planned cost: %q", got)
	}
}
