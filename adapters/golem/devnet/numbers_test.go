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

// TestUnsignedPropertiesAsWritten: a provider reads the debit-note interval, the payment timeout, the
// accept timeout (u32) and the expiration (u64) with serde, which refuses 120.0 for a u32; its negotiator
// then errs, and the provider logs it and never answers the counter-proposal
// (agent/provider/src/market/negotiator/builtin/note_interval.rs read_duration, provider_market.rs
// process_proposal). The same demand with 120 gets its Draft. On the old devnet, which read every number
// as a float, 120.0 was answered.
func TestUnsignedPropertiesAsWritten(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx := ctxT(t, time.Minute)
	alloc, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "10", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := e.c.DemandDecorations(ctx, alloc.AllocationID)
	if err != nil {
		t.Fatal(err)
	}
	props := validDemand(map[string]any{"golem.srv.comp.task_package": taskPackage(testHash), "golem.node.debug.subnet": "public"})
	for _, p := range dec.Properties {
		props[p.Key] = p.Value
	}
	cons := "(&" + strings.Join(append([]string{"(golem.runtime.name=vm)"}, dec.Constraints...), "") + ")"
	// One demand per case: a proposal is countered once.
	counter := func(interval string) (string, string) {
		t.Helper()
		sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: props, Constraints: cons})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.c.UnsubscribeDemand(ctx, sub) })
		evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
		if err != nil || len(evs) == 0 || evs[0].Proposal == nil {
			t.Fatalf("CollectOffers: %v %+v", err, evs)
		}
		initial := evs[0].Proposal
		p := map[string]any{}
		for k, v := range props {
			p[k] = v
		}
		p["golem.com.payment.debit-notes.accept-timeout?"] = initial.Properties["golem.com.payment.debit-notes.accept-timeout?"]
		p["golem.com.scheme.payu.debit-note.interval-sec?"] = json.RawMessage(interval) // as written on the wire
		status, body := e.raw(http.MethodPost, "/market-api/v1/demands/"+sub+"/proposals/"+initial.ProposalID, testKey, map[string]any{"properties": p, "constraints": cons})
		var id string
		if status != http.StatusOK || json.Unmarshal(body, &id) != nil {
			t.Fatalf("counter-proposal with interval %s: %d %s", interval, status, body)
		}
		return sub, id
	}
	answered := func(sub, counterID string) bool {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			evs, err := e.c.CollectOffers(ctx, sub, time.Second, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Proposal != nil && ev.Proposal.PrevProposalID == counterID || ev.ProposalID == counterID {
					return true
				}
			}
		}
		return false
	}
	if sub, c := counter("120.0"); answered(sub, c) {
		t.Errorf("a counter-proposal with debit-note interval 120.0 was answered; a provider cannot read it and never answers")
	}
	if sub, c := counter("120"); !answered(sub, c) {
		t.Errorf("a counter-proposal with debit-note interval 120 was not answered")
	}
}
