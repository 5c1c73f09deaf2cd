package devnet_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestFaultsAndLists covers the rejectAgreements and slow knobs, busy providers, and the list endpoints.
func TestFaultsAndLists(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "only", Count: 1}}})
	ctx := ctxT(t, time.Minute)

	neg := e.rent(ctx, taskPackage(testHash))
	// The only provider is busy: a new demand gets no proposal.
	sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: "()"})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := e.c.CollectOffers(ctx, sub, 200*time.Millisecond, 10); err != nil || len(evs) != 0 {
		t.Errorf("busy provider proposed: %+v, %v", evs, err)
	}
	ags, err := e.c.AgreementEvents(ctx, 0, time.Time{}, 10, "")
	if err != nil || len(ags) != 1 || ags[0].EventType != "AgreementApprovedEvent" {
		t.Errorf("AgreementEvents = %+v, %v", ags, err)
	}
	if err := e.c.TerminateAgreement(ctx, neg.agreement, nil); err != nil {
		t.Fatal(err)
	}
	// Free again: the provider's offer reaches the waiting demand.
	if evs, err := e.c.CollectOffers(ctx, sub, time.Second, 10); err != nil || len(evs) != 1 || evs[0].Proposal.State != yagna.ProposalInitial {
		t.Errorf("after the agreement ended: %+v, %v; want one Initial proposal", evs, err)
	}
	if status, body := e.raw("GET", "/market-api/v1/agreements", testKey, nil); status != http.StatusOK || len(body) < 10 {
		t.Errorf("list agreements: %d %s", status, body)
	}
	if list, err := e.c.Allocations(ctx); err != nil || len(list) != 1 {
		t.Errorf("Allocations = %+v, %v", list, err)
	}
	if a, err := e.c.AmendAllocation(ctx, neg.alloc.AllocationID, yagna.AllocationUpdate{TotalAmount: "20"}); err != nil || a.TotalAmount != "20" {
		t.Errorf("AmendAllocation = %+v, %v", a, err)
	}
	if _, err := e.c.DebitNotes(ctx, time.Time{}, 10); err != nil {
		t.Errorf("DebitNotes: %v", err)
	}
	if _, err := e.c.Demands(ctx); err != nil {
		t.Errorf("Demands: %v", err)
	}

	// rejectAgreements: confirm, then wait answers 410 Rejected.
	if status, body := e.raw("PUT", devnet.AdminPrefix+"/faults", testKey, map[string]any{"rejectAgreements": true, "slow": "300ms"}); status != http.StatusOK {
		t.Fatalf("PUT faults: %d %s", status, body)
	}
	startT := time.Now()
	if _, err := e.c.Me(ctx); err != nil || time.Since(startT) < 300*time.Millisecond {
		t.Errorf("slow knob: Me answered after %s (%v)", time.Since(startT), err)
	}
	sub2, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: "()"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := e.c.CollectOffers(ctx, sub2, time.Second, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("CollectOffers: %+v, %v", evs, err)
	}
	counter, err := e.c.CounterProposal(ctx, sub2, evs[0].Proposal.ProposalID, yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: "()"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err = e.c.CollectOffers(ctx, sub2, time.Second, 10)
	if err != nil || len(evs) != 1 || evs[0].Proposal.PrevProposalID != counter {
		t.Fatalf("draft: %+v, %v", evs, err)
	}
	ag, err := e.c.CreateAgreement(ctx, evs[0].Proposal.ProposalID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.ConfirmAgreement(ctx, ag, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitForApproval(ctx, ag, time.Second); !yagna.IsGone(err) {
		t.Errorf("wait with rejectAgreements: %v, want 410", err)
	}
	if err := e.c.CancelAgreement(ctx, ag, nil); !yagna.IsGone(err) {
		t.Errorf("cancel a rejected agreement: %v, want 410", err)
	}
	if status, _ := e.raw("PUT", devnet.AdminPrefix+"/faults", testKey, map[string]any{}); status != http.StatusOK {
		t.Fatal("reset faults")
	}
	var sum devnet.Summary
	status, body := e.raw("GET", devnet.AdminPrefix+"/summary", testKey, nil)
	if status != http.StatusOK {
		t.Fatalf("summary: %d %s", status, body)
	}
	_ = sum
}
