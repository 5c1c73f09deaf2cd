package devnet_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

func (e *env) killProvider(provider string, body any) (int, devnet.KillResult) {
	e.t.Helper()
	status, raw := e.raw("POST", devnet.AdminPrefix+"/providers/"+provider+"/kill", testKey, body)
	var res devnet.KillResult
	if status == http.StatusOK {
		if err := json.Unmarshal(raw, &res); err != nil {
			e.t.Fatalf("kill answer %s: %v", raw, err)
		}
	}
	return status, res
}

// containersOf counts the running containers of an activity (the devnet labels them with it).
func (e *env) containersOf(ctx context.Context, activity string) int {
	e.t.Helper()
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "gcompose.devnet.activity="+activity))})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(cs)
}

// TestKillProviderShutdown: a provider shut down breaks its agreement (terminated by the Provider, code
// Shutdown), its exe-unit dies, it invoices what ran, withdraws its offer, and answers nothing after.
func TestKillProviderShutdown(t *testing.T) {
	e := start(t, devnet.Config{
		DebitNoteInterval: devnet.Duration{Duration: 300 * time.Millisecond},
		// The provider invoices at its shutdown, not this much later.
		Faults:    devnet.Faults{InvoiceDelay: devnet.Duration{Duration: time.Hour}},
		Providers: []devnet.ProviderConfig{{Name: "p", Count: 1}},
	})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 2*time.Minute)
	neg, act := e.deployed(ctx)
	if n := e.containersOf(ctx, act); n != 1 {
		t.Fatalf("%d running containers for the activity before the kill", n)
	}

	if st, _ := e.killProvider("p", map[string]any{"mode": "nap"}); st != http.StatusBadRequest {
		t.Fatalf("kill with an unknown mode: %d, want 400", st)
	}
	if st, _ := e.killProvider("nobody", nil); st != http.StatusNotFound {
		t.Fatalf("kill of an unknown provider: %d, want 404", st)
	}
	st, res := e.killProvider("p", nil) // by name, default mode
	if st != http.StatusOK || res.Mode != devnet.KillShutdown || res.ID != neg.providerID ||
		len(res.Agreements) != 1 || res.Agreements[0] != neg.agreement || len(res.Activities) != 1 || res.Activities[0] != act {
		t.Fatalf("kill: %d %+v", st, res)
	}
	if st, _ := e.killProvider(neg.providerID, nil); st != http.StatusConflict {
		t.Fatalf("second kill: %d, want 409", st)
	}

	a, err := e.c.GetAgreement(ctx, neg.agreement)
	if err != nil || a.State != yagna.AgreementTerminated {
		t.Fatalf("agreement after the shutdown: %s, %v", a.State, err)
	}
	evs, err := e.c.AgreementEvents(ctx, 0, time.Time{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		if ev.AgreementID == neg.agreement && ev.EventType == "AgreementTerminatedEvent" {
			found = ev.Terminator == "Provider" && ev.Reason != nil && ev.Reason.Message == "Shutting down Provider" &&
				ev.Reason.Extra["golem.provider.code"] == "Shutdown"
			if !found {
				t.Fatalf("termination event: %+v", ev)
			}
		}
	}
	if !found {
		t.Fatalf("no AgreementTerminatedEvent for %s: %+v", neg.agreement, evs)
	}
	if n := e.containersOf(ctx, act); n != 0 {
		t.Fatalf("%d containers of the activity still run after the shutdown", n)
	}
	invs, err := e.c.Invoices(ctx, time.Time{}, 0)
	if err != nil || len(invs) != 1 || invs[0].AgreementID != neg.agreement {
		t.Fatalf("invoices after the shutdown (invoiceDelay 1h): %+v, %v; want the agreement's", invs, err)
	}
	// Gone: no debit note, no proposal to a new demand.
	notes, _ := e.c.DebitNotes(ctx, time.Time{}, 0)
	time.Sleep(time.Second)
	if later, _ := e.c.DebitNotes(ctx, time.Time{}, 0); len(later) != len(notes) {
		t.Errorf("debit notes after the shutdown: %d → %d", len(notes), len(later))
	}
	sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: "()"})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := e.c.CollectOffers(ctx, sub, 500*time.Millisecond, 10); err != nil || len(evs) != 0 {
		t.Errorf("a killed provider proposed: %+v, %v", evs, err)
	}
	if s := e.summaryOf(ctx); s.Agreements != 0 || s.Activities != 0 {
		t.Errorf("summary after the shutdown: %+v", s)
	}
	// Started again, it offers again.
	e.setOffline("p", 0)
	if evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10); err != nil || len(evs) != 1 {
		t.Errorf("the provider started again does not propose: %+v, %v", evs, err)
	}
}

// TestKillProviderCrash: a provider that vanishes takes its exe-unit with it and terminates nothing; the
// requestor's calls for it fail as for an unreachable node.
func TestKillProviderCrash(t *testing.T) {
	e := start(t, devnet.Config{
		DebitNoteInterval: devnet.Duration{Duration: 300 * time.Millisecond},
		Providers:         []devnet.ProviderConfig{{Name: "p", Count: 1}},
	})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 2*time.Minute)
	neg, act := e.deployed(ctx)

	st, res := e.killProvider(neg.providerID, map[string]any{"mode": "crash"})
	if st != http.StatusOK || res.Mode != devnet.KillCrash || len(res.Agreements) != 1 || len(res.Activities) != 1 {
		t.Fatalf("kill: %d %+v", st, res)
	}
	if n := e.containersOf(ctx, act); n != 0 {
		t.Fatalf("%d containers of the activity still run after the crash", n)
	}
	if a, err := e.c.GetAgreement(ctx, neg.agreement); err != nil || a.State != yagna.AgreementApproved {
		t.Fatalf("agreement after the crash: %s, %v; want Approved (nobody terminated it)", a.State, err)
	}
	if _, err := e.c.GetActivityState(ctx, act); yagna.StatusOf(err) != 500 || !yagna.IsGSBError(err) {
		t.Fatalf("state of the crashed provider's activity: %v, want a 500 GSB error", err)
	}
	if err := e.c.TerminateAgreement(ctx, neg.agreement, nil); yagna.StatusOf(err) != 500 {
		t.Fatalf("terminate: %v, want 500", err)
	}
	if s := e.summaryOf(ctx); s.Agreements != 1 {
		t.Errorf("summary after the crash: %+v (the agreement lives on in yagna)", s)
	}
}

func (e *env) summaryOf(ctx context.Context) devnet.Summary {
	e.t.Helper()
	st, raw := e.raw("GET", devnet.AdminPrefix+"/summary", testKey, nil)
	var s devnet.Summary
	if st != http.StatusOK || json.Unmarshal(raw, &s) != nil {
		e.t.Fatalf("summary: %d %s", st, raw)
	}
	return s
}
