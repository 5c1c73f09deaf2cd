package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// Which providers a service avoids. A provider is avoided for ever
// (failed_providers) only for a failure on its side: it terminated the
// agreement for a reason of its own, its activity died or stopped answering
// while the agreement was ours to keep, yagna could not reach it, it did not
// approve an agreement in time, or its exe-unit failed the deploy or start.
// A provider that rejects an agreement is not: a rejection is its choice
// (busy with another requestor's agreement, say), and it may be rented again. When gcompose's side ended the rental
// (the requestor terminated or cancelled the agreement: a removal, a create
// cut short by Ctrl-C or by gcompose being killed, which makes the adapter
// end what it made) the provider did nothing wrong, and shunning it would
// make every later deploy rent a dearer one.

// faultKey marks the reason gcompose gives yagna when it ends an agreement
// because the provider failed (its value is the failure): a later state
// call that finds the agreement terminated by the requestor blames the
// provider only with it. yagna keeps a reason's members as they were sent
// (ya-client-model src/market/mod.rs Reason: message plus flattened extra).
const faultKey = "gcompose.provider_fault"

// Messages of the agreements gcompose ends itself.
const (
	whyInterrupted = "gcompose: create interrupted (gcompose went away or was interrupted)"
	whyCreateFail  = "gcompose: create failed"
	whyProvider    = "gcompose: provider failed"
	whyPayload     = "gcompose: the payload failed (its image cannot start)"
	whyUnapproved  = "gcompose: agreement not approved in time"
)

// requestorCode is the golem.requestor.code gcompose sends with each of its
// terminations: yagna counts terminations by it
// (core/market/src/negotiation/common.rs inc_terminate_metrics), and the
// provider sees why its agreement ended. yapapi sends Success for work
// done and Cancelled for work cancelled (yapapi/executor/__init__.py,
// agreements_pool.py); the failures have codes of gcompose's own, as
// yapapi's TooManyDebitNotes is its own (yapapi/engine.py).
func requestorCode(why string) string {
	switch why {
	case whyInterrupted, whyUnapproved:
		return "Cancelled"
	case whyProvider:
		return "ProviderFailure"
	case whyPayload:
		return "PayloadFailure"
	case whyCreateFail:
		return "Failure"
	default:
		// A removal, a replacement, what a sweep ends: done as asked.
		return "Success"
	}
}

// localErrors are the 500s yagna answers for its own failure, not the
// provider's: a database error of the activity API ("DAO error: …",
// core/activity/src/error.rs Error::Dao), of the market ("Internal error:
// …", "Failed to save Agreement …", "Failed to get Agreement …",
// core/market/src/negotiation/error.rs AgreementError::Internal, Save, Get,
// and the DbError of the other errors there), of the payment API.
var localErrors = regexp.MustCompile(`(?i)\bDAO error\b|\bInternal error\b|\bDb error\b|\bdatabase\b|Failed to (save|get) Agreement`)

// localError tells a 500 that yagna answered for its own failure: the local
// node's error, for the user to look into, not a provider gone (nobody is
// blamed for it, and the state call reports it as an error, as it does a
// yagna that does not answer).
func localError(err error) bool {
	var ae *yagna.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusInternalServerError && localErrors.MatchString(ae.Message)
}

// rejection is a provider's rejection of an agreement: its choice (no
// capacity left for another agreement, its negotiator changed its mind),
// not a failure. The create goes on with another provider and does not
// avoid this one: a later create may rent it.
type rejection struct{ err error }

func (e rejection) Error() string { return e.err.Error() }
func (e rejection) Unwrap() error { return e.err }

// rejectedBy tells whether err, the answer to waiting for the approval of
// agreement id, is the provider's rejection. yagna answers 410 Gone with
// the ApprovalStatus as the message, "Rejected" for a rejection and
// "Cancelled" for a cancellation (core/market/src/rest_api/requestor.rs
// wait_for_approval; core/market/src/negotiation/requestor.rs
// wait_for_approval, ApprovalStatus), and 410 for an agreement Expired
// before the provider answered too (rest_api/error.rs
// WaitForApprovalError::Expired, "Agreement [..] expired."): any other 410
// is told by the agreement's state.
func rejectedBy(ctx context.Context, yc *yagna.Client, id string, err error) bool {
	var ae *yagna.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusGone {
		return false
	}
	switch strings.TrimSpace(ae.Message) {
	case string(yagna.AgreementRejected):
		return true
	case string(yagna.AgreementCancelled):
		return false
	}
	a, gerr := yc.GetAgreement(ctx, id)
	return gerr == nil && a.State == yagna.AgreementRejected
}

// providerUnreachable is yagna saying it could not reach the provider
// (yagna.IsProviderUnreachable), unless the 500 is yagna's own failure.
func providerUnreachable(err error) bool {
	return yagna.IsProviderUnreachable(err) && !localError(err)
}

// idRuns are what differs between two providers' reports of the same
// failure: ids (activity, agreement, container), addresses.
var idRuns = regexp.MustCompile(`[0-9a-fA-F]{8,}|0x[0-9a-fA-F]+`)

// failureSignature is a deploy or start failure as the exe-unit worded it,
// with the ids that differ from provider to provider left out: two
// providers whose signatures are equal failed the same way.
func failureSignature(msg string) string {
	return strings.TrimSpace(idRuns.ReplaceAllString(msg, "…"))
}

// requestorFaults are the provider agent's termination codes that say the
// requestor's side failed, not the provider's: debit notes were not
// accepted or paid, the requestor
// could not be reached (yagna agent/provider/src/market/termination_reason.rs
// BreakReason, sent as golem.provider.code). A provider that ends an
// agreement for one of them is not blamed.
var requestorFaults = []string{"DebitNotesDeadline", "DebitNoteRejected", "DebitNoteNotPaid", "RequestorUnreachable"}

// agreementEnds are the provider agent's codes for an agreement that ended
// as agreed, not by a failure: its expiration passed (Expired, at
// golem.srv.comp.expiration: agent/provider/src/tasks/task_manager.rs
// schedule_expiration) or no activity ran on it within the provider's idle
// timeout (NoActivity, 90 s by default: schedule_idle_expiration,
// agent/provider/src/tasks/config.rs idle_agreement_timeout). The service is
// rented again; no one is blamed.
var agreementEnds = []string{"Expired", "NoActivity"}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// verdict is what the state call makes of a rental that is not alive.
type verdict struct {
	// blamed: the provider failed on its side and is avoided from now on.
	blamed bool
	// why says what happened, naming who ended the rental.
	why string
}

// blame judges a rental that is not alive (o.alive() is false): whose side
// ended it. The terminator of a terminated agreement is yagna's word
// (o.ended, GET /agreements/{id}/terminate/reason); an agreement still
// Approved whose activity is dead, gone or unreachable is the provider's
// failure, unless the create that made it was cut short (id.InitPending):
// then its own cleanup may have destroyed the activity before it could end
// the agreement, or it never got as far as starting it.
func blame(id Identity, o observed) verdict {
	who := "provider " + id.ProviderID
	switch {
	case o.unreachable != "":
		return verdict{true, o.why(id.ProviderID)}
	case o.agreement == nil:
		return verdict{false, "the agreement is gone (yagna no longer knows it)"}
	case o.agreement.State == yagna.AgreementTerminated:
		return blameTerminated(who, id.AgreementID, o)
	case o.agreement.State == yagna.AgreementCancelled:
		// Only the requestor cancels (market-api.yaml cancelAgreement);
		// a create that cancelled for the provider's fault blamed it itself.
		return verdict{false, "the agreement was cancelled by the requestor before approval"}
	case o.agreement.State == yagna.AgreementRejected:
		// The provider's choice (rejection), not a failure.
		return verdict{false, who + " rejected the agreement (a rejection is not a failure: the provider may be rented again)"}
	case o.agreement.State != yagna.AgreementApproved:
		// Proposal, Pending, Expired: never approved, the create that made
		// it did not finish.
		return verdict{false, "the agreement is " + string(o.agreement.State) + " (never approved)"}
	case o.activity == yagna.StateUnresponsive:
		return verdict{true, o.why(id.ProviderID)}
	case id.InitPending:
		return verdict{false, o.why(id.ProviderID) + ", its create was cut short"}
	default:
		return verdict{true, o.why(id.ProviderID)}
	}
}

// blameTerminated judges an agreement terminated: by the provider, blamed
// unless its code says the requestor failed; by the requestor, blamed only
// when gcompose ended it for the provider's fault (faultKey).
func blameTerminated(who, agreementID string, o observed) verdict {
	ev := o.ended
	if ev == nil {
		return verdict{false, "the agreement is Terminated (yagna did not say by whom: " + o.endedErr + ")"}
	}
	msg, code, fault := "", "", ""
	if ev.Reason != nil {
		msg = ev.Reason.Message
		code, _ = ev.Reason.Extra["golem.provider.code"].(string)
		fault, _ = ev.Reason.Extra[faultKey].(string)
	}
	said := ""
	if msg != "" {
		said = ": " + msg
	}
	switch ev.Terminator {
	case yagna.TerminatorProvider:
		if slices.Contains(agreementEnds, code) {
			// Not a failure of either side: the agreement ran its course
			// (Expired), or nothing ran on it (NoActivity: a create that
			// never got to its activity).
			return verdict{false, fmt.Sprintf("agreement %s ended by the provider: %s%s", agreementID, code, paren(msg))}
		}
		if slices.Contains(requestorFaults, code) {
			return verdict{false, fmt.Sprintf("%s terminated the agreement%s (%s: the requestor's side failed)", who, said, code)}
		}
		return verdict{true, who + " terminated the agreement" + said}
	case yagna.TerminatorRequestor:
		if fault != "" {
			return verdict{true, who + " failed: " + fault}
		}
		return verdict{false, "the agreement was terminated by the requestor" + said}
	default:
		return verdict{false, fmt.Sprintf("the agreement is Terminated by %q%s", ev.Terminator, said)}
	}
}

// avoided is the one rule by which the plan's estimate leaves providers out
// and the create refuses them: those that failed this resource before (the
// identity's), and the one it runs on when its rental is not alive and
// blame puts it on the provider. why holds the reason of each.
func avoided(id Identity, o observed) ([]string, map[string]string) {
	failed := slices.Clone(id.Failed)
	why := map[string]string{}
	for _, p := range failed {
		if w := id.FailedWhy[p]; w != "" {
			why[p] = w
		} else {
			why[p] = "failed this service before"
		}
	}
	rented := id.AgreementID != "" || id.ActivityID != ""
	if rented && !o.alive() && id.ProviderID != "" {
		if v := blame(id, o); v.blamed {
			failed = withProvider(failed, id.ProviderID)
			why[id.ProviderID] = v.why
		}
	}
	return failed, why
}

// withProvider is list with p added at its end unless it is there already.
func withProvider(list []string, p string) []string {
	if p == "" || slices.Contains(list, p) {
		return list
	}
	return append(slices.Clip(list), p)
}

// endedBy reads who terminated an agreement (yagna's AgreementTerminatedEvent
// for it). A failure to say is kept as text for blame, which then blames no
// one; a yagna that does not answer at all is an error.
func endedBy(ctx context.Context, yc *yagna.Client, agreementID string) (*yagna.AgreementOperationEvent, string, error) {
	ev, err := yc.TerminateReason(ctx, agreementID)
	switch {
	case err == nil:
		return &ev, "", nil
	case yagna.IsTransport(err):
		return nil, "", fmt.Errorf("reading why agreement %s was terminated: %w", agreementID, err)
	default:
		return nil, err.Error(), nil
	}
}
