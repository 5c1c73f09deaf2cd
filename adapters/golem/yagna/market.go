package yagna

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// SubscribeDemand publishes a Demand and returns its subscription id
// (POST /market-api/v1/demands → 201).
func (c *Client) SubscribeDemand(ctx context.Context, d DemandOfferBase) (string, error) {
	if d.Properties == nil {
		d.Properties = map[string]any{}
	}
	var id string
	err := c.do(ctx, request{method: http.MethodPost, path: MarketPrefix + "/demands", body: d, out: &id})
	return id, err
}

// UnsubscribeDemand revokes a Demand (DELETE /demands/{id} → 204; 404 / 410 when
// already gone).
func (c *Client) UnsubscribeDemand(ctx context.Context, subscriptionID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: MarketPrefix + "/demands/" + seg(subscriptionID)})
}

// Demands lists the requestor's active Demands (GET /demands).
func (c *Client) Demands(ctx context.Context) ([]Demand, error) {
	var out []Demand
	err := c.do(ctx, request{method: http.MethodGet, path: MarketPrefix + "/demands", out: &out})
	return out, err
}

// CollectOffers long-polls a Demand subscription's events
// (GET /demands/{id}/events?timeout=&maxEvents=). timeout < 0 and maxEvents <= 0
// use the server's defaults.
func (c *Client) CollectOffers(ctx context.Context, subscriptionID string, timeout time.Duration, maxEvents int) ([]MarketEvent, error) {
	var out []MarketEvent
	err := c.do(ctx, request{
		method: http.MethodGet,
		path:   MarketPrefix + "/demands/" + seg(subscriptionID) + "/events",
		query:  pollQuery(timeout, maxEvents, time.Time{}),
		out:    &out,
	})
	return out, err
}

// GetProposal fetches an Offer proposal (GET /demands/{id}/proposals/{proposalId}).
func (c *Client) GetProposal(ctx context.Context, subscriptionID, proposalID string) (Proposal, error) {
	var p Proposal
	err := c.do(ctx, request{method: http.MethodGet, path: proposalPath(subscriptionID, proposalID), out: &p})
	return p, err
}

// CounterProposal answers an Offer proposal with a bespoke Demand and returns
// the new proposal's id (POST /demands/{id}/proposals/{proposalId} → 201).
func (c *Client) CounterProposal(ctx context.Context, subscriptionID, proposalID string, d DemandOfferBase) (string, error) {
	if d.Properties == nil {
		d.Properties = map[string]any{}
	}
	var id string
	err := c.do(ctx, request{method: http.MethodPost, path: proposalPath(subscriptionID, proposalID), body: d, out: &id})
	return id, err
}

// RejectProposal rejects an Offer proposal (POST .../proposals/{id}/reject → 204).
// reason may be nil (no body).
func (c *Client) RejectProposal(ctx context.Context, subscriptionID, proposalID string, reason *Reason) error {
	r := request{method: http.MethodPost, path: proposalPath(subscriptionID, proposalID) + "/reject"}
	if reason != nil {
		r.body = reason
	}
	return c.do(ctx, r)
}

func proposalPath(subscriptionID, proposalID string) string {
	return MarketPrefix + "/demands/" + seg(subscriptionID) + "/proposals/" + seg(proposalID)
}

// CreateAgreement promotes a (Draft) proposal to an Agreement and returns its id
// (POST /agreements → 200, core/market/src/rest_api/requestor.rs create_agreement;
// 400 while the proposal is Initial: AgreementError::NoNegotiations).
func (c *Client) CreateAgreement(ctx context.Context, proposalID string, validTo time.Time) (string, error) {
	var id string
	err := c.do(ctx, request{
		method: http.MethodPost,
		path:   MarketPrefix + "/agreements",
		body:   AgreementProposal{ProposalID: proposalID, ValidTo: validTo.UTC()},
		out:    &id,
	})
	return id, err
}

// ConfirmAgreement sends the Agreement to the provider (POST
// /agreements/{id}/confirm → 204). appSessionID may be "".
func (c *Client) ConfirmAgreement(ctx context.Context, agreementID, appSessionID string) error {
	var q url.Values
	if appSessionID != "" {
		q = url.Values{"appSessionId": {appSessionID}}
	}
	return c.do(ctx, request{method: http.MethodPost, path: agreementPath(agreementID) + "/confirm", query: q})
}

// WaitForApproval waits up to timeout for the provider's approval (POST
// /agreements/{id}/wait?timeout= → 204). A 408 (IsTimeout) means "ask again";
// 410 (IsGone) means rejected, cancelled or expired for good; 400 an agreement
// not confirmed yet or already terminated (core/market/src/negotiation/requestor.rs
// wait_for_approval, rest_api/error.rs WaitForApprovalError).
func (c *Client) WaitForApproval(ctx context.Context, agreementID string, timeout time.Duration) error {
	q := url.Values{}
	if timeout >= 0 {
		q.Set("timeout", seconds(timeout))
	}
	return c.do(ctx, request{method: http.MethodPost, path: agreementPath(agreementID) + "/wait", query: q})
}

// GetAgreement fetches an Agreement (GET /agreements/{id}).
func (c *Client) GetAgreement(ctx context.Context, agreementID string) (Agreement, error) {
	var a Agreement
	err := c.do(ctx, request{method: http.MethodGet, path: agreementPath(agreementID), out: &a})
	return a, err
}

// ListAgreements lists the identity's Agreements (GET /agreements), those
// confirmed with appSessionID ("" for any) in state ("" for any). yagna
// filters the session exactly (core/market/src/db/dao/agreement.rs list).
func (c *Client) ListAgreements(ctx context.Context, appSessionID string, state AgreementState) ([]AgreementListEntry, error) {
	q := url.Values{}
	if appSessionID != "" {
		q.Set("appSessionId", appSessionID)
	}
	if state != "" {
		q.Set("state", string(state))
	}
	var out []AgreementListEntry
	err := c.do(ctx, request{method: http.MethodGet, path: MarketPrefix + "/agreements", query: q, out: &out})
	return out, err
}

// CancelAgreement cancels a not yet approved Agreement (POST
// /agreements/{id}/cancel → 200 with no body: core/market/src/rest_api/requestor.rs
// cancel_agreement). reason may be nil.
func (c *Client) CancelAgreement(ctx context.Context, agreementID string, reason *Reason) error {
	r := request{method: http.MethodPost, path: agreementPath(agreementID) + "/cancel"}
	if reason != nil {
		r.body = reason
	}
	return c.do(ctx, r)
}

// TerminateAgreement ends an approved Agreement (POST /agreements/{id}/terminate
// → 200 with no body: core/market/src/rest_api/common.rs terminate_agreement;
// 410 if already terminated, 409 while in Proposal). reason may be nil; the usual one is
// TerminationReason("...").
func (c *Client) TerminateAgreement(ctx context.Context, agreementID string, reason *Reason) error {
	r := request{method: http.MethodPost, path: agreementPath(agreementID) + "/terminate"}
	if reason != nil {
		r.body = reason
	}
	return c.do(ctx, r)
}

// TerminationReason is the reason a requestor gives when it ends an Agreement
// normally: {"message": msg, "golem.requestor.code": "Success"}.
func TerminationReason(msg string) *Reason {
	return &Reason{Message: msg, Extra: map[string]any{"golem.requestor.code": "Success"}}
}

// TerminateReason is the AgreementTerminatedEvent of a terminated Agreement:
// who ended it (Terminator "Requestor" or "Provider", ya-client-model
// src/market/agreement_event.rs AgreementTerminator) and the reason given.
// yagna serves it as GET /agreements/{id}/terminate/reason, where
// market-api.yaml says POST (core/market/src/rest_api/common.rs
// get_agreement_terminate_reason), and answers 400 "Agreement [id] not
// terminated yet." for one that is not (negotiation/common.rs
// get_terminate_reason, rest_api/error.rs NotTerminated).
func (c *Client) TerminateReason(ctx context.Context, agreementID string) (AgreementOperationEvent, error) {
	var ev AgreementOperationEvent
	err := c.do(ctx, request{method: http.MethodGet, path: agreementPath(agreementID) + "/terminate/reason", out: &ev})
	return ev, err
}

// AgreementEvents long-polls Agreement events (GET /agreementEvents).
// Zero after and "" appSessionID are left out.
func (c *Client) AgreementEvents(ctx context.Context, timeout time.Duration, after time.Time, maxEvents int, appSessionID string) ([]AgreementOperationEvent, error) {
	q := pollQuery(timeout, maxEvents, after)
	if appSessionID != "" {
		q.Set("appSessionId", appSessionID)
	}
	var out []AgreementOperationEvent
	err := c.do(ctx, request{method: http.MethodGet, path: MarketPrefix + "/agreementEvents", query: q, out: &out})
	return out, err
}

func agreementPath(agreementID string) string {
	return MarketPrefix + "/agreements/" + seg(agreementID)
}
