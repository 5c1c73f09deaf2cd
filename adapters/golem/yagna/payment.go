package yagna

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// CreateAllocation reserves funds (POST /payment-api/v1/allocations → 201).
func (c *Client) CreateAllocation(ctx context.Context, a NewAllocation) (Allocation, error) {
	var out Allocation
	err := c.do(ctx, request{method: http.MethodPost, path: PaymentPrefix + "/allocations", body: a, out: &out})
	return out, err
}

// GetAllocation fetches an allocation (GET /allocations/{id}).
func (c *Client) GetAllocation(ctx context.Context, allocationID string) (Allocation, error) {
	var out Allocation
	err := c.do(ctx, request{method: http.MethodGet, path: allocationPath(allocationID), out: &out})
	return out, err
}

// Allocations lists the allocations (GET /allocations).
func (c *Client) Allocations(ctx context.Context) ([]Allocation, error) {
	var out []Allocation
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/allocations", out: &out})
	return out, err
}

// RequestorAccounts lists the requestor's payment accounts (GET
// /requestorAccounts): the platforms its identity can pay on. Funds are not
// shown; an allocation beyond them fails with an RFC 7807 400.
func (c *Client) RequestorAccounts(ctx context.Context) ([]Account, error) {
	var out []Account
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/requestorAccounts", out: &out})
	return out, err
}

// AmendAllocation changes an allocation's amount or timeout (PUT /allocations/{id}).
func (c *Client) AmendAllocation(ctx context.Context, allocationID string, u AllocationUpdate) (Allocation, error) {
	var out Allocation
	err := c.do(ctx, request{method: http.MethodPut, path: allocationPath(allocationID), body: u, out: &out})
	return out, err
}

// ReleaseAllocation releases an allocation (DELETE /allocations/{id} → 200; 404
// or 410 when already released).
func (c *Client) ReleaseAllocation(ctx context.Context, allocationID string) error {
	// yapapi repeats it (yapapi/rest/payment.py Allocation.delete); a second
	// try after a lost answer gets 404/410, which callers take as done.
	return c.do(ctx, request{method: http.MethodDelete, path: allocationPath(allocationID), retry: retryTransient})
}

func allocationPath(id string) string { return PaymentPrefix + "/allocations/" + seg(id) }

// DemandDecorations returns the payment properties and constraints a Demand
// paid from these allocations must carry (GET /demandDecorations?allocationIds=a,b).
func (c *Client) DemandDecorations(ctx context.Context, allocationIDs ...string) (MarketDecoration, error) {
	var out MarketDecoration
	err := c.do(ctx, request{
		method: http.MethodGet,
		path:   PaymentPrefix + "/demandDecorations",
		// style form, explode false: one comma-separated value
		query: url.Values{"allocationIds": {strings.Join(allocationIDs, ",")}},
		out:   &out,
	})
	return out, err
}

// DebitNoteEvents long-polls debit note events (GET /debitNoteEvents). Events
// persist: pass the last seen event's date as after to get only newer ones.
func (c *Client) DebitNoteEvents(ctx context.Context, timeout time.Duration, after time.Time, maxEvents int) ([]DebitNoteEvent, error) {
	var out []DebitNoteEvent
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/debitNoteEvents", query: pollQuery(timeout, maxEvents, after), out: &out})
	return out, err
}

// GetDebitNote fetches a debit note (GET /debitNotes/{id}).
func (c *Client) GetDebitNote(ctx context.Context, debitNoteID string) (DebitNote, error) {
	var out DebitNote
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/debitNotes/" + seg(debitNoteID), out: &out})
	return out, err
}

// DebitNotes lists debit notes (GET /debitNotes). Zero after and maxItems <= 0
// are left out.
func (c *Client) DebitNotes(ctx context.Context, after time.Time, maxItems int) ([]DebitNote, error) {
	var out []DebitNote
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/debitNotes", query: listQuery(after, maxItems), out: &out})
	return out, err
}

// AcceptDebitNote accepts a debit note against an allocation (POST
// /debitNotes/{id}/accept?timeout= → 200). timeout < 0 leaves it out.
//
// It is safe to repeat: yagna answers 200 for a note already accepted
// (core/payment/src/api/debit_notes.rs accept_debit_note), and yapapi
// repeats it on 408/504 and lost connections (yapapi/rest/payment.py
// DebitNote.accept); so does this client.
func (c *Client) AcceptDebitNote(ctx context.Context, debitNoteID string, a DebitNoteAcceptance, timeout time.Duration) error {
	return c.do(ctx, request{method: http.MethodPost, path: PaymentPrefix + "/debitNotes/" + seg(debitNoteID) + "/accept", query: ackQuery(timeout), body: a, retry: retryTransient408})
}

// RejectDebitNote rejects a debit note (POST /debitNotes/{id}/reject → 200).
func (c *Client) RejectDebitNote(ctx context.Context, debitNoteID string, r Rejection, timeout time.Duration) error {
	return c.do(ctx, request{method: http.MethodPost, path: PaymentPrefix + "/debitNotes/" + seg(debitNoteID) + "/reject", query: ackQuery(timeout), body: r})
}

// InvoiceEvents long-polls invoice events (GET /invoiceEvents).
func (c *Client) InvoiceEvents(ctx context.Context, timeout time.Duration, after time.Time, maxEvents int) ([]InvoiceEvent, error) {
	var out []InvoiceEvent
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/invoiceEvents", query: pollQuery(timeout, maxEvents, after), out: &out})
	return out, err
}

// GetInvoice fetches an invoice (GET /invoices/{id}).
func (c *Client) GetInvoice(ctx context.Context, invoiceID string) (Invoice, error) {
	var out Invoice
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/invoices/" + seg(invoiceID), out: &out})
	return out, err
}

// Invoices lists invoices (GET /invoices).
func (c *Client) Invoices(ctx context.Context, after time.Time, maxItems int) ([]Invoice, error) {
	var out []Invoice
	err := c.do(ctx, request{method: http.MethodGet, path: PaymentPrefix + "/invoices", query: listQuery(after, maxItems), out: &out})
	return out, err
}

// AcceptInvoice accepts an invoice against an allocation (POST
// /invoices/{id}/accept?timeout= → 200). Repeated like AcceptDebitNote
// (yapapi/rest/payment.py Invoice.accept; yagna answers 200 for an invoice
// already accepted, core/payment/src/api/invoices.rs).
func (c *Client) AcceptInvoice(ctx context.Context, invoiceID string, a Acceptance, timeout time.Duration) error {
	return c.do(ctx, request{method: http.MethodPost, path: PaymentPrefix + "/invoices/" + seg(invoiceID) + "/accept", query: ackQuery(timeout), body: a, retry: retryTransient408})
}

// RejectInvoice rejects an invoice (POST /invoices/{id}/reject → 200).
func (c *Client) RejectInvoice(ctx context.Context, invoiceID string, r Rejection, timeout time.Duration) error {
	return c.do(ctx, request{method: http.MethodPost, path: PaymentPrefix + "/invoices/" + seg(invoiceID) + "/reject", query: ackQuery(timeout), body: r})
}

func ackQuery(timeout time.Duration) url.Values {
	if timeout < 0 {
		return nil
	}
	return url.Values{"timeout": {seconds(timeout)}}
}

func listQuery(after time.Time, maxItems int) url.Values {
	q := url.Values{}
	if !after.IsZero() {
		q.Set("afterTimestamp", after.UTC().Format(time.RFC3339Nano))
	}
	if maxItems > 0 {
		q.Set("maxItems", strconv.Itoa(maxItems))
	}
	return q
}
