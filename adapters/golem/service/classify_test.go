package service

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestLocalErrorsAreNotProvidersGone: a 500 that yagna answers for its own
// failure (a database error: core/activity/src/error.rs Error::Dao,
// core/market/src/negotiation/error.rs Internal, Save, Get) is the local
// node's error, not a provider yagna cannot reach; a GSB error, a protocol
// error towards the provider, a 408 or a 504 are the provider's.
func TestLocalErrorsAreNotProvidersGone(t *testing.T) {
	for _, c := range []struct {
		status      int
		msg         string
		unreachable bool
	}{
		{500, "DAO error: Database connection error: timed out waiting for connection", false},
		{500, "Internal error: db pool exhausted", false},
		{500, "Failed to get Agreement [abc]. Error: DB error", false},
		{500, "GSB error: GSB failure: Bad request: endpoint address not found", true},
		{500, "Protocol error while terminating: GSB error: timeout", true},
		{408, "Timeout", true},
		{504, "Gateway Timeout", true},
		{404, "not found", false},
	} {
		err := fmt.Errorf("reading activity a1 state: %w", &yagna.APIError{Status: c.status, Message: c.msg, Method: http.MethodGet, Path: "/activity-api/v1/activity/a1/state"})
		if got := providerUnreachable(err); got != c.unreachable {
			t.Errorf("%d %q: providerUnreachable = %v, want %v", c.status, c.msg, got, c.unreachable)
		}
		var pf providerFault
		if local := localError(err); local && errors.As(faultOf(err), &pf) {
			t.Errorf("%d %q: a local error marked as the provider's fault", c.status, c.msg)
		}
	}
}

// TestFailureSignature: the same failure on two providers, told apart only
// by ids, has one signature; another failure another.
func TestFailureSignature(t *testing.T) {
	a := failureSignature(`command 1: start: starting container: Error response from daemon: failed to create task for container 3f2a9c01d2e4: exec: "/no/such/binary": stat /no/such/binary: no such file or directory`)
	b := failureSignature(`command 1: start: starting container: Error response from daemon: failed to create task for container 77ab01cd99ef: exec: "/no/such/binary": stat /no/such/binary: no such file or directory`)
	other := failureSignature(`command 0: deploy: image download failed on p-1: hash:sha3:abc (devnet fault knob deployErrors)`)
	if a != b || a == other {
		t.Errorf("signatures:\n%s\n%s\n%s", a, b, other)
	}
}

// TestRequestorCodes: gcompose's terminations say why (golem.requestor.code).
func TestRequestorCodes(t *testing.T) {
	for why, code := range map[string]string{
		whyInterrupted: "Cancelled", whyUnapproved: "Cancelled", whyProvider: "ProviderFailure",
		whyPayload: "PayloadFailure", whyCreateFail: "Failure", "gcompose: service db removed": "Success",
	} {
		if got := requestorCode(why); got != code {
			t.Errorf("requestorCode(%q) = %q, want %q", why, got, code)
		}
	}
}
