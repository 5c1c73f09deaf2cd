package devnet_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// deployed rents a provider and brings an activity to Ready.
func (e *env) deployed(ctx context.Context) (negotiated, string) {
	e.t.Helper()
	neg := e.rent(ctx, taskPackage(testHash))
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		e.t.Fatal(err)
	}
	res := e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}}, yagna.ExeScriptCommand{Start: &yagna.StartCommand{}})
	if len(res) != 2 || res[1].Result != yagna.ResultOk {
		e.t.Fatalf("deploy and start: %+v", res)
	}
	return neg, act.ActivityID
}

func (e *env) setFaults(f map[string]any) {
	e.t.Helper()
	if status, body := e.raw("PUT", devnet.AdminPrefix+"/faults", testKey, f); status != http.StatusOK {
		e.t.Fatalf("PUT faults %v: %d %s", f, status, body)
	}
}

func (e *env) setOffline(provider string, status int) {
	e.t.Helper()
	if st, body := e.raw("PUT", devnet.AdminPrefix+"/providers/"+provider, testKey, map[string]any{"offline": status}); st != http.StatusOK {
		e.t.Fatalf("PUT provider %s offline %d: %d %s", provider, status, st, body)
	}
}

// TestExecPollErrors: the execPollErrors knob answers the next result polls with a GSB 500, a 504 and a
// 408 (each marked beyond the spec where the spec lists no such status), then the results come.
func TestExecPollErrors(t *testing.T) {
	e := start(t, devnet.Config{})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 2*time.Minute)
	_, act := e.deployed(ctx)

	if status, body := e.raw("PUT", devnet.AdminPrefix+"/faults", testKey, map[string]any{"execPollErrors": []int{503}}); status != http.StatusBadRequest {
		t.Fatalf("execPollErrors [503]: %d %s, want 400", status, body)
	}
	e.setFaults(map[string]any{"execPollErrors": []int{500, 504, 408}})
	batch, err := e.c.ExecCommands(ctx, act, run("/bin/sh", "-c", "echo hi"))
	if err != nil {
		t.Fatal(err)
	}
	path := "/activity-api/v1/activity/" + act + "/exec/" + batch + "?timeout=2"
	for _, want := range []struct {
		status int
		msg    string
	}{{500, "GSB error"}, {504, "Gateway Timeout"}, {408, "Timeout"}} {
		status, body := e.raw("GET", path, testKey, nil)
		var em struct{ Message string }
		if status != want.status || json.Unmarshal(body, &em) != nil || !strings.Contains(em.Message, want.msg) {
			t.Fatalf("poll: %d %s, want %d %q", status, body, want.status, want.msg)
		}
	}
	status, body := e.raw("GET", path, testKey, nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"stdout":"hi\n"`) {
		t.Fatalf("poll after the faults: %d %s", status, body)
	}
	// The client rides them out.
	e.setFaults(map[string]any{"execPollErrors": []int{500, 504, 500}})
	if res := e.exec(ctx, act, run("/bin/sh", "-c", "echo again")); len(res) != 1 || res[0].Stdout != "again\n" {
		t.Fatalf("WaitBatch through the faults: %+v", res)
	}
}

// TestOfflineProvider: a provider cut off answers 500 (GSB) or 408 for every call yagna forwards to it,
// its agreement cannot be terminated and stays Approved, it issues no debit notes; back online after
// more than the accept timeout it ends the agreement itself (RequestorUnreachable).
func TestOfflineProvider(t *testing.T) {
	e := start(t, devnet.Config{
		DebitNoteInterval:      devnet.Duration{Duration: 300 * time.Millisecond},
		DebitNoteAcceptTimeout: devnet.Duration{Duration: 5 * time.Second}, // the least a provider takes
		Providers:              []devnet.ProviderConfig{{Name: "p", Count: 2}},
	})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 2*time.Minute)
	neg, act := e.deployed(ctx)

	e.setOffline(neg.providerID, 500)
	_, err := e.c.GetActivityState(ctx, act)
	if yagna.StatusOf(err) != 500 || !yagna.IsGSBError(err) {
		t.Fatalf("state of an activity on an offline provider: %v, want a 500 GSB error", err)
	}
	if err := e.c.DestroyActivity(ctx, act); yagna.StatusOf(err) != 500 {
		t.Fatalf("destroy: %v, want 500", err)
	}
	if _, err := e.c.ExecCommands(ctx, act, run("/bin/true")); yagna.StatusOf(err) != 500 {
		t.Fatalf("exec: %v, want 500", err)
	}
	if err := e.c.TerminateAgreement(ctx, neg.agreement, nil); yagna.StatusOf(err) != 500 {
		t.Fatalf("terminate: %v, want 500", err)
	}
	if a, err := e.c.GetAgreement(ctx, neg.agreement); err != nil || a.State != yagna.AgreementApproved {
		t.Fatalf("agreement after a failed terminate: %+v, %v", a.State, err)
	}
	e.setOffline("p-1", 408) // by name
	e.setOffline(neg.providerID, 408)
	if _, err := e.c.GetActivityState(ctx, act); yagna.StatusOf(err) != 408 {
		t.Fatalf("state with the provider not answering: %v, want 408", err)
	}
	// Cut off for longer than the accept timeout: no note arrives meanwhile, and the agreement lives on.
	notes, _ := e.c.DebitNotes(ctx, time.Time{}, 0)
	time.Sleep(6 * time.Second)
	if later, _ := e.c.DebitNotes(ctx, time.Time{}, 0); len(later) != len(notes) {
		t.Errorf("debit notes issued while offline: %d → %d", len(notes), len(later))
	}
	e.setOffline(neg.providerID, 0)
	a, err := e.c.GetAgreement(ctx, neg.agreement)
	if err != nil || a.State != yagna.AgreementTerminated {
		t.Fatalf("agreement after the provider came back: %s, %v; want Terminated", a.State, err)
	}
	evs, err := e.c.AgreementEvents(ctx, 0, time.Time{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		if ev.AgreementID == neg.agreement && ev.EventType == "AgreementTerminatedEvent" && ev.Reason != nil && ev.Reason.Extra["golem.provider.code"] == "RequestorUnreachable" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no AgreementTerminatedEvent with code RequestorUnreachable: %+v", evs)
	}
	if st := e.state(ctx, act); st != yagna.StateTerminated {
		t.Fatalf("activity after the agreement ended: %s", st)
	}
}

// TestSlowAndFailingDeploys: imageDownload makes deploy take its time (the batch stays unfinished and
// polls answer partial results meanwhile); deployErrors fails the next deploy as a provider that cannot
// fetch the image does.
func TestSlowAndFailingDeploys(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 2}}})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 2*time.Minute)

	e.setFaults(map[string]any{"imageDownload": "2s", "deployErrors": 1})
	neg := e.rent(ctx, taskPackage(testHash))
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}})
	if len(res) != 1 || res[0].Result != yagna.ResultError || !strings.Contains(res[0].Message, "image download failed") || time.Since(start) < 2*time.Second {
		t.Fatalf("first deploy after %s: %+v, want an image download error after 2 s", time.Since(start), res)
	}
	neg2 := e.rent(ctx, taskPackage(testHash))
	act2, err := e.c.CreateActivity(ctx, neg2.agreement)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := e.c.ExecCommands(ctx, act2.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}})
	if err != nil {
		t.Fatal(err)
	}
	if partial, err := e.c.ExecBatchResults(ctx, act2.ActivityID, batch, 500*time.Millisecond, -1); err != nil || len(partial) != 0 {
		t.Fatalf("results during the download: %+v, %v; want none yet", partial, err)
	}
	res, err = e.c.WaitBatch(ctx, act2.ActivityID, batch, 5*time.Second)
	if err != nil || len(res) != 1 || res[0].Result != yagna.ResultOk {
		t.Fatalf("second deploy: %+v, %v", res, err)
	}
	if st := e.state(ctx, act2.ActivityID); st != yagna.StateDeployed {
		t.Fatalf("state after deploy: %s", st)
	}
}

// TestPaymentFaults: a failed accept leaves the note unaccepted (and accepting a later note does not
// accept it: the provider ends the agreement over it); a released allocation answers 400 to an accept; an invoice
// comes invoiceDelay after the agreement ends; approvalDelay keeps a confirmed agreement Pending, and
// cancelling it frees the provider.
func TestPaymentFaults(t *testing.T) {
	e := start(t, devnet.Config{
		DebitNoteInterval:      devnet.Duration{Duration: 300 * time.Millisecond},
		DebitNoteAcceptTimeout: devnet.Duration{Duration: 5 * time.Second}, // the least a provider takes
		Providers:              []devnet.ProviderConfig{{Name: "p", Count: 1}},
	})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 2*time.Minute)
	neg, _ := e.deployed(ctx)
	e.setFaults(map[string]any{"acceptErrors": []int{500}, "invoiceDelay": "1s"})

	var notes []yagna.DebitNote
	for len(notes) < 2 {
		all, err := e.c.DebitNotes(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		notes = all
		time.Sleep(100 * time.Millisecond)
	}
	accept := func(n yagna.DebitNote) error {
		return e.c.AcceptDebitNote(ctx, n.DebitNoteID, yagna.DebitNoteAcceptance{TotalAmountAccepted: n.TotalAmountDue, AllocationID: neg.alloc.AllocationID}, time.Second)
	}
	if err := accept(notes[0]); yagna.StatusOf(err) != 500 {
		t.Fatalf("accept with acceptErrors [500]: %v, want 500", err)
	}
	// An accept the provider did not acknowledge in time is yagna's 504 "Timeout accepting Debit Note
	// on remote Node." (core/payment/src/api/debit_notes.rs accept_debit_note), which the client repeats
	// (the old knob answered 408, which yagna never does there).
	if st, body := e.raw("PUT", devnet.AdminPrefix+"/faults", testKey, map[string]any{"acceptErrors": []int{408}}); st == http.StatusOK {
		t.Errorf("acceptErrors [408] taken (%s): yagna answers that timeout 504", body)
	}
	e.setFaults(map[string]any{"acceptErrors": []int{504, 504}, "invoiceDelay": "1s"}) // a PUT sets every knob
	st, body := e.raw("POST", "/payment-api/v1/debitNotes/"+notes[1].DebitNoteID+"/accept?timeout=1", testKey,
		map[string]any{"totalAmountAccepted": notes[1].TotalAmountDue, "allocationId": neg.alloc.AllocationID})
	if st != http.StatusGatewayTimeout || !strings.Contains(string(body), "Timeout accepting Debit Note on remote Node.") {
		t.Fatalf("accept with acceptErrors [504]: %d %s, want 504 Timeout accepting Debit Note on remote Node.", st, body)
	}
	if err := accept(notes[1]); err != nil {
		t.Fatalf("accept of the second note through a 504 (the client repeats it): %v", err)
	}
	if n, err := e.c.GetDebitNote(ctx, notes[0].DebitNoteID); err != nil || n.Status != yagna.StatusReceived {
		t.Fatalf("first note after the second was accepted: %s, %v; want still RECEIVED", n.Status, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		a, err := e.c.GetAgreement(ctx, neg.agreement)
		if err != nil {
			t.Fatal(err)
		}
		if a.State == yagna.AgreementTerminated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agreement still %s 15 s after its first note went unaccepted", a.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ended := time.Now()
	if invs, _ := e.c.Invoices(ctx, time.Time{}, 0); len(invs) != 0 {
		t.Fatalf("invoice before invoiceDelay: %+v", invs)
	}
	var inv yagna.Invoice
	for inv.InvoiceID == "" {
		invs, err := e.c.Invoices(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(invs) > 0 {
			inv = invs[0]
		} else if time.Since(ended) > 5*time.Second {
			t.Fatal("no invoice 5 s after the agreement ended (invoiceDelay 1s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := time.Since(ended); d < 800*time.Millisecond {
		t.Errorf("invoice %s after the end, want about 1 s", d)
	}
	if sm := e.summary(); sm.UnpaidInvoices != 1 {
		t.Errorf("summary %+v, want one unpaid invoice", sm)
	}
	if err := e.c.ReleaseAllocation(ctx, neg.alloc.AllocationID); err != nil {
		t.Fatal(err)
	}
	err := e.c.AcceptInvoice(ctx, inv.InvoiceID, yagna.Acceptance{TotalAmountAccepted: inv.Amount, AllocationID: neg.alloc.AllocationID}, time.Second)
	// 400 "Allocation … not found": AllocationDao::get filters released ones out, so the accept's
	// AllocationStatus::Gone → 410 is never reached (core/payment/src/dao/allocation.rs, api/invoices.rs).
	if yagna.StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "Allocation "+neg.alloc.AllocationID+" not found") {
		t.Fatalf("accepting against a released allocation: %v, want 400 Allocation %s not found", err, neg.alloc.AllocationID)
	}

	e.setFaults(map[string]any{"approvalDelay": "1h"})
	sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: "()"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.c.UnsubscribeDemand(context.Background(), sub)
	agreement := e.agreeOn(ctx, sub)
	if err := e.c.WaitForApproval(ctx, agreement, 300*time.Millisecond); !yagna.IsTimeout(err) {
		t.Fatalf("wait with approvalDelay: %v, want 408", err)
	}
	if sm := e.summary(); sm.PendingAgreements != 1 || sm.Agreements != 0 {
		t.Fatalf("summary %+v, want one pending agreement", sm)
	}
	if err := e.c.TerminateAgreement(ctx, agreement, nil); !yagna.IsGone(err) {
		t.Fatalf("terminating a Pending agreement: %v, want 410 (core/market/src/rest_api/error.rs)", err)
	}
	if err := e.c.CancelAgreement(ctx, agreement, nil); err != nil {
		t.Fatalf("cancel a Pending agreement: %v", err)
	}
	if sm := e.summary(); sm.PendingAgreements != 0 {
		t.Fatalf("summary after cancel %+v", sm)
	}
	// The provider is free again: the live demand gets its offer.
	if evs, err := e.c.CollectOffers(ctx, sub, time.Second, 10); err != nil || len(evs) == 0 {
		t.Fatalf("after the cancel: %+v, %v; want a new proposal", evs, err)
	}
}

// agreeOn negotiates with the first proposal of a demand and confirms the agreement.
func (e *env) agreeOn(ctx context.Context, sub string) string {
	e.t.Helper()
	evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
	if err != nil || len(evs) == 0 {
		e.t.Fatalf("CollectOffers: %+v, %v", evs, err)
	}
	d := yagna.DemandOfferBase{Properties: validDemand(map[string]any{"golem.node.debug.subnet": "public"}), Constraints: "()"}
	// The deadline the provider proposes is the longest it takes.
	d.Properties["golem.com.payment.debit-notes.accept-timeout?"] = evs[0].Proposal.Properties["golem.com.payment.debit-notes.accept-timeout?"]
	counter, err := e.c.CounterProposal(ctx, sub, evs[0].Proposal.ProposalID, d)
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Proposal != nil && ev.Proposal.PrevProposalID == counter {
				ag, err := e.c.CreateAgreement(ctx, ev.Proposal.ProposalID, time.Now().Add(time.Hour))
				if err != nil {
					e.t.Fatal(err)
				}
				if err := e.c.ConfirmAgreement(ctx, ag, ""); err != nil {
					e.t.Fatal(err)
				}
				return ag
			}
		}
	}
}

func (e *env) summary() devnet.Summary {
	e.t.Helper()
	status, body := e.raw("GET", devnet.AdminPrefix+"/summary", testKey, nil)
	var sm devnet.Summary
	if status != http.StatusOK || json.Unmarshal(body, &sm) != nil {
		e.t.Fatalf("summary: %d %s", status, body)
	}
	return sm
}
