package devnet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestBusyProviderRejectsNonFinallyAndOffersAgain: a provider at its
// agreement limit rejects a counter-proposal with
// golem.proposal.rejection.is-final false ("No capacity available",
// agent/provider/src/market/negotiator/builtin/max_agreements.rs), and once
// its agreement ends it negotiates the postponed demand again
// (agent/provider/src/market/provider_market.rs PostponeDemand,
// renegotiate_demands): the demand gets a new proposal. Its answers come
// answerDelay later, as events.
func TestBusyProviderRejectsNonFinallyAndOffersAgain(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", AnswerDelay: devnet.Duration{Duration: 500 * time.Millisecond}}}})
	ctx := ctxT(t, time.Minute)

	props := validDemand(map[string]any{
		"golem.srv.comp.task_package":      taskPackage(testHash),
		"golem.node.debug.subnet":          "public",
		"golem.srv.comp.vm.package_format": "gvmkit-squash",
	})
	cons := "(&(golem.runtime.name=vm)(golem.node.debug.subnet=public))"
	sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: props, Constraints: cons})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.UnsubscribeDemand(ctx, sub) })
	evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
	if err != nil || len(evs) != 1 || evs[0].Proposal == nil {
		t.Fatalf("initial proposal: %+v %v", evs, err)
	}
	initial := evs[0].Proposal

	busy := e.rent(ctx, taskPackage(testHash)) // the provider's only slot
	props["golem.com.payment.chosen-platform"] = funded
	counter, err := e.c.CounterProposal(ctx, sub, initial.ProposalID, yagna.DemandOfferBase{Properties: props, Constraints: cons})
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	var rejected *yagna.MarketEvent
	for rejected == nil {
		evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.EventType == yagna.EventProposalRejected && ev.ProposalID == counter {
				rejected = &ev
			}
		}
	}
	if took := time.Since(sent); took < 400*time.Millisecond {
		t.Errorf("the rejection came %s after the counter, want answerDelay (500ms) later", took)
	}
	if rejected.Reason == nil || rejected.Reason.Extra["golem.proposal.rejection.is-final"] != false || !strings.Contains(rejected.Reason.Message, "No capacity available") {
		t.Fatalf("busy provider's rejection: %+v, want a non-final 'No capacity available'", rejected.Reason)
	}

	if err := e.c.TerminateAgreement(ctx, busy.agreement, yagna.TerminationReason("done")); err != nil {
		t.Fatal(err)
	}
	evs, err = e.c.CollectOffers(ctx, sub, 5*time.Second, 10)
	if err != nil || len(evs) == 0 || evs[0].Proposal == nil || evs[0].Proposal.IssuerID != initial.IssuerID {
		t.Fatalf("after its agreement ended the provider did not negotiate the demand again: %+v %v", evs, err)
	}
}
