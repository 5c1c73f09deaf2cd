package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
)

// agreementStates counts the requestor's agreements by state.
func (e *env) agreementStates(ctx context.Context) map[yagna.AgreementState]int {
	e.t.Helper()
	list, err := e.yc.ListAgreements(ctx, "", "")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[yagna.AgreementState]int{}
	for _, a := range list {
		ag, err := e.yc.GetAgreement(ctx, a.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		out[ag.State]++
	}
	return out
}

// TestConcurrentCreatesRentDistinctProviders: four services created at once
// by one adapter, on a devnet of five providers of one agreement each at one
// price. Every create sees the same offers and ranks them alike; each used
// to counter and sign the same cheapest provider, which approved one
// agreement and rejected the others (their creates then blamed it and
// started over). The adapter's claims spread them: each create signs a
// provider no other one negotiates with, no agreement is rejected, and none
// of them lists a failed provider.
func TestConcurrentCreatesRentDistinctProviders(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "p", Count: 5, Cores: 4, MemGib: 8, StorageGib: 64, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.0001, 0.0002, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	// One adapter for all four, as one adapter server serves a deploy.
	adapter := service.AdapterWith(fast)
	var svcs []*resource
	for i := range 4 {
		name := fmt.Sprintf("s%d", i)
		cfg := serviceConfig(name, dbHash, alloc, nil, "")
		cfg["payload"].(map[string]any)["params"].(map[string]any)["offer_window"] = "1s"
		r := &resource{e: e, adapter: adapter, name: "services." + name, config: cfg}
		e.cleanupService(r)
		svcs = append(svcs, r)
	}
	outs := make([]outcome, len(svcs))
	var wg sync.WaitGroup
	for i, r := range svcs {
		wg.Go(func() { outs[i] = r.action(ctx, "create") })
	}
	wg.Wait()
	providers := map[string]string{}
	for i, r := range svcs {
		if outs[i].exit != 0 {
			t.Fatalf("create of %s:\n%s", r.name, outs[i])
		}
		p := r.id("provider_id")
		if other, ok := providers[p]; ok {
			t.Errorf("%s and %s both rent provider %s", other, r.name, p)
		}
		providers[p] = r.name
		if f, ok := r.persisted.Identity["failed_providers"].([]any); ok && len(f) > 0 {
			t.Errorf("%s lists failed providers %v (%v):\n%s", r.name, f, r.persisted.Identity["failed_reasons"], outs[i])
		}
	}
	states := e.agreementStates(ctx)
	t.Logf("agreements by state: %v", states)
	if states[yagna.AgreementRejected] != 0 || states[yagna.AgreementApproved] != len(svcs) {
		for i, r := range svcs {
			t.Logf("%s:\n%s", r.name, outs[i])
		}
		t.Errorf("agreements by state %v: want %d approved and none rejected", states, len(svcs))
	}
}

// TestRejectedAgreementIsNotBlamed: every provider rejects the agreements
// confirmed to it (the devnet's rejectAgreements, as a provider of one
// agreement rejects a second: agent/provider/src/market/negotiator/builtin/
// max_agreements.rs). A rejection is the provider's choice, not a failure:
// the create tries the next provider, fails when none is left within its
// negotiation, and lists no provider as failed; once the providers take
// agreements again, the next create rents the cheapest one, the one that
// rejected it first.
func TestRejectedAgreementIsNotBlamed(t *testing.T) {
	parallel(t)
	caps := []string{"vpn", "inet"}
	e := startDevnet(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "cheap", Capabilities: caps, Coeffs: []float64{0.00005, 0.0001, 0}},
		{Name: "dear", Capabilities: caps, Coeffs: []float64{0.0001, 0.0002, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	cfg := serviceConfig("db", dbHash, alloc, nil, "")
	cfg["payload"].(map[string]any)["params"].(map[string]any)["offer_window"] = "1s"
	short := fast
	short.Negotiation = 8 * time.Second
	db := e.service("db", short, cfg)
	e.cleanupService(db)

	e.faults(ctx, map[string]any{"rejectAgreements": true})
	o := db.action(ctx, "create")
	e.faults(ctx, map[string]any{})
	t.Logf("create while every provider rejects agreements:\n%s", o)
	if o.exit == 0 {
		t.Fatalf("the create succeeded though every provider rejects agreements:\n%s", o)
	}
	if !strings.Contains(o.String(), "rejected agreement") {
		t.Errorf("the create does not say the providers rejected its agreements:\n%s", o)
	}
	if f, ok := db.persisted.Identity["failed_providers"].([]any); ok && len(f) > 0 {
		t.Errorf("the rejecting providers are blamed: failed_providers %v (%v)", f, db.persisted.Identity["failed_reasons"])
	}
	if n := e.agreementStates(ctx)[yagna.AgreementRejected]; n != 2 {
		t.Errorf("%d agreements rejected, want 2 (one per provider, each tried once)", n)
	}
	// The state call sees the rental that never was: nothing to blame.
	if st := db.state(ctx); st.exit != 0 {
		t.Fatalf("state after the failed create:\n%s", st)
	}

	o = db.mustAct(ctx, "create")
	if !strings.Contains(o.String(), "agreed with cheap") {
		t.Errorf("the create after the rejections did not rent the cheap provider:\n%s", o)
	}
	if f, ok := db.persisted.Identity["failed_providers"].([]any); ok && len(f) > 0 {
		t.Errorf("failed_providers %v after a create that only met rejections", f)
	}
}

// TestParallelJoinsWithoutPlannedAddresses: four services of one adapter
// on a VPN whose config plans no addresses (a hand-written config) join at
// once, each on a provider of its own, with a network's latency keeping them
// in step. Each picks a free address no other create of the adapter picked
// and has not added yet (claims.go), and the node map, read after each add,
// shows each at its own address.
func TestParallelJoinsWithoutPlannedAddresses(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.keeper(alloc)
	vpn := &resource{e: e, adapter: network.Adapter(), name: "networks.default", config: map[string]any{"name": "default", "ip": "10.78.0.1/24"}}
	vpn.mustAct(ctx, "create")
	t.Cleanup(func() { _ = vpn.call(context.Background(), protocol.Absent, "action", "delete") })
	adapter := service.AdapterWith(fast)
	var svcs []*resource
	for i, name := range []string{"small-0", "small-1", "large-0", "large-1"} {
		cfg := serviceConfig(fmt.Sprintf("s%d", i), dbHash, alloc, vpn, "")
		cfg["payload"].(map[string]any)["constraints"] = []any{"golem.node.id.name=" + name}
		r := &resource{e: e, adapter: adapter, name: fmt.Sprintf("services.s%d", i), config: cfg}
		e.cleanupService(r)
		svcs = append(svcs, r)
	}
	e.faults(ctx, map[string]any{"slow": "150ms"})
	outs := make([]outcome, len(svcs))
	var wg sync.WaitGroup
	for i, r := range svcs {
		wg.Go(func() { outs[i] = r.action(ctx, "create") })
	}
	wg.Wait()
	e.faults(ctx, map[string]any{})
	nodes, err := e.yc.Nodes(ctx, vpn.id("network_id"))
	if err != nil {
		t.Fatal(err)
	}
	holder := map[string]string{}
	for _, n := range nodes {
		holder[yagna.BareIP(n.IP)] = n.ID
	}
	seen := map[string]string{}
	for i, r := range svcs {
		if outs[i].exit != 0 {
			t.Errorf("%s create: %s", r.name, outs[i])
			continue
		}
		ip := r.id("ip")
		if other, ok := seen[ip]; ok {
			t.Errorf("%s and %s both at %s", other, r.name, ip)
		}
		seen[ip] = r.name
		if holder[ip] != r.id("provider_id") {
			t.Errorf("%s at %s, which the node map gives %q, not its provider %s", r.name, ip, holder[ip], r.id("provider_id"))
		}
	}
	t.Logf("addresses: %v", seen)
}
