package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// TestDeadProvidersDoNotUseUpTheNegotiation: the two cheapest providers
// never answer a counter-proposal (yagna holds each call for 60 s, then
// answers 500: core/market/src/rest_api/requestor.rs counter_proposal),
// and the third answers after a second, asynchronously. Countered one after
// another, the first dead provider alone used up the 30 s negotiation
// budget (the old create failed); countered concurrently, the live
// provider's draft is taken once the better-ranked ones have had their few
// seconds, and the create rents it.
func TestDeadProvidersDoNotUseUpTheNegotiation(t *testing.T) {
	parallel(t)
	caps := []string{"vpn", "inet"}
	e := startDevnet(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "dead", Count: 2, Capabilities: caps, Coeffs: []float64{0.00005, 0.0001, 0}, NoCounterAnswer: true},
		{Name: "live", Capabilities: caps, Coeffs: []float64{0.0001, 0.0002, 0}, AnswerDelay: devnet.Duration{Duration: time.Second}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	cfg := serviceConfig("db", dbHash, alloc, nil, "")
	cfg["payload"].(map[string]any)["params"].(map[string]any)["offer_window"] = "2s"
	db := e.service("db", fast, cfg)
	e.cleanupService(db)
	began := time.Now()
	o := db.action(ctx, "create")
	took := time.Since(began)
	if o.exit != 0 {
		t.Fatalf("create with the two cheapest providers dead (negotiation budget %s), after %s:\n%s", fast.Negotiation, took, o)
	}
	if !strings.Contains(o.String(), "agreed with live") {
		t.Errorf("the create did not rent the live provider:\n%s", o)
	}
	t.Logf("rented the live provider after %s", took)
	if took > 25*time.Second {
		t.Errorf("the create took %s: the dead providers held it up", took)
	}
}
