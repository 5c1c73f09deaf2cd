package service

import (
	"context"
	"strings"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// removal is what a remove did, for its log line: a create that ended
// before an activity was made leaves an agreement and no activity, and an
// agreement not approved yet is cancelled, not terminated.
type removal struct {
	Activity string
	// ActivityEnd is "destroyed" or "was already gone" ("" without an
	// activity).
	ActivityEnd string
	Agreement   string
	// AgreementEnd is what ending the agreement did (agreementEnding).
	AgreementEnd string
}

func (r removal) message(name string) string {
	var parts []string
	if r.Activity == "" {
		parts = append(parts, "no activity had been created")
	} else {
		parts = append(parts, "activity "+r.Activity+" "+r.ActivityEnd)
	}
	if r.Agreement == "" {
		parts = append(parts, "no agreement had been made")
	} else {
		parts = append(parts, "agreement "+r.Agreement+" "+r.AgreementEnd)
	}
	return "service " + name + ": " + strings.Join(parts, ", ")
}

// agreementEnding reads an agreement before abandon ends it and says what
// abandon will do: cancel one not approved yet, terminate an approved one,
// nothing to one already over. A read that fails says only "ended": the
// line is for people, the read decides nothing.
func agreementEnding(ctx context.Context, yc *yagna.Client, id string) string {
	a, err := yc.GetAgreement(ctx, id)
	return endingOf(a.State, err)
}

func endingOf(st yagna.AgreementState, err error) string {
	switch {
	case yagna.IsNotFound(err) || yagna.IsGone(err):
		return "was already gone"
	case err != nil:
		return "ended"
	}
	switch st {
	case yagna.AgreementProposalState, yagna.AgreementPending:
		return "cancelled"
	case yagna.AgreementApproved:
		return "terminated"
	case yagna.AgreementCancelled, yagna.AgreementRejected, yagna.AgreementExpired, yagna.AgreementTerminated:
		return "was already " + strings.ToLower(string(st))
	}
	return "ended"
}
