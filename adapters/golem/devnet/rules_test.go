package devnet_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// The rules of yagna and its provider agent that the devnet enforces (docs/golem.md, "Rules of the real
// network"): each test shows the devnet refusing what the adapters used to send and taking what they
// send now.

const (
	accept   = "golem.com.payment.debit-notes.accept-timeout?"
	interval = "golem.com.scheme.payu.debit-note.interval-sec?"
	paytime  = "golem.com.scheme.payu.payment-timeout-sec?"
)

// TestRuleFundedPlatform: an allocation that names no platform is on Holesky (yagna's default), which
// `yagna payment fund` no longer funds: 400 with an RFC 7807 body, as yagna answers. The funded account
// (Hoodi) is listed by requestorAccounts and takes allocations up to its funds.
func TestRuleFundedPlatform(t *testing.T) {
	e := start(t, devnet.Config{Accounts: map[string]string{funded: "10"}})
	ctx := ctxT(t, time.Minute)
	accounts, err := e.c.RequestorAccounts(ctx)
	if err != nil || len(accounts) != 1 || accounts[0].Platform != funded || !accounts[0].Send || accounts[0].Network != "hoodi" || accounts[0].Address != e.srv.Identity() {
		t.Fatalf("RequestorAccounts = %+v, %v", accounts, err)
	}
	// What the adapters sent before: no platform (or holesky, core/desired's old default).
	for _, p := range []*yagna.PaymentPlatform{nil, {Name: "erc20-holesky-tglm"}} {
		_, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "5", PaymentPlatform: p})
		if yagna.StatusOf(err) != http.StatusBadRequest || !yagna.IsProblem(err, "insufficient-account-funds") ||
			!strings.Contains(err.Error(), "Insufficient funds to create the allocation") || !strings.Contains(err.Error(), "paymentPlatform erc20-holesky-tglm") {
			t.Fatalf("allocation on %v: %v, want yagna's 400 insufficient-account-funds problem", p, err)
		}
	}
	// yagna initialised the Holesky account before validating: it is listed now, empty.
	if accounts, _ := e.c.RequestorAccounts(ctx); len(accounts) != 2 {
		t.Errorf("accounts after a refused holesky allocation: %+v", accounts)
	}
	a, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "6", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}})
	if err != nil || a.PaymentPlatform == nil || a.PaymentPlatform.Name != funded {
		t.Fatalf("allocation on the funded platform: %+v, %v", a, err)
	}
	// 6 of 10 are reserved: 5 more do not fit, 4 do; nor may an amendment exceed the funds.
	if _, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "5", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}}); !yagna.IsProblem(err, "insufficient-account-funds") ||
		!strings.Contains(err.Error(), "reservedFunds 6") {
		t.Errorf("allocation beyond the funds left: %v", err)
	}
	if _, err := e.c.AmendAllocation(ctx, a.AllocationID, yagna.AllocationUpdate{TotalAmount: "11"}); !yagna.IsProblem(err, "insufficient-account-funds") {
		t.Errorf("amendment beyond the funds: %v", err)
	}
	if _, err := e.c.AmendAllocation(ctx, a.AllocationID, yagna.AllocationUpdate{TotalAmount: "10"}); err != nil {
		t.Errorf("amendment within the funds: %v", err)
	}
	if err := e.c.ReleaseAllocation(ctx, a.AllocationID); err != nil {
		t.Fatal(err)
	}
	// Platforms that do not parse, as yagna's platform_triple.rs refuses them.
	for _, p := range []*yagna.PaymentPlatform{{Name: "erc20-rinkeby-tglm"}, {Name: "hoodi"}, {Name: "erc20-hoodi-glm"}, {Token: "GLM"}} {
		if _, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: p}); !yagna.IsProblem(err, "bad-payment-platform") {
			t.Errorf("platform %+v: %v, want a 400 bad-payment-platform problem", p, err)
		}
	}
	// {token: glm} means Polygon (yagna's default mainnet), which has no funds here.
	if _, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: &yagna.PaymentPlatform{Token: "glm"}}); !strings.Contains(err.Error(), "erc20-polygon-glm") {
		t.Errorf("{token: glm}: %v", err)
	}
	// The funds rule can be relaxed.
	r := start(t, devnet.Config{Relax: devnet.Relax{Funds: true}})
	if _, err := r.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "5"}); err != nil {
		t.Errorf("relaxed funds: %v", err)
	}
}

// market is one subscription with the Initial proposal of its only provider.
type market struct {
	e       *env
	sub     string
	cons    string
	initial *yagna.Proposal
}

func (e *env) market(ctx context.Context) *market {
	e.t.Helper()
	cons := "(golem.node.debug.subnet=public)"
	sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: cons})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.c.UnsubscribeDemand(context.Background(), sub) })
	evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
	if err != nil || len(evs) != 1 || evs[0].Proposal == nil {
		e.t.Fatalf("CollectOffers: %+v, %v", evs, err)
	}
	return &market{e: e, sub: sub, cons: cons, initial: evs[0].Proposal}
}

// counter sends props as a counter-proposal to the Initial proposal and returns the provider's Draft,
// or the reason it rejected it.
func (m *market) counter(ctx context.Context, props map[string]any) (*yagna.Proposal, string) {
	m.e.t.Helper()
	id, err := m.e.c.CounterProposal(ctx, m.sub, m.initial.ProposalID, yagna.DemandOfferBase{Properties: props, Constraints: m.cons})
	if err != nil {
		m.e.t.Fatalf("CounterProposal: %v", err)
	}
	for {
		evs, err := m.e.c.CollectOffers(ctx, m.sub, time.Second, 10)
		if err != nil {
			m.e.t.Fatalf("CollectOffers: %v", err)
		}
		for _, ev := range evs {
			switch {
			case ev.Proposal != nil && ev.Proposal.PrevProposalID == id:
				return ev.Proposal, ""
			case ev.EventType == yagna.EventProposalRejected && ev.ProposalID == id:
				return nil, ev.Reason.Message
			}
		}
	}
}

// agree makes an agreement from a Draft and confirms it; it returns "" when the provider approves it,
// else its reason. An approved agreement is terminated again, freeing the provider.
func (m *market) agree(ctx context.Context, draft *yagna.Proposal) string {
	m.e.t.Helper()
	c := m.e.c
	ag, err := c.CreateAgreement(ctx, draft.ProposalID, time.Now().Add(time.Hour))
	if err != nil {
		m.e.t.Fatal(err)
	}
	if err := c.ConfirmAgreement(ctx, ag, ""); err != nil {
		m.e.t.Fatal(err)
	}
	if err := c.WaitForApproval(ctx, ag, 5*time.Second); err == nil {
		if err := c.TerminateAgreement(ctx, ag, yagna.TerminationReason("test done")); err != nil {
			m.e.t.Fatal(err)
		}
		return ""
	}
	evs, err := c.AgreementEvents(ctx, 0, time.Time{}, 100, "")
	if err != nil {
		m.e.t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.AgreementID == ag && ev.EventType == "AgreementRejectedEvent" && ev.Reason != nil {
			return ev.Reason.Message
		}
	}
	m.e.t.Fatalf("agreement %s neither approved nor rejected with a reason", ag)
	return ""
}

// TestRulePaymentTerms is the provider's negotiator (agent/provider/src/market/negotiator/builtin:
// demand_validation.rs, expiration.rs, note_interval.rs, payment_timeout.rs) against what requestors
// send: the adapters' old fixed 240 s deadline above this provider's 180 s, long expirations without
// mid-agreement payments, no chosen platform; and what they send now, copied from the offer.
func TestRulePaymentTerms(t *testing.T) {
	e := start(t, devnet.Config{DebitNoteAcceptTimeout: devnet.Duration{Duration: 180 * time.Second}, Providers: []devnet.ProviderConfig{{Name: "p"}}})
	ctx := ctxT(t, 2*time.Minute)
	m := e.market(ctx)
	if got := m.initial.Properties[accept]; got != 180.0 {
		t.Fatalf("the offer proposes accept-timeout %v, want 180", got)
	}
	if m.initial.Properties[interval] == nil || m.initial.Properties[paytime] == nil {
		t.Fatalf("the offer lacks the payu terms: %v", m.initial.Properties)
	}
	in := func(d time.Duration) int64 { return time.Now().Add(d).UnixMilli() }
	tests := []struct {
		name   string
		set    map[string]any
		drop   []string
		reject string         // the provider rejects the counter-proposal with this
		draft  map[string]any // else its Draft has these terms (nil: the property is absent)
	}{
		{"old adapter: fixed 240 s deadline", map[string]any{accept: 240}, nil, "DebitNote acceptance deadline should be less than 3m0s", nil},
		{"the offer's deadline", map[string]any{accept: 180}, nil, "", map[string]any{accept: 180.0, interval: nil, paytime: nil}},
		{"a shorter deadline is taken", map[string]any{accept: 120}, nil, "", map[string]any{accept: 120.0}},
		{"too short a deadline", map[string]any{accept: 3}, nil, "To low DebitNotes timeout", nil},
		{"no chosen platform", nil, []string{"golem.com.payment.chosen-platform"}, "Missing fields: /golem/com/payment/chosen-platform", nil},
		{"a platform the provider does not take", map[string]any{"golem.com.payment.chosen-platform": "erc20-sepolia-tglm", accept: 180}, nil, "no payment account for platform erc20-sepolia-tglm", nil},
		// The offer's constraints ask for an expiration after the offer was made.
		{"no expiration", map[string]any{accept: 180}, []string{"golem.srv.comp.expiration"}, "does not match the offer", nil},
		{"expiration under 5 min", map[string]any{accept: 180, "golem.srv.comp.expiration": in(2 * time.Minute)}, nil, "less than 5m0s", nil},
		{"an hour without a deadline", nil, []string{accept}, "more than 30m0s from now", nil},
		{"20 min without a deadline", map[string]any{"golem.srv.comp.expiration": in(20 * time.Minute)}, []string{accept}, "", map[string]any{accept: nil}},
		{"old adapter: 12 h without mid-agreement payments", map[string]any{accept: 180, "golem.srv.comp.expiration": in(12 * time.Hour)}, nil, "exceeds the 10h0m0s threshold", nil},
		{"12 h with mid-agreement payments", map[string]any{accept: 180, interval: 60, paytime: 18000, "golem.srv.comp.expiration": in(12 * time.Hour)}, nil, "",
			map[string]any{accept: 180.0, interval: 60.0, paytime: 18000.0}},
		{"payment timeout above 24 h", map[string]any{accept: 180, interval: 60, paytime: 90000, "golem.srv.comp.expiration": in(12 * time.Hour)}, nil, "not in acceptable range", nil},
		{"interval above 24 h", map[string]any{accept: 180, interval: 90000, paytime: 18000, "golem.srv.comp.expiration": in(12 * time.Hour)}, nil, "not in acceptable range", nil},
		// A fractional deadline is not rejected: the provider cannot read it as a u32 and never answers
		// (TestUnsignedPropertiesAsWritten, numbers_test.go).
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			props := validDemand(map[string]any{"golem.node.debug.subnet": "public"})
			maps.Copy(props, tt.set)
			for _, k := range tt.drop {
				delete(props, k)
			}
			draft, reason := m.counter(ctx, props)
			if tt.reject != "" {
				if draft != nil || !strings.Contains(reason, tt.reject) {
					t.Fatalf("counter-proposal answered %v / %q, want a rejection with %q", draft, reason, tt.reject)
				}
				return
			}
			if draft == nil {
				t.Fatalf("counter-proposal rejected: %s", reason)
			}
			for k, want := range tt.draft {
				if got, ok := draft.Properties[k]; (want == nil && ok) || (want != nil && got != want) {
					t.Errorf("draft %s = %v (present %v), want %v", k, got, ok, want)
				}
			}
			// The Draft answers the demand: the agreement made from it is approved.
			if why := m.agree(ctx, draft); why != "" {
				t.Fatalf("agreement rejected: %s", why)
			}
		})
	}
	// Relaxed: the old fixed deadline passes.
	r := start(t, devnet.Config{DebitNoteAcceptTimeout: devnet.Duration{Duration: 180 * time.Second}, Relax: devnet.Relax{PaymentTerms: true, ChosenPlatform: true}, Providers: []devnet.ProviderConfig{{Name: "p"}}})
	rm := r.market(ctx)
	props := validDemand(map[string]any{"golem.node.debug.subnet": "public"})
	props[accept] = 240
	delete(props, "golem.com.payment.chosen-platform")
	if d, reason := rm.counter(ctx, props); d == nil {
		t.Errorf("relaxed devnet rejected the old terms: %s", reason)
	}
}

// TestRuleRuntimeNames: providers advertise runtime vm with capabilities (manifest-support for
// manifests); a demand for runtime vm/manifest, as the adapters used to send, matches none.
func TestRuleRuntimeNames(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 2}, {Name: "plain", Capabilities: []string{"inet"}}}})
	ctx := ctxT(t, time.Minute)
	count := func(cons string) int {
		t.Helper()
		sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: cons})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.c.UnsubscribeDemand(ctx, sub) }()
		evs, err := e.c.CollectOffers(ctx, sub, 500*time.Millisecond, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	if n := count("(&(golem.runtime.name=vm/manifest)(golem.node.debug.subnet=public))"); n != 0 {
		t.Errorf("runtime vm/manifest: %d proposals, want none", n)
	}
	if n := count("(&(golem.runtime.name=vm)(golem.runtime.capabilities=manifest-support)(golem.node.debug.subnet=public))"); n != 2 {
		t.Errorf("runtime vm with manifest-support: %d proposals, want 2", n)
	}
	if n := count("(&(golem.runtime.name=vm)(golem.inf.mem.gib>=0.5)(golem.inf.storage.gib>=2)(golem.inf.cpu.threads>=1))"); n != 3 {
		t.Errorf("vm with the usual minimums: %d proposals, want 3", n)
	}
	offers := e.raw
	if status, body := offers("GET", "/market-api/v1/offers", testKey, nil); status != http.StatusOK || !strings.Contains(string(body), `"golem.runtime.capabilities":["inet","vpn","manifest-support","start-entrypoint"]`) ||
		!strings.Contains(string(body), `"golem.srv.caps.payload-manifest":true`) {
		t.Errorf("offers do not advertise what a vm provider does:\n%s", body)
	}
	if _, err := devnet.New(ctx, devnet.Options{Config: devnet.Config{Providers: []devnet.ProviderConfig{{Runtime: "vm/manifest"}}}, AppKey: testKey, Docker: e.docker}); err == nil || !strings.Contains(err.Error(), "manifest-support") {
		t.Errorf("a provider with runtime vm/manifest: %v", err)
	}
}

// TestRuleVPNCapability: on a provider without the vpn capability the exe-unit starts no VPN
// endpoint (yagna exe-unit/src/manifest.rs, runtime/process.rs): deploy succeeds, and the VM is on no
// network. A demand must ask for vpn.
func TestRuleVPNCapability(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "novpn", Capabilities: []string{"inet"}}}})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 2*time.Minute)
	neg := e.rentWhere(ctx, taskPackage(testHash), "(golem.runtime.capabilities=inet)")
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.60.0", Mask: "255.255.255.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: neg.providerID, IP: "10.213.60.2"}); err != nil {
		t.Fatal(err)
	}
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	res := e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: "10.213.60.2"}}}},
		yagna.ExeScriptCommand{Start: &yagna.StartCommand{}})
	if bad, ok := yagna.FirstError(res); ok {
		t.Fatalf("deploy on a provider without vpn failed: %+v", bad)
	}
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "gcompose.devnet.activity="+act.ActivityID))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("activity container: %d, %v", len(cs), err)
	}
	if nets := cs[0].NetworkSettings.Networks; len(nets) != 1 || nets["none"] == nil {
		t.Errorf("the VM of a provider without vpn is on %v, want no network", slices.Collect(maps.Keys(nets)))
	}
}

// TestAgreementSessionsAndAllocationTimeouts: what the adapters find their objects by. An agreement keeps
// the appSessionId given at confirm and GET /agreements filters on it exactly (yagna
// core/market/src/db/dao/agreement.rs); an allocation keeps its timeout to the nanosecond and is released
// when it passes (core/payment/src/models/allocation.rs, api/allocations/mod.rs
// schedule_release_allocation); one without a timeout gets ten years.
func TestAgreementSessionsAndAllocationTimeouts(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", MaxAgreements: 2}}})
	ctx := ctxT(t, time.Minute)
	m := e.market(ctx)
	confirm := func(session string) string {
		t.Helper()
		props := validDemand(map[string]any{"golem.node.debug.subnet": "public"})
		props[accept] = m.initial.Properties[accept]
		draft, reason := m.counter(ctx, props)
		if draft == nil {
			t.Fatalf("counter-proposal rejected: %s", reason)
		}
		ag, err := e.c.CreateAgreement(ctx, draft.ProposalID, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.ConfirmAgreement(ctx, ag, session); err != nil {
			t.Fatal(err)
		}
		if err := e.c.WaitForApproval(ctx, ag, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		return ag
	}
	// One agreement with a session, one without.
	withSession := confirm("gcompose/app-1")
	plain := confirm("")
	list, err := e.c.ListAgreements(ctx, "gcompose/app-1", "")
	// As yagna serializes AgreementListEntry: timestamp and approvedDate (the old devnet sent creationTs and
	// approveTs, which leave these zero).
	if err != nil || len(list) != 1 || list[0].ID != withSession || list[0].ApprovedDate == nil || list[0].Timestamp.IsZero() {
		t.Fatalf("agreements of session gcompose/app-1: %+v, %v", list, err)
	}
	if list, _ := e.c.ListAgreements(ctx, "gcompose/app", ""); len(list) != 0 {
		t.Errorf("a session filter is not a prefix: %+v", list)
	}
	if list, _ := e.c.ListAgreements(ctx, "", yagna.AgreementApproved); len(list) != 2 {
		t.Errorf("approved agreements: %+v", list)
	}
	if a, err := e.c.GetAgreement(ctx, withSession); err != nil || a.AppSessionID != "gcompose/app-1" {
		t.Errorf("agreement %s: session %q, %v", withSession, a.AppSessionID, err)
	}
	for _, ag := range []string{withSession, plain} {
		if err := e.c.TerminateAgreement(ctx, ag, nil); err != nil {
			t.Fatal(err)
		}
	}

	timeout := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(123456789)
	a, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}, Timeout: &timeout})
	if err != nil || a.Timeout == nil || !a.Timeout.Equal(timeout) {
		t.Fatalf("allocation with timeout %s: %+v, %v", timeout.Format(time.RFC3339Nano), a.Timeout, err)
	}
	forever, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}})
	if err != nil || forever.Timeout == nil || forever.Timeout.Before(time.Now().AddDate(9, 11, 0)) {
		t.Fatalf("allocation without a timeout: %+v, %v", forever.Timeout, err)
	}
	past := time.Now().Add(-time.Minute)
	if _, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}, Timeout: &past}); !yagna.IsProblem(err, "timeout-passed") {
		t.Errorf("allocation with a past timeout: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Released: 404, as yagna answers a released allocation (AllocationDao::get filters them out).
		_, err := e.c.GetAllocation(ctx, a.AllocationID)
		if yagna.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocation still there 8 s after its timeout: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := e.c.GetAllocation(ctx, forever.AllocationID); err != nil {
		t.Errorf("the ten-year allocation: %v", err)
	}
}
