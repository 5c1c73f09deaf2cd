package devnet_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

func TestAuth(t *testing.T) {
	e := start(t, devnet.Config{})
	tests := []struct {
		name, method, path, key string
		want                    int
	}{
		{"no key", "GET", "/me", "", http.StatusUnauthorized},
		{"wrong key", "GET", "/me", "nope", http.StatusUnauthorized},
		{"right key", "GET", "/me", testKey, http.StatusOK},
		{"version is open", "GET", "/version/get", "", http.StatusOK},
		{"market needs key", "GET", "/market-api/v1/demands", "", http.StatusUnauthorized},
		{"admin needs key", "GET", "/devnet/v1/summary", "", http.StatusUnauthorized},
		{"unknown path", "GET", "/nope", testKey, http.StatusNotFound},
		{"tunnel needs key", "GET", "/net-api/v1/net/x/tcp/10.0.0.2/80?authToken=nope", "", http.StatusUnauthorized},
		{"tunnel takes authToken", "GET", "/net-api/v1/net/x/tcp/10.0.0.2/80?authToken=" + testKey, "", http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.raw(tc.method, tc.path, tc.key, nil)
			if status != tc.want {
				t.Fatalf("status %d, want %d (%s)", status, tc.want, body)
			}
			if status == http.StatusUnauthorized {
				// yagna's auth middleware: text/plain (core/serv-api/web/src/middleware/auth/mod.rs).
				if want := map[bool]string{true: "Missing application key", false: "Invalid application key"}[tc.key == "" && !strings.Contains(tc.path, "authToken")]; string(body) != want {
					t.Errorf("401 body %q, want %q", body, want)
				}
			} else if status >= 400 {
				var m map[string]any
				if err := json.Unmarshal(body, &m); err != nil || m["message"] == "" {
					t.Errorf("error body %q is not {\"message\": ...}", body)
				}
			}
			if strings.Contains(string(body), testKey) {
				t.Errorf("answer leaks the app key: %s", body)
			}
		})
	}
	me, err := e.c.Me(ctxT(t, 10*time.Second))
	if err != nil || me.Identity != e.srv.Identity() || !strings.HasPrefix(me.Identity, "0x") || len(me.Identity) != 42 {
		t.Errorf("Me = %+v, %v", me, err)
	}
}

func TestMarketNegotiation(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "small", Count: 1, Cores: 2, MemGib: 4, StorageGib: 8},
		{Name: "big", Count: 2, Cores: 4, MemGib: 16, StorageGib: 64},
		{Name: "private", Count: 1, Cores: 8, Subnet: "private"},
	}})
	ctx := ctxT(t, time.Minute)
	alloc, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "5", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}})
	if err != nil || alloc.RemainingAmount != "5" || alloc.SpentAmount != "0" {
		t.Fatalf("CreateAllocation = %+v, %v", alloc, err)
	}
	dec, err := e.c.DemandDecorations(ctx, alloc.AllocationID)
	if err != nil || len(dec.Properties) == 0 || len(dec.Constraints) == 0 {
		t.Fatalf("DemandDecorations = %+v, %v", dec, err)
	}
	props := validDemand(map[string]any{"golem.node.debug.subnet": "public", "golem.srv.comp.task_package": taskPackage(testHash)})
	var cons []string
	for _, p := range dec.Properties {
		props[p.Key] = p.Value
	}
	cons = append(cons, dec.Constraints...)
	cons = append(cons, "(golem.inf.cpu.cores>=4)", "(golem.runtime.capabilities=vpn)")
	demand := yagna.DemandOfferBase{Properties: props, Constraints: "(&" + strings.Join(cons, "") + ")"}

	if _, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: props, Constraints: "(&(x=1"}); yagna.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("bad constraints: %v, want 400", err)
	}
	sub, err := e.c.SubscribeDemand(ctx, demand)
	if err != nil {
		t.Fatalf("SubscribeDemand: %v", err)
	}
	evs, err := e.c.CollectOffers(ctx, sub, time.Second, 10)
	if err != nil {
		t.Fatalf("CollectOffers: %v", err)
	}
	if len(evs) != 2 {
		t.Fatalf("%d proposals, want 2 (only the two big public providers match both ways): %+v", len(evs), evs)
	}
	for _, ev := range evs {
		p := ev.Proposal
		if ev.EventType != "ProposalEvent" || p.State != yagna.ProposalInitial || !strings.HasPrefix(p.Properties["golem.node.id.name"].(string), "big") {
			t.Errorf("unexpected proposal event %+v", ev)
		}
	}
	// Nothing more: the long poll times out with an empty list.
	start := time.Now()
	if more, err := e.c.CollectOffers(ctx, sub, 300*time.Millisecond, 10); err != nil || len(more) != 0 || time.Since(start) < 250*time.Millisecond {
		t.Errorf("second CollectOffers = %v, %v after %s; want [] after the timeout", more, err, time.Since(start))
	}
	initial := evs[0].Proposal
	if got, err := e.c.GetProposal(ctx, sub, initial.ProposalID); err != nil || got.ProposalID != initial.ProposalID {
		t.Errorf("GetProposal = %+v, %v", got, err)
	}
	second := evs[1].Proposal
	if err := e.c.RejectProposal(ctx, sub, second.ProposalID, &yagna.Reason{Message: "no thanks"}); err != nil {
		t.Errorf("RejectProposal: %v", err)
	}
	if err := e.c.RejectProposal(ctx, sub, second.ProposalID, nil); !yagna.IsGone(err) {
		t.Errorf("RejectProposal twice: %v, want 410", err)
	}
	if _, err := e.c.GetProposal(ctx, sub, second.ProposalID); !yagna.IsGone(err) {
		t.Errorf("GetProposal of a rejected one: %v, want 410", err)
	}
	// core/market/src/negotiation/requestor.rs create_agreement: AgreementError::NoNegotiations → 400.
	if _, err := e.c.CreateAgreement(ctx, initial.ProposalID, time.Now().Add(time.Hour)); yagna.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("agreement from an Initial proposal: %v, want 400", err)
	}
	counter, err := e.c.CounterProposal(ctx, sub, initial.ProposalID, demand)
	if err != nil {
		t.Fatalf("CounterProposal: %v", err)
	}
	evs, err = e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
	if err != nil || len(evs) != 1 || evs[0].Proposal == nil {
		t.Fatalf("CollectOffers after counter = %+v, %v", evs, err)
	}
	draft := evs[0].Proposal
	if draft.State != yagna.ProposalDraft || draft.PrevProposalID != counter || draft.IssuerID != initial.IssuerID {
		t.Fatalf("draft %+v: want Draft answering %s from %s", draft, counter, initial.IssuerID)
	}
	ag, err := e.c.CreateAgreement(ctx, draft.ProposalID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("CreateAgreement: %v", err)
	}
	// AgreementError::ProposalAlreadyAccepted → 409; WaitForApprovalError::NotConfirmed → 400
	// (core/market/src/rest_api/error.rs).
	if _, err := e.c.CreateAgreement(ctx, draft.ProposalID, time.Now().Add(time.Hour)); !yagna.IsConflict(err) {
		t.Errorf("second agreement from the same proposal: %v, want 409", err)
	}
	if err := e.c.WaitForApproval(ctx, ag, 100*time.Millisecond); yagna.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("wait before confirm: %v, want 400", err)
	}
	if err := e.c.ConfirmAgreement(ctx, ag, ""); err != nil {
		t.Fatalf("ConfirmAgreement: %v", err)
	}
	if err := e.c.WaitForApproval(ctx, ag, 5*time.Second); err != nil {
		t.Fatalf("WaitForApproval: %v", err)
	}
	got, err := e.c.GetAgreement(ctx, ag)
	if err != nil || got.State != yagna.AgreementApproved || got.Offer.ProviderID != initial.IssuerID || got.ApprovedDate == nil ||
		got.Demand.RequestorID != e.srv.Identity() || got.Offer.Properties["golem.node.id.name"] == nil {
		t.Fatalf("GetAgreement = %+v, %v", got, err)
	}
	if _, err := e.c.GetAgreement(ctx, "nope"); !yagna.IsNotFound(err) {
		t.Errorf("unknown agreement: %v, want 404", err)
	}
	if err := e.c.TerminateAgreement(ctx, ag, yagna.TerminationReason("done")); err != nil {
		t.Fatalf("TerminateAgreement: %v", err)
	}
	if err := e.c.TerminateAgreement(ctx, ag, yagna.TerminationReason("done")); !yagna.IsGone(err) {
		t.Errorf("second terminate: %v, want 410", err)
	}
	// WaitForApprovalError::Terminated → 400.
	if err := e.c.WaitForApproval(ctx, ag, time.Second); yagna.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("wait on a terminated agreement: %v, want 400", err)
	}
	ievs, err := e.c.InvoiceEvents(ctx, 2*time.Second, time.Time{}, 10)
	if err != nil || len(ievs) != 1 || ievs[0].EventType != "InvoiceReceivedEvent" {
		t.Fatalf("InvoiceEvents = %+v, %v", ievs, err)
	}
	inv, err := e.c.GetInvoice(ctx, ievs[0].InvoiceID)
	if err != nil || inv.AgreementID != ag || inv.Amount != "0" {
		t.Fatalf("GetInvoice = %+v, %v", inv, err)
	}
	if err := e.c.AcceptInvoice(ctx, inv.InvoiceID, yagna.Acceptance{TotalAmountAccepted: inv.Amount, AllocationID: alloc.AllocationID}, 5*time.Second); err != nil {
		t.Fatalf("AcceptInvoice: %v", err)
	}

	// The rejectProposals knob: a counter-proposal gets a ProposalRejectedEvent.
	if status, body := e.raw("PUT", devnet.AdminPrefix+"/faults", testKey, map[string]any{"rejectProposals": true}); status != http.StatusOK {
		t.Fatalf("PUT faults: %d %s", status, body)
	}
	other := evs[0].Proposal // already Accepted: 410
	if _, err := e.c.CounterProposal(ctx, sub, other.ProposalID, demand); !yagna.IsGone(err) {
		t.Errorf("counter on an accepted proposal: %v, want 410", err)
	}
	sub2, err := e.c.SubscribeDemand(ctx, demand)
	if err != nil {
		t.Fatal(err)
	}
	evs, err = e.c.CollectOffers(ctx, sub2, time.Second, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("maxEvents=1: %d events, %v", len(evs), err)
	}
	counter, err = e.c.CounterProposal(ctx, sub2, evs[0].Proposal.ProposalID, demand)
	if err != nil {
		t.Fatal(err)
	}
	var rejected bool
	for i := 0; i < 3 && !rejected; i++ {
		evs, err = e.c.CollectOffers(ctx, sub2, time.Second, 10)
		for _, ev := range evs {
			rejected = rejected || (ev.EventType == "ProposalRejectedEvent" && ev.ProposalID == counter)
		}
	}
	if !rejected {
		t.Errorf("no ProposalRejectedEvent for %s with rejectProposals set", counter)
	}
	if err := e.c.UnsubscribeDemand(ctx, sub2); err != nil {
		t.Fatal(err)
	}
	if err := e.c.UnsubscribeDemand(ctx, sub2); !yagna.IsGone(err) {
		t.Errorf("second unsubscribe: %v, want 410", err)
	}
	if _, err := e.c.CollectOffers(ctx, sub2, 0, 10); !yagna.IsNotFound(err) {
		t.Errorf("events of an unsubscribed demand: %v, want 404", err)
	}
	if err := e.c.ReleaseAllocation(ctx, alloc.AllocationID); err != nil {
		t.Fatal(err)
	}
	// yagna answers 404 {"message":null} for a released allocation (AllocationDao::get filters released
	// ones out: core/payment/src/dao/allocation.rs), and 410 to a second release (AllocationDao::release).
	if code, body := e.raw(http.MethodGet, "/payment-api/v1/allocations/"+alloc.AllocationID, testKey, nil); code != http.StatusNotFound || string(bytes.TrimSpace(body)) != `{"message":null}` {
		t.Errorf("GET of a released allocation = %d %s, want 404 {\"message\":null}", code, body)
	}
	if err := e.c.ReleaseAllocation(ctx, alloc.AllocationID); !yagna.IsGone(err) {
		t.Errorf("second release: %v, want 410", err)
	}
}

func TestNetAPI(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx := ctxT(t, time.Minute)
	// yagna answers the range in CIDR form and the first host as the gateway when none is asked for
	// (core/vpn/src/network.rs VpnSupervisor::create_network).
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.7.0", Mask: "255.255.255.0"})
	if err != nil || n.IP != "10.213.7.0/24" || n.Mask != "255.255.255.0" || n.Gateway != "10.213.7.1" || n.ID == "" {
		t.Fatalf("CreateNetwork = %+v, %v, want ip 10.213.7.0/24, gateway 10.213.7.1", n, err)
	}
	// The requestor holds the first host from the creation on, listed with the prefix (Handler<GetAddresses>).
	if addrs, err := e.c.Addresses(ctx, n.ID); err != nil || len(addrs) != 1 || addrs[0].IP != "10.213.7.1/24" {
		t.Errorf("Addresses after create = %+v, %v, want [10.213.7.1/24]", addrs, err)
	}
	// 200 null, and 200 again for an address already held: yagna's addresses are a set, never a 409.
	for i := range 2 {
		if code, body := e.raw(http.MethodPost, "/net-api/v1/net/"+n.ID+"/addresses", testKey, map[string]string{"ip": "10.213.7.1"}); code != http.StatusOK || string(body) != "null" {
			t.Errorf("AddAddress #%d = %d %s, want 200 null", i+1, code, body)
		}
	}
	// A CIDR in the body is refused as yagna parses the ip as an IpAddr.
	if code, body := e.raw(http.MethodPost, "/net-api/v1/net/"+n.ID+"/addresses", testKey, map[string]string{"ip": "10.213.7.5/24"}); code != http.StatusBadRequest {
		t.Errorf("AddAddress(CIDR) = %d %s, want 400", code, body)
	}
	if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: "0xabc", IP: "10.213.7.2"}); err != nil {
		t.Fatalf("AddNode: %v", err)
	}
	// As yagna (core/vpn/src/network.rs): 200 at a taken address, and the holder keeps it.
	if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: "0xdef", IP: "10.213.7.2"}); err != nil {
		t.Errorf("taken node IP: %v, want 200 as yagna answers", err)
	}
	if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: "0xdef", IP: "10.213.7.1"}); err != nil {
		t.Errorf("node at the requestor's address: %v, want 200 as yagna answers", err)
	}
	if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: "0xdef", IP: "10.9.9.9"}); yagna.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("node IP outside the network: %v, want 400", err)
	}
	nodes, err := e.c.Nodes(ctx, n.ID)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "0xabc" || nodes[0].IP != "10.213.7.2" {
		t.Errorf("Nodes = %+v, %v", nodes, err)
	}
	addrs, err := e.c.Addresses(ctx, n.ID)
	if err != nil || len(addrs) != 1 || addrs[0].IP != "10.213.7.1/24" {
		t.Errorf("Addresses = %+v, %v", addrs, err)
	}
	if got, err := e.c.GetNetwork(ctx, n.ID); err != nil || got != n {
		t.Errorf("GetNetwork = %+v, %v", got, err)
	}
	list, err := e.c.Networks(ctx)
	if err != nil || len(list) != 1 {
		t.Errorf("Networks = %+v, %v", list, err)
	}
	if err := e.c.RemoveNode(ctx, n.ID, "0xabc"); err != nil {
		t.Errorf("RemoveNode: %v", err)
	}
	// yagna answers 200 for a node that is not there (Handler<RemoveNode>).
	if err := e.c.RemoveNode(ctx, n.ID, "0xabc"); err != nil {
		t.Errorf("RemoveNode twice: %v, want 200", err)
	}
	// No Docker network behind it: its packets go through the devnet's relay (vpnrelay.go).
	if ns, err := e.docker.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "gcompose.devnet="+e.instance))}); err != nil || len(ns) != 0 {
		t.Errorf("Docker networks of the devnet: %d (%v), want none", len(ns), err)
	}
	if err := e.c.DeleteNetwork(ctx, n.ID); err != nil {
		t.Fatalf("DeleteNetwork: %v", err)
	}
	// Owning no network: 404 {"message":"Network not found"} (VpnSupervisor::owner, Error::NetNotFound).
	if code, body := e.raw(http.MethodDelete, "/net-api/v1/net/"+n.ID, testKey, nil); code != http.StatusNotFound || string(bytes.TrimSpace(body)) != `{"message":"Network not found"}` {
		t.Errorf("DeleteNetwork twice = %d %s, want 404 Network not found", code, body)
	}
	// CIDR form of the address names the same network.
	n2, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.8.1/24"})
	if err != nil || n2.IP != "10.213.8.0/24" || n2.Mask != "255.255.255.0" || n2.Gateway != "10.213.8.1" {
		t.Errorf("CreateNetwork(CIDR) = %+v, %v", n2, err)
	}
	// Owning another network: 403 with an empty body for the removed one (VpnSupervisor::owner,
	// Error::Forbidden → HttpResponse::Forbidden().finish()), which the client reports as gone.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if code, body := e.raw(m, "/net-api/v1/net/"+n.ID, testKey, nil); code != http.StatusForbidden || len(body) != 0 {
			t.Errorf("%s of a removed network while another exists = %d %q, want 403 and no body", m, code, body)
		}
	}
	if _, err := e.c.GetNetwork(ctx, n.ID); !yagna.IsNotFound(err) || !strings.Contains(err.Error(), "403") {
		t.Errorf("client GetNetwork of the removed network = %v, want IsNotFound naming the 403", err)
	}
	if err := e.c.DeleteNetwork(ctx, n2.ID); err != nil {
		t.Errorf("DeleteNetwork(n2): %v", err)
	}
}
