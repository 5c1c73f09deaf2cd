package devnet_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestTerminateReasonNamesTheTerminator: GET /agreements/{id}/terminate/reason
// answers as yagna's does (core/market/src/rest_api/common.rs
// get_agreement_terminate_reason): 400 "not terminated yet" before, then the
// AgreementTerminatedEvent, its terminator "Requestor" or "Provider" as
// ya-client serializes AgreementTerminator, with the reason exactly as the
// terminating party gave it. gcompose blames a provider by it.
func TestTerminateReasonNamesTheTerminator(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 2}}})
	ctx := ctxT(t, time.Minute)

	ours := e.rent(ctx, taskPackage(testHash))
	_, err := e.c.TerminateReason(ctx, ours.agreement)
	if yagna.StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "not terminated yet") {
		t.Fatalf("terminate reason of an approved agreement: %v, want 400 not terminated yet", err)
	}
	// Only GET is served, as by yagna.
	if st, _ := e.raw("POST", "/market-api/v1/agreements/"+ours.agreement+"/terminate/reason", testKey, nil); st == http.StatusOK {
		t.Fatalf("POST terminate/reason answered 200; yagna serves GET only")
	}
	given := &yagna.Reason{Message: "gcompose: provider failed", Extra: map[string]any{"golem.requestor.code": "Success", "gcompose.provider_fault": "image download failed"}}
	if err := e.c.TerminateAgreement(ctx, ours.agreement, given); err != nil {
		t.Fatal(err)
	}
	ev, err := e.c.TerminateReason(ctx, ours.agreement)
	if err != nil || ev.EventType != yagna.EventAgreementTerminated || ev.AgreementID != ours.agreement ||
		ev.Terminator != yagna.TerminatorRequestor || ev.Signature == "" || ev.Reason == nil ||
		ev.Reason.Message != given.Message || ev.Reason.Extra["gcompose.provider_fault"] != "image download failed" {
		t.Fatalf("terminate reason after the requestor's terminate: %+v %v", ev, err)
	}

	theirs := e.rent(ctx, taskPackage(testHash))
	if st, _ := e.killProvider(theirs.providerID, nil); st != http.StatusOK {
		t.Fatalf("kill: %d", st)
	}
	ev, err = e.c.TerminateReason(ctx, theirs.agreement)
	if err != nil || ev.Terminator != yagna.TerminatorProvider || ev.Reason == nil || ev.Reason.Extra["golem.provider.code"] != "Shutdown" {
		t.Fatalf("terminate reason after the provider's shutdown: %+v %v", ev, err)
	}
}
