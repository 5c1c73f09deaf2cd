package service

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestBlame: a provider is avoided for ever only for a failure on its side;
// when gcompose's side ended the rental (a create cut short by Ctrl-C or a
// kill, whose adapter ends what it made) the cheap provider stays on offer.
func TestBlame(t *testing.T) {
	agreement := func(st yagna.AgreementState) *yagna.Agreement { return &yagna.Agreement{AgreementID: "a1", State: st} }
	ended := func(by string, reason *yagna.Reason) *yagna.AgreementOperationEvent {
		return &yagna.AgreementOperationEvent{EventType: yagna.EventAgreementTerminated, AgreementID: "a1", Terminator: by, Signature: "sig", Reason: reason}
	}
	done := Identity{AgreementID: "a1", ActivityID: "act1", ProviderID: "p1"}
	creating := done
	creating.InitPending = true
	for _, c := range []struct {
		name   string
		id     Identity
		o      observed
		blamed bool
		says   string
	}{
		{"requestor cancelled (create cut short before approval)", creating,
			observed{agreement: agreement(yagna.AgreementCancelled)}, false, "cancelled by the requestor"},
		{"requestor terminated with our interrupt reason", creating,
			observed{agreement: agreement(yagna.AgreementTerminated), activity: yagna.StateTerminated,
				ended: ended(yagna.TerminatorRequestor, yagna.TerminationReason(whyInterrupted))}, false, "terminated by the requestor: " + whyInterrupted},
		{"requestor terminated by someone else (yagna CLI), rental finished", done,
			observed{agreement: agreement(yagna.AgreementTerminated), activity: yagna.StateTerminated,
				ended: ended(yagna.TerminatorRequestor, &yagna.Reason{Message: "by hand"})}, false, "terminated by the requestor: by hand"},
		{"requestor terminated for the provider's fault", creating,
			observed{agreement: agreement(yagna.AgreementTerminated),
				ended: ended(yagna.TerminatorRequestor, &yagna.Reason{Message: whyProvider, Extra: map[string]any{faultKey: "image download failed"}})}, true, "p1 failed: image download failed"},
		{"provider terminated (shut down)", done,
			observed{agreement: agreement(yagna.AgreementTerminated), activity: yagna.StateTerminated,
				ended: ended(yagna.TerminatorProvider, &yagna.Reason{Message: "Shutting down Provider", Extra: map[string]any{"golem.provider.code": "Shutdown"}})}, true, "provider p1 terminated the agreement: Shutting down Provider"},
		{"provider terminated during a create cut short", creating,
			observed{agreement: agreement(yagna.AgreementTerminated),
				ended: ended(yagna.TerminatorProvider, &yagna.Reason{Message: "Failed to initialize", Extra: map[string]any{"golem.provider.code": "InitializationError"}})}, true, "provider p1 terminated"},
		{"provider terminated over unaccepted debit notes (our side)", done,
			observed{agreement: agreement(yagna.AgreementTerminated),
				ended: ended(yagna.TerminatorProvider, &yagna.Reason{Message: "Requestor isn't accepting DebitNotes in time", Extra: map[string]any{"golem.provider.code": "DebitNotesDeadline"}})}, false, "the requestor's side failed"},
		{"provider ended it at its expiration", done,
			observed{agreement: agreement(yagna.AgreementTerminated), activity: yagna.StateTerminated,
				ended: ended(yagna.TerminatorProvider, &yagna.Reason{Message: "Agreement expired @ 2026-01-02 03:04:05 UTC", Extra: map[string]any{"golem.provider.code": "Expired"}})}, false, "agreement a1 ended by the provider: Expired (Agreement expired @ 2026-01-02 03:04:05 UTC)"},
		{"provider ended it for want of an activity", creating,
			observed{agreement: agreement(yagna.AgreementTerminated),
				ended: ended(yagna.TerminatorProvider, &yagna.Reason{Message: "No activity created within 90s", Extra: map[string]any{"golem.provider.code": "NoActivity"}})}, false, "agreement a1 ended by the provider: NoActivity (No activity created within 90s)"},
		{"terminated, yagna does not say by whom", done,
			observed{agreement: agreement(yagna.AgreementTerminated), endedErr: "HTTP 400"}, false, "did not say by whom"},
		{"activity died while the agreement was ours", done,
			observed{agreement: agreement(yagna.AgreementApproved), activity: yagna.StateTerminated, actErr: "exit 137"}, true, "the activity is Terminated (exit 137)"},
		{"activity gone while the agreement was ours", done,
			observed{agreement: agreement(yagna.AgreementApproved)}, true, "the activity is gone"},
		{"activity unresponsive", creating,
			observed{agreement: agreement(yagna.AgreementApproved), activity: yagna.StateUnresponsive}, true, "Unresponsive"},
		{"activity destroyed by a create cut short before it ended the agreement", creating,
			observed{agreement: agreement(yagna.AgreementApproved), activity: yagna.StateTerminated}, false, "cut short"},
		{"activity still deploying when the create was cut short", creating,
			observed{agreement: agreement(yagna.AgreementApproved), activity: yagna.StateInitialized}, false, "cut short"},
		{"provider vanished (yagna cannot reach it)", done,
			observed{agreement: agreement(yagna.AgreementApproved), unreachable: "HTTP 500: GSB error"}, true, "provider p1 is unreachable"},
		{"provider vanished during a create cut short", creating,
			observed{agreement: agreement(yagna.AgreementApproved), unreachable: "HTTP 408: Timeout"}, true, "unreachable"},
		{"provider rejected the agreement (its choice, not a failure)", creating,
			observed{agreement: agreement(yagna.AgreementRejected)}, false, "rejected the agreement (a rejection is not a failure"},
		{"agreement expired before approval (create killed)", creating,
			observed{agreement: agreement(yagna.AgreementExpired)}, false, "never approved"},
		{"agreement gone", done, observed{}, false, "gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.o.alive() {
				t.Fatal("the case is of a rental that is alive")
			}
			v := blame(c.id, c.o)
			if v.blamed != c.blamed || !strings.Contains(v.why, c.says) {
				t.Errorf("blame = %+v, want blamed %v saying %q", v, c.blamed, c.says)
			}
			failed, why := avoided(c.id, c.o)
			if slices.Contains(failed, "p1") != c.blamed {
				t.Errorf("avoided = %v, want p1 in it: %v", failed, c.blamed)
			}
			if c.blamed && why["p1"] != v.why {
				t.Errorf("avoided says %q of p1, want %q", why["p1"], v.why)
			}
		})
	}
}

// TestAvoidedKeepsEarlierFailures: providers blamed before stay avoided with
// their reason (an identity of an older adapter has none), and a live rental
// adds no one.
func TestAvoidedKeepsEarlierFailures(t *testing.T) {
	id := Identity{AgreementID: "a1", ActivityID: "act1", ProviderID: "p3", Failed: []string{"p1", "p2"},
		FailedWhy: map[string]string{"p1": "provider p1 terminated the agreement: Shutting down Provider"}}
	alive := observed{agreement: &yagna.Agreement{State: yagna.AgreementApproved}, activity: yagna.StateReady}
	failed, why := avoided(id, alive)
	if !slices.Equal(failed, []string{"p1", "p2"}) || why["p1"] != id.FailedWhy["p1"] || why["p2"] != "failed this service before" {
		t.Errorf("avoided = %v %v", failed, why)
	}
}

// TestEstimateLeavesOutWhatTheCreateRefuses: the plan's estimate skips the
// avoided providers, saying why, and counts in the provider a rebuild frees
// when it did not offer itself, so that the estimate is what the create
// will try first.
func TestEstimateLeavesOutWhatTheCreateRefuses(t *testing.T) {
	m := Market{MaxStart: DefaultMaxStartPrice, MaxCPUHour: DefaultMaxCPUPerHour, MaxEnvHour: DefaultMaxEnvPerHour, CPULoad: 1}
	exp := DefaultExpiration
	// Per second of duration, then of CPU (the devnet's order).
	judge := func(id, name string, env float64) Offer {
		return m.Judge(offer(id, name, []any{env, 2 * env, 0.0}, nil), exp)
	}
	offers := []Offer{judge("0xsmall", "small", 0.00005), judge("0xlarge", "large", 0.0001)}
	r := rebuilt{failed: []string{"0xsmall"}, why: map[string]string{"0xsmall": "provider 0xsmall terminated the agreement: Shutting down Provider"}}
	ranked := Rank(r.apply(offers, offers[0].Subnet))
	if len(ranked) != 1 || ranked[0].Provider != "0xlarge" {
		t.Fatalf("ranked %+v, want only 0xlarge", ranked)
	}
	if !strings.Contains(r.said(), "0xsmall (provider 0xsmall terminated") {
		t.Errorf("said %q", r.said())
	}
	freed := judge("0xfreed", "freed", 0.00004)
	freed.ProposalID = ""
	r = rebuilt{freed: &freed}
	ranked = Rank(r.apply(offers, freed.Subnet))
	if len(ranked) != 3 || ranked[0].Provider != "0xfreed" {
		t.Fatalf("ranked %+v, want the freed provider first", ranked)
	}
	// Offering itself, the freed provider is counted once, at its offer.
	again := append(slices.Clone(offers), judge("0xfreed", "freed", 0.00006))
	if n := len(r.apply(again, freed.Subnet)); n != len(again) {
		t.Errorf("%d offers, want %d", n, len(again))
	}
	// A replaced rental that runs keeps its provider busy until the
	// replacement is agreed: that provider's offer (a warm book's, made
	// before it was rented) is not the replacement's.
	r = rebuilt{running: "0xsmall"}
	if ranked := Rank(r.apply(offers, offers[0].Subnet)); len(ranked) != 1 || ranked[0].Provider != "0xlarge" {
		t.Errorf("replacing a rental on 0xsmall, ranked %+v, want only 0xlarge", ranked)
	}
}

// yagna answers a wait for approval of a rejected agreement 410 with
// "Rejected" (core/market/src/rest_api/requestor.rs wait_for_approval);
// other 410s are told by the agreement's state.
func TestRejectedBy(t *testing.T) {
	state := "Expired"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"agreementId":"a1","state":%q}`, state)
	}))
	defer srv.Close()
	yc := yagna.New(srv.URL, "k")
	yc.Retries = -1
	gone := func(msg string) error { return &yagna.APIError{Status: http.StatusGone, Message: msg} }
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		err   error
		state string
		want  bool
	}{
		{"rejected", gone("Rejected"), "Expired", true},
		{"cancelled", gone("Cancelled"), "Rejected", false},
		{"expired", gone("Agreement [a1] expired."), "Expired", false},
		{"another 410, the agreement rejected", gone("?"), "Rejected", true},
		{"not approved in time", &yagna.APIError{Status: http.StatusRequestTimeout, Message: "Timeout"}, "Rejected", false},
		{"terminated", &yagna.APIError{Status: http.StatusBadRequest, Message: "Agreement [a1] terminated."}, "Terminated", false},
	} {
		state = c.state
		if got := rejectedBy(ctx, yc, "a1", fmt.Errorf("wrapped: %w", c.err)); got != c.want {
			t.Errorf("%s: rejectedBy = %v, want %v", c.name, got, c.want)
		}
	}
}
