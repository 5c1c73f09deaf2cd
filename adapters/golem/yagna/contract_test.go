package yagna_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gcompose/gcompose/adapters/golem/openapi"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// The contract test runs every client call against a recording httptest server
// whose answers are built from this package's own types. A Checker on the
// client's transport checks each request the client sends and a Checker on the
// server checks each answer — so both the client's requests and the types a
// server (the devnet) marshals are held to the OpenAPI files.

const key = "contract-test-app-key"

var (
	t0      = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	t1      = t0.Add(time.Hour)
	props   = map[string]any{"golem.inf.cpu.cores": 4, "golem.node.id.name": "provider-1", "golem.runtime.capabilities": []string{"vpn"}}
	demand  = yagna.Demand{Properties: map[string]any{"golem.srv.comp.expiration": 1}, Constraints: "(golem.inf.cpu.cores>=2)", DemandID: "d1", RequestorID: "0xr", Timestamp: t0}
	offer   = yagna.Offer{Properties: props, Constraints: "()", OfferID: "o1", ProviderID: "0xp", Timestamp: t0}
	draft   = yagna.Proposal{Properties: props, Constraints: "()", ProposalID: "p2", IssuerID: "0xp", State: yagna.ProposalDraft, Timestamp: t0, PrevProposalID: "c1"}
	initial = yagna.Proposal{Properties: props, Constraints: "()", ProposalID: "p1", IssuerID: "0xp", State: yagna.ProposalInitial, Timestamp: t0}
	agr     = yagna.Agreement{AgreementID: "a1", Demand: demand, Offer: offer, ValidTo: t1, ApprovedDate: &t0, State: yagna.AgreementApproved, Timestamp: t0}
	alloc   = yagna.Allocation{AllocationID: "al1", Address: "0xr", PaymentPlatform: &yagna.PaymentPlatform{Name: "erc20-holesky-tglm"}, TotalAmount: "5", SpentAmount: "0", RemainingAmount: "5", Timestamp: t0, Timeout: &t1}
	due     = t1
	dn      = yagna.DebitNote{DebitNoteID: "dn1", IssuerID: "0xp", RecipientID: "0xr", PayeeAddr: "0xp", PayerAddr: "0xr", PaymentPlatform: "erc20-holesky-tglm", Timestamp: t0, AgreementID: "a1", ActivityID: "act1", TotalAmountDue: "0.01", PaymentDueDate: &due, Status: yagna.StatusReceived}
	inv     = yagna.Invoice{InvoiceID: "i1", IssuerID: "0xp", RecipientID: "0xr", PayeeAddr: "0xp", PayerAddr: "0xr", PaymentPlatform: "erc20-holesky-tglm", Timestamp: t0, AgreementID: "a1", ActivityIDs: []string{"act1"}, Amount: "0.02", PaymentDueDate: t1, Status: yagna.StatusReceived}
	hoodi   = yagna.Account{Platform: "erc20-hoodi-tglm", Address: "0xr", Driver: "erc20", Network: "hoodi", Token: "tglm", Send: true}
	// insufficientFunds is yagna's answer, member for member.
	insufficientFunds = problem{
		"type": "/payment-api/v1/allocations/validation-error", "instance": "/payment-api/v1/allocations/validation-error/insufficient-account-funds",
		"detail":         "Insufficient funds to create the allocation. Top up your account or release all existing allocations to unlock the funds via `yagna payment release-allocations`",
		"requestedFunds": "5", "availableFunds": "0", "reservedFunds": "0", "paymentPlatform": "erc20-holesky-tglm", "address": "0xr",
		"requestBody": map[string]any{"totalAmount": "5", "makeDeposit": false},
	}
	network = yagna.Network{ID: "n1", IP: "192.168.0.0/24", Mask: "255.255.255.0", Gateway: "192.168.0.1"}
)

// problem is an answer sent as application/problem+json (RFC 7807), as yagna
// answers allocation validation errors.
type problem map[string]any

// exchange is one recorded request.
type exchange struct {
	method, target, body, auth string
}

// fake answers every request with the next canned answer.
type fake struct {
	mu      sync.Mutex
	status  int
	body    []byte
	ctype   string
	history []exchange
}

func (f *fake) set(status int, v any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
	f.body = nil
	f.ctype = "application/json"
	if _, ok := v.(problem); ok {
		f.ctype = openapi.ProblemJSON
	}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		f.body = b
	}
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.history = append(f.history, exchange{r.Method, r.URL.RequestURI(), string(b), r.Header.Get("Authorization")})
	status, body, ctype := f.status, f.body, f.ctype
	f.mu.Unlock()
	if body != nil {
		w.Header().Set("Content-Type", ctype)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (f *fake) last() exchange {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.history) == 0 {
		return exchange{}
	}
	return f.history[len(f.history)-1]
}

func TestClientContract(t *testing.T) {
	clientSide, err := openapi.NewChecker()
	if err != nil {
		t.Fatal(err)
	}
	serverSide := &openapi.Checker{Spec: clientSide.Spec, SkipRequests: true}
	f := &fake{}
	srv := httptest.NewServer(serverSide.Handler(f))
	defer srv.Close()
	c := yagna.New(srv.URL, key)
	c.HTTP = &http.Client{Transport: clientSide.Transport(nil)}
	c.Retries = -1

	tests := []struct {
		name   string
		status int
		answer any
		call   func(ctx context.Context) (any, error)
		// want: the decoded result (nil: not compared), target and body sent
		want       any
		wantTarget string
		wantBody   string
	}{
		{"me", 200, yagna.Identity{Identity: "0xr", Name: "req", Role: "manager"},
			func(ctx context.Context) (any, error) { return c.Me(ctx) },
			yagna.Identity{Identity: "0xr", Name: "req", Role: "manager"}, "/me", ""},
		{"version", 200, yagna.VersionResponse{Current: yagna.VersionInfo{Version: "0.17.0", Name: "v0.17.0", ReleaseTS: "2025-01-01T00:00:00"}},
			func(ctx context.Context) (any, error) { return c.Version(ctx) }, nil, "/version/get", ""},

		// payment: accounts, allocation and demand decorations
		{"requestor accounts", 200, []yagna.Account{hoodi}, func(ctx context.Context) (any, error) { return c.RequestorAccounts(ctx) },
			[]yagna.Account{hoodi}, "/payment-api/v1/requestorAccounts", ""},
		{"create allocation", 201, alloc,
			func(ctx context.Context) (any, error) {
				return c.CreateAllocation(ctx, yagna.NewAllocation{Address: "0xr", PaymentPlatform: &yagna.PaymentPlatform{Name: "erc20-holesky-tglm"}, TotalAmount: "5", Timeout: &t1})
			},
			alloc, "/payment-api/v1/allocations", `{"address":"0xr","paymentPlatform":"erc20-holesky-tglm","totalAmount":"5","timeout":"2026-11-22T11:00:00Z","makeDeposit":false}`},
		{"get allocation", 200, alloc, func(ctx context.Context) (any, error) { return c.GetAllocation(ctx, "al1") }, alloc, "/payment-api/v1/allocations/al1", ""},
		{"allocations", 200, []yagna.Allocation{alloc}, func(ctx context.Context) (any, error) { return c.Allocations(ctx) }, []yagna.Allocation{alloc}, "/payment-api/v1/allocations", ""},
		{"amend allocation", 200, alloc, func(ctx context.Context) (any, error) {
			return c.AmendAllocation(ctx, "al1", yagna.AllocationUpdate{TotalAmount: "6"})
		}, nil, "/payment-api/v1/allocations/al1", `{"totalAmount":"6"}`},
		{"release allocation", 200, nil, func(ctx context.Context) (any, error) { return nil, c.ReleaseAllocation(ctx, "al1") }, nil, "/payment-api/v1/allocations/al1", ""},
		{"demand decorations", 200, yagna.MarketDecoration{
			Properties:  []yagna.MarketProperty{{Key: "golem.com.payment.platform.erc20-holesky-tglm.address", Value: "0xr"}, {Key: "golem.com.payment.protocol.version", Value: "3"}},
			Constraints: []string{"(golem.com.payment.platform.erc20-holesky-tglm.address=*)"},
		}, func(ctx context.Context) (any, error) { return c.DemandDecorations(ctx, "al1", "al2") }, nil, "/payment-api/v1/demandDecorations?allocationIds=al1%2Cal2", ""},

		// market
		{"subscribe demand", 201, "sub1", func(ctx context.Context) (any, error) {
			return c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: map[string]any{"golem.srv.comp.expiration": 1}, Constraints: "(golem.inf.cpu.cores>=2)"})
		}, "sub1", "/market-api/v1/demands", `{"properties":{"golem.srv.comp.expiration":1},"constraints":"(golem.inf.cpu.cores>=2)"}`},
		{"subscribe demand nil properties", 201, "sub2", func(ctx context.Context) (any, error) {
			return c.SubscribeDemand(ctx, yagna.DemandOfferBase{Constraints: "()"})
		}, "sub2", "/market-api/v1/demands", `{"properties":{},"constraints":"()"}`},
		{"demands", 200, []yagna.Demand{demand}, func(ctx context.Context) (any, error) { return c.Demands(ctx) }, []yagna.Demand{demand}, "/market-api/v1/demands", ""},
		{"collect offers", 200, []any{
			yagna.NewProposalEvent(t0, initial),
			yagna.NewProposalRejectedEvent(t0, "c0", &yagna.Reason{Message: "no"}),
			yagna.MarketEvent{EventType: yagna.EventProposal, EventDate: t0, Proposal: &draft},
		}, func(ctx context.Context) (any, error) { return c.CollectOffers(ctx, "sub1", 2500*time.Millisecond, 10) },
			[]yagna.MarketEvent{
				{EventType: yagna.EventProposal, EventDate: t0, Proposal: &initial},
				{EventType: yagna.EventProposalRejected, EventDate: t0, ProposalID: "c0", Reason: &yagna.Reason{Message: "no"}},
				{EventType: yagna.EventProposal, EventDate: t0, Proposal: &draft},
			}, "/market-api/v1/demands/sub1/events?maxEvents=10&timeout=2.5", ""},
		{"get proposal", 200, draft, func(ctx context.Context) (any, error) { return c.GetProposal(ctx, "sub1", "p2") }, draft, "/market-api/v1/demands/sub1/proposals/p2", ""},
		{"counter proposal", 200, "c1", func(ctx context.Context) (any, error) {
			return c.CounterProposal(ctx, "sub1", "p1", yagna.DemandOfferBase{Properties: map[string]any{"golem.com.payment.chosen-platform": "erc20-holesky-tglm"}, Constraints: "()"})
		}, "c1", "/market-api/v1/demands/sub1/proposals/p1", `{"properties":{"golem.com.payment.chosen-platform":"erc20-holesky-tglm"},"constraints":"()"}`},
		{"reject proposal", 204, nil, func(ctx context.Context) (any, error) {
			return nil, c.RejectProposal(ctx, "sub1", "p1", &yagna.Reason{Message: "too expensive"})
		}, nil, "/market-api/v1/demands/sub1/proposals/p1/reject", `{"message":"too expensive"}`},
		{"reject proposal without reason", 204, nil, func(ctx context.Context) (any, error) { return nil, c.RejectProposal(ctx, "sub1", "p1", nil) },
			nil, "/market-api/v1/demands/sub1/proposals/p1/reject", ""},
		{"create agreement", 200, "a1", func(ctx context.Context) (any, error) { return c.CreateAgreement(ctx, "p2", t1) },
			"a1", "/market-api/v1/agreements", `{"proposalId":"p2","validTo":"2026-11-22T11:00:00Z"}`},
		{"confirm agreement", 204, nil, func(ctx context.Context) (any, error) { return nil, c.ConfirmAgreement(ctx, "a1", "") }, nil, "/market-api/v1/agreements/a1/confirm", ""},
		{"confirm agreement with session", 204, nil, func(ctx context.Context) (any, error) { return nil, c.ConfirmAgreement(ctx, "a1", "app-1") }, nil, "/market-api/v1/agreements/a1/confirm?appSessionId=app-1", ""},
		{"wait for approval", 204, nil, func(ctx context.Context) (any, error) { return nil, c.WaitForApproval(ctx, "a1", 15*time.Second) }, nil, "/market-api/v1/agreements/a1/wait?timeout=15", ""},
		{"get agreement", 200, agr, func(ctx context.Context) (any, error) { return c.GetAgreement(ctx, "a1") }, agr, "/market-api/v1/agreements/a1", ""},
		{"list agreements of a session", 200, []yagna.AgreementListEntry{{ID: "a1", Timestamp: t0, ApprovedDate: &t0, Role: "Requestor"}},
			func(ctx context.Context) (any, error) {
				return c.ListAgreements(ctx, "gcompose/app", yagna.AgreementApproved)
			},
			[]yagna.AgreementListEntry{{ID: "a1", Timestamp: t0, ApprovedDate: &t0, Role: "Requestor"}}, "/market-api/v1/agreements?appSessionId=gcompose%2Fapp&state=Approved", ""},
		{"cancel agreement", 200, nil, func(ctx context.Context) (any, error) { return nil, c.CancelAgreement(ctx, "a1", nil) }, nil, "/market-api/v1/agreements/a1/cancel", ""},
		{"terminate agreement", 200, nil, func(ctx context.Context) (any, error) {
			return nil, c.TerminateAgreement(ctx, "a1", yagna.TerminationReason("done"))
		}, nil, "/market-api/v1/agreements/a1/terminate", `{"golem.requestor.code":"Success","message":"done"}`},
		{"agreement events", 200, []yagna.AgreementOperationEvent{
			{EventType: yagna.EventAgreementApproved, EventDate: t0, AgreementID: "a1"},
			{EventType: yagna.EventAgreementTerminated, EventDate: t0, AgreementID: "a1", Terminator: "Provider", Signature: "sig", Reason: &yagna.Reason{Message: "debit notes unpaid"}},
		}, func(ctx context.Context) (any, error) { return c.AgreementEvents(ctx, 5*time.Second, t0, 10, "") },
			nil, "/market-api/v1/agreementEvents?afterTimestamp=2026-11-22T10%3A00%3A00Z&maxEvents=10&timeout=5", ""},
		// yagna serves the terminate reason as GET (core/market/src/rest_api/common.rs), the spec
		// says POST: the openapi errata move it.
		{"terminate reason", 200, yagna.AgreementOperationEvent{EventType: yagna.EventAgreementTerminated, EventDate: t0, AgreementID: "a1",
			Terminator: yagna.TerminatorRequestor, Signature: "sig", Reason: yagna.TerminationReason("done")},
			func(ctx context.Context) (any, error) { return c.TerminateReason(ctx, "a1") },
			yagna.AgreementOperationEvent{EventType: yagna.EventAgreementTerminated, EventDate: t0, AgreementID: "a1",
				Terminator: yagna.TerminatorRequestor, Signature: "sig", Reason: yagna.TerminationReason("done")},
			"/market-api/v1/agreements/a1/terminate/reason", ""},
		{"unsubscribe demand", 204, nil, func(ctx context.Context) (any, error) { return nil, c.UnsubscribeDemand(ctx, "sub1") }, nil, "/market-api/v1/demands/sub1", ""},

		// net
		{"create network", 200, network, func(ctx context.Context) (any, error) {
			return c.CreateNetwork(ctx, yagna.NewNetwork{IP: "192.168.0.0", Mask: "255.255.255.0"})
		}, network, "/net-api/v1/net", `{"ip":"192.168.0.0","mask":"255.255.255.0"}`},
		{"get network", 200, network, func(ctx context.Context) (any, error) { return c.GetNetwork(ctx, "n1") }, network, "/net-api/v1/net/n1", ""},
		{"networks", 200, []yagna.Network{network}, func(ctx context.Context) (any, error) { return c.Networks(ctx) }, []yagna.Network{network}, "/net-api/v1/net", ""},
		{"add address", 200, json.RawMessage("null"), func(ctx context.Context) (any, error) { return nil, c.AddAddress(ctx, "n1", "192.168.0.1") }, nil, "/net-api/v1/net/n1/addresses", `{"ip":"192.168.0.1"}`},
		{"addresses", 200, []yagna.Address{{IP: "192.168.0.1/24"}}, func(ctx context.Context) (any, error) { return c.Addresses(ctx, "n1") }, []yagna.Address{{IP: "192.168.0.1/24"}}, "/net-api/v1/net/n1/addresses", ""},
		{"add node", 200, json.RawMessage("null"), func(ctx context.Context) (any, error) {
			return nil, c.AddNode(ctx, "n1", yagna.Node{ID: "0xp", IP: "192.168.0.2"})
		}, nil, "/net-api/v1/net/n1/nodes", `{"id":"0xp","ip":"192.168.0.2"}`},
		{"nodes", 200, []yagna.Node{{ID: "0xp", IP: "192.168.0.2"}}, func(ctx context.Context) (any, error) { return c.Nodes(ctx, "n1") }, []yagna.Node{{ID: "0xp", IP: "192.168.0.2"}}, "/net-api/v1/net/n1/nodes", ""},

		// activity
		{"create activity", 200, yagna.CreateActivityResult{ActivityID: "act1"}, func(ctx context.Context) (any, error) { return c.CreateActivity(ctx, "a1") },
			yagna.CreateActivityResult{ActivityID: "act1"}, "/activity-api/v1/activity", `{"agreementId":"a1"}`},
		{"create activity (bare string)", 200, "act1", func(ctx context.Context) (any, error) { return c.CreateActivity(ctx, "a1") },
			yagna.CreateActivityResult{ActivityID: "act1"}, "/activity-api/v1/activity", `{"agreementId":"a1"}`},
		{"exec", 200, "batch1", func(ctx context.Context) (any, error) {
			return c.ExecCommands(ctx, "act1",
				yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: "n1", IP: "192.168.0.0", Mask: "255.255.255.0", NodeIP: "192.168.0.2", Nodes: map[string]string{"192.168.0.1": "0xr", "192.168.0.2": "0xp"}}}}},
				yagna.ExeScriptCommand{Start: &yagna.StartCommand{Args: []string{}}},
				yagna.ExeScriptCommand{Run: &yagna.RunCommand{EntryPoint: "/bin/sh", Args: []string{"-c", "echo hi"}, Capture: yagna.CaptureAtEndString()}},
			)
		}, "batch1", "/activity-api/v1/activity/act1/exec", ""},
		{"batch results", 200, []yagna.ExeScriptCommandResult{{Index: 0, EventDate: t0, Result: yagna.ResultOk, Stdout: "hi\n", IsBatchFinished: true}},
			func(ctx context.Context) (any, error) {
				return c.ExecBatchResults(ctx, "act1", "batch1", 5*time.Second, -1)
			},
			[]yagna.ExeScriptCommandResult{{Index: 0, EventDate: t0, Result: yagna.ResultOk, Stdout: "hi\n", IsBatchFinished: true}}, "/activity-api/v1/activity/act1/exec/batch1?timeout=5", ""},
		{"batch results for one command", 200, []yagna.ExeScriptCommandResult{{Index: 0, EventDate: t0, Result: yagna.ResultError, Stderr: "boom", Message: "exit 1"}},
			func(ctx context.Context) (any, error) {
				return c.ExecBatchResults(ctx, "act1", "batch1", 5*time.Second, 2)
			},
			nil, "/activity-api/v1/activity/act1/exec/batch1?commandIndex=2&timeout=5", ""},
		{"wait batch", 200, []yagna.ExeScriptCommandResult{{Index: 0, EventDate: t0, Result: yagna.ResultOk, IsBatchFinished: true}},
			func(ctx context.Context) (any, error) { return c.WaitBatch(ctx, "act1", "batch1", 3*time.Second) }, nil, "/activity-api/v1/activity/act1/exec/batch1?timeout=3", ""},
		{"activity state", 200, yagna.NewActivityState(yagna.StateReady, ""), func(ctx context.Context) (any, error) { return c.GetActivityState(ctx, "act1") },
			yagna.NewActivityState(yagna.StateReady, ""), "/activity-api/v1/activity/act1/state", ""},
		{"activity state terminated", 200, yagna.ActivityState{State: yagna.NewActivityState(yagna.StateTerminated, "").State, Reason: "died", ErrorMessage: "exit 137"},
			func(ctx context.Context) (any, error) { return c.GetActivityState(ctx, "act1") }, nil, "/activity-api/v1/activity/act1/state", ""},
		{"activity usage", 200, yagna.ActivityUsage{CurrentUsage: []float64{1.5, 3}, Timestamp: t0.Unix()}, func(ctx context.Context) (any, error) { return c.GetActivityUsage(ctx, "act1") }, nil, "/activity-api/v1/activity/act1/usage", ""},
		{"activity agreement", 200, "a1", func(ctx context.Context) (any, error) { return c.GetActivityAgreement(ctx, "act1") }, "a1", "/activity-api/v1/activity/act1/agreement", ""},
		{"destroy activity", 200, json.RawMessage("null"), func(ctx context.Context) (any, error) { return nil, c.DestroyActivity(ctx, "act1") }, nil, "/activity-api/v1/activity/act1", ""},

		// payment: debit notes and invoices
		{"debit note events", 200, []yagna.DebitNoteEvent{{EventType: yagna.EventDebitNoteReceived, EventDate: t0, DebitNoteID: "dn1"}},
			func(ctx context.Context) (any, error) { return c.DebitNoteEvents(ctx, 5*time.Second, time.Time{}, 0) },
			[]yagna.DebitNoteEvent{{EventType: yagna.EventDebitNoteReceived, EventDate: t0, DebitNoteID: "dn1"}}, "/payment-api/v1/debitNoteEvents?timeout=5", ""},
		{"get debit note", 200, dn, func(ctx context.Context) (any, error) { return c.GetDebitNote(ctx, "dn1") }, dn, "/payment-api/v1/debitNotes/dn1", ""},
		{"debit notes", 200, []yagna.DebitNote{dn}, func(ctx context.Context) (any, error) { return c.DebitNotes(ctx, t0, 5) }, nil, "/payment-api/v1/debitNotes?afterTimestamp=2026-11-22T10%3A00%3A00Z&maxItems=5", ""},
		{"accept debit note", 200, nil, func(ctx context.Context) (any, error) {
			return nil, c.AcceptDebitNote(ctx, "dn1", yagna.DebitNoteAcceptance{TotalAmountAccepted: "0.01", AllocationID: "al1"}, 10*time.Second)
		}, nil, "/payment-api/v1/debitNotes/dn1/accept?timeout=10", `{"totalAmountAccepted":"0.01","allocationId":"al1"}`},
		{"reject debit note", 200, nil, func(ctx context.Context) (any, error) {
			return nil, c.RejectDebitNote(ctx, "dn1", yagna.Rejection{RejectionReason: yagna.RejectIncorrectAmount, TotalAmountAccepted: "0"}, -1)
		}, nil, "/payment-api/v1/debitNotes/dn1/reject", `{"rejectionReason":"INCORRECT_AMOUNT","totalAmountAccepted":"0"}`},
		{"invoice events", 200, []yagna.InvoiceEvent{{EventType: yagna.EventInvoiceReceived, EventDate: t0, InvoiceID: "i1"}},
			func(ctx context.Context) (any, error) { return c.InvoiceEvents(ctx, 0, t0, 100) }, nil, "/payment-api/v1/invoiceEvents?afterTimestamp=2026-11-22T10%3A00%3A00Z&maxEvents=100&timeout=0", ""},
		{"get invoice", 200, inv, func(ctx context.Context) (any, error) { return c.GetInvoice(ctx, "i1") }, inv, "/payment-api/v1/invoices/i1", ""},
		{"invoices", 200, []yagna.Invoice{inv}, func(ctx context.Context) (any, error) { return c.Invoices(ctx, time.Time{}, 0) }, nil, "/payment-api/v1/invoices", ""},
		{"accept invoice", 200, nil, func(ctx context.Context) (any, error) {
			return nil, c.AcceptInvoice(ctx, "i1", yagna.Acceptance{TotalAmountAccepted: "0.02", AllocationID: "al1"}, 10*time.Second)
		}, nil, "/payment-api/v1/invoices/i1/accept?timeout=10", `{"totalAmountAccepted":"0.02","allocationId":"al1"}`},
		{"reject invoice", 200, nil, func(ctx context.Context) (any, error) {
			return nil, c.RejectInvoice(ctx, "i1", yagna.Rejection{RejectionReason: yagna.RejectBadService, TotalAmountAccepted: "0", Message: "down"}, 1*time.Second)
		}, nil, "/payment-api/v1/invoices/i1/reject?timeout=1", `{"rejectionReason":"BAD_SERVICE","totalAmountAccepted":"0","message":"down"}`},

		// the usual errors, with {"message"} bodies
		{"delete gone network", 404, yagna.ErrorMessage{Message: "network not found"}, func(ctx context.Context) (any, error) { return nil, c.DeleteNetwork(ctx, "n1") }, nil, "/net-api/v1/net/n1", ""},
		{"remove node", 200, json.RawMessage("null"), func(ctx context.Context) (any, error) { return nil, c.RemoveNode(ctx, "n1", "0xp") }, nil, "/net-api/v1/net/n1/nodes/0xp", ""},
		{"agreement from an Initial proposal", 409, yagna.ErrorMessage{Message: "proposal not negotiated"}, func(ctx context.Context) (any, error) { return c.CreateAgreement(ctx, "p1", t1) }, nil, "/market-api/v1/agreements", ""},
		{"wait times out", 408, yagna.ErrorMessage{Message: "timeout"}, func(ctx context.Context) (any, error) { return nil, c.WaitForApproval(ctx, "a1", 0) }, nil, "/market-api/v1/agreements/a1/wait?timeout=0", ""},
		{"terminate twice", 410, yagna.ErrorMessage{Message: "Terminated"}, func(ctx context.Context) (any, error) { return nil, c.TerminateAgreement(ctx, "a1", nil) }, nil, "/market-api/v1/agreements/a1/terminate", ""},
		{"bad key", 401, yagna.ErrorMessage{Message: "invalid app key"}, func(ctx context.Context) (any, error) { return c.Me(ctx) }, nil, "/me", ""},
		// yagna's RFC 7807 answer to an allocation beyond the funds (core/payment/src/api/allocations/api_error.rs)
		{"allocation beyond the funds", 400, insufficientFunds, func(ctx context.Context) (any, error) {
			return c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "5"})
		}, nil, "/payment-api/v1/allocations", `{"totalAmount":"5","makeDeposit":false}`},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.set(tt.status, tt.answer)
			got, err := tt.call(ctx)
			if tt.status >= 300 {
				if yagna.StatusOf(err) != tt.status {
					t.Fatalf("err = %v, want status %d", err, tt.status)
				}
				if strings.Contains(err.Error(), key) {
					t.Fatalf("error leaks the key: %v", err)
				}
			} else if err != nil {
				t.Fatalf("call: %v", err)
			}
			ex := f.last()
			if ex.auth != "Bearer "+key {
				t.Errorf("Authorization = %q", ex.auth)
			}
			if ex.target != tt.wantTarget {
				t.Errorf("target = %s, want %s", ex.target, tt.wantTarget)
			}
			if tt.wantBody != "" && !jsonEqual(ex.body, tt.wantBody) {
				t.Errorf("body\n got %s\nwant %s", ex.body, tt.wantBody)
			}
			if tt.want != nil && err == nil && !reflect.DeepEqual(normalize(t, got), normalize(t, tt.want)) {
				t.Errorf("result\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	clientSide.Report(t)
	serverSide.Report(t)

	// every call of the "Renting one VM" table and the payment/VPN sections
	want := []string{
		"getIdentity", "createAllocation", "getAllocation", "releaseAllocation", "getDemandDecorations",
		"subscribeDemand", "unsubscribeDemand", "collectOffers", "counterProposalDemand", "rejectProposalOffer",
		"createAgreement", "confirmAgreement", "waitForApproval", "getAgreement", "terminateAgreement",
		"createActivity", "exec", "getExecBatchResults", "GetActivityState", "DestroyActivity",
		"getDebitNoteEvents", "getDebitNote", "acceptDebitNote", "getInvoiceEvents", "getInvoice", "acceptInvoice",
		"createNetwork", "getNetwork", "getNetworks", "removeNetwork", "addAddress", "getAddresses",
		"addNode", "getNodes", "removeNode",
	}
	seen := clientSide.Seen()
	var missing []string
	for _, id := range want {
		if seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations never exercised: %v", missing)
	}
}

// TestExeScriptAgainstSpec checks the commands the client builds against the
// ExeScript command schemas of activity-api.yaml (the exec body only carries
// them as text, so the request check cannot).
func TestExeScriptAgainstSpec(t *testing.T) {
	script, err := yagna.ExeScript(
		yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: "n1", IP: "192.168.0.0", Mask: "255.255.255.0", NodeIP: "192.168.0.2"}}}},
		yagna.ExeScriptCommand{Start: &yagna.StartCommand{Args: []string{}}},
		yagna.ExeScriptCommand{Run: &yagna.RunCommand{EntryPoint: "/bin/sh", Args: []string{"-c", "true"}, Capture: yagna.CaptureAtEndString()}},
		yagna.ExeScriptCommand{Transfer: &yagna.TransferCommand{From: "http://x/a", To: "container:/a"}},
		yagna.ExeScriptCommand{Terminate: &struct{}{}},
	)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []json.RawMessage
	if err := json.Unmarshal([]byte(script.Text), &cmds); err != nil {
		t.Fatal(err)
	}
	s, err := openapi.Default()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"DeployCommand", "StartCommand", "RunCommand", "TransferCommand", "TerminateCommand"}
	for i, raw := range cmds {
		err := s.CheckSchema("activity-api.yaml", names[i], raw, true)
		if err == nil {
			continue
		}
		var v *openapi.Violations
		if !errors.As(err, &v) {
			t.Fatalf("command %d: %v", i, err)
		}
		for _, p := range v.Problems {
			// Known gap: the spec's DeployNetwork lists id, ip and mask only, but
			// yagna (ya-client-model exe_script_command.rs) requires nodeIp.
			if strings.HasPrefix(p, "$.deploy.net[0].nodeIp: member not declared") {
				continue
			}
			t.Errorf("command %d (%s): %s", i, names[i], p)
		}
	}
}

func TestDialTCP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key || r.URL.Path != "/net-api/v1/net/n1/tcp/192.168.0.2/80" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"message":"no"}`)
			return
		}
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := r.Context()
		for {
			typ, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if err := conn.Write(ctx, typ, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	nc, err := yagna.New(srv.URL, key).DialTCPConn(ctx, "n1", "192.168.0.2", 80)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write([]byte("GET /")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := nc.Read(buf)
	if err != nil || string(buf[:n]) != "echo:GET /" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	_ = nc.Close()

	_, err = yagna.New(srv.URL, "wrong-key").DialTCP(ctx, "n1", "192.168.0.2", 80)
	if yagna.StatusOf(err) != 401 || strings.Contains(err.Error(), "wrong-key") {
		t.Fatalf("dial with a bad key: %v", err)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// normalize compares through JSON so []string vs []any and time zones do not matter.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	return x
}
