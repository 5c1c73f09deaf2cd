package yagna

import (
	"encoding/json"
	"fmt"
	"time"
)

// The types below mirror the schemas of golemfactory/ya-client specs/*.yaml
// (copies in adapters/golem/openapi/testdata/specs). JSON names are exactly the
// specs'. Where a schema is used both as a request and as a response and has
// readOnly required fields, there are two Go types: the request one (New...,
// ...Base) without them and the response one with them, so that neither side
// sends zero values it should not.

// ErrorMessage is the body of every error answer: {"message": "..."}.
type ErrorMessage struct {
	Message string `json:"message,omitempty"`
}

// Problem is an RFC 7807 problem details body (Content-Type
// application/problem+json), which yagna answers instead of ErrorMessage where
// it says more than a message: allocation validation (insufficient funds,
// account not registered, a platform that does not parse) in
// core/payment/src/api/allocations/api_error.rs. The spec's ErrorMessage
// allows these members (it has no additionalProperties: false).
type Problem struct {
	Type     string `json:"type,omitempty"`
	Title    string `json:"title,omitempty"`
	Status   int    `json:"status,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Extensions are the other members (requestedFunds, availableFunds,
	// reservedFunds, paymentPlatform, address, requestBody, ...).
	Extensions map[string]any `json:"-"`
}

// Reason (common.yaml) is a free-form reason with a required message; extra
// members (e.g. "golem.requestor.code") are kept in Extra.
type Reason struct {
	Message string
	Extra   map[string]any
}

// MarshalJSON writes message and the extra members in one object.
func (r Reason) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(r.Extra)+1)
	for k, v := range r.Extra {
		m[k] = v
	}
	m["message"] = r.Message
	return json.Marshal(m)
}

// UnmarshalJSON reads message and keeps the other members in Extra.
func (r *Reason) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*r = Reason{}
	if msg, ok := m["message"]; ok {
		s, ok := msg.(string)
		if !ok {
			return fmt.Errorf("reason: message is %T, not a string", msg)
		}
		r.Message = s
		delete(m, "message")
	}
	if len(m) > 0 {
		r.Extra = m
	}
	return nil
}

// ----- Market API (market-api.yaml) -----

// DemandOfferBase is what a Demand, an Offer or a counter-proposal is made of:
// flat dotted properties and a constraint filter. It is the request body of
// subscribeDemand, subscribeOffer and counterProposal*.
type DemandOfferBase struct {
	Properties  map[string]any `json:"properties"`
	Constraints string         `json:"constraints"`
}

// Demand is a published Demand.
type Demand struct {
	Properties  map[string]any `json:"properties"`
	Constraints string         `json:"constraints"`
	DemandID    string         `json:"demandId"`
	RequestorID string         `json:"requestorId"`
	Timestamp   time.Time      `json:"timestamp"`
}

// Offer is a published Offer.
type Offer struct {
	Properties  map[string]any `json:"properties"`
	Constraints string         `json:"constraints"`
	OfferID     string         `json:"offerId"`
	ProviderID  string         `json:"providerId"`
	Timestamp   time.Time      `json:"timestamp"`
}

// ProposalState is a Proposal's state.
type ProposalState string

// Proposal states.
const (
	ProposalInitial  ProposalState = "Initial"
	ProposalDraft    ProposalState = "Draft"
	ProposalRejected ProposalState = "Rejected"
	ProposalAccepted ProposalState = "Accepted"
	ProposalExpired  ProposalState = "Expired"
)

// Proposal is an Offer (for a requestor) or Demand (for a provider) in negotiation.
type Proposal struct {
	Properties     map[string]any `json:"properties"`
	Constraints    string         `json:"constraints"`
	ProposalID     string         `json:"proposalId"`
	IssuerID       string         `json:"issuerId"`
	State          ProposalState  `json:"state"`
	Timestamp      time.Time      `json:"timestamp"`
	PrevProposalID string         `json:"prevProposalId,omitempty"`
}

// Market event types (the eventType discriminator).
const (
	EventProposal              = "ProposalEvent"
	EventProposalRejected      = "ProposalRejectedEvent"
	EventPropertyQuery         = "PropertyQueryEvent"
	EventAgreement             = "AgreementEvent"
	EventAgreementApproved     = "AgreementApprovedEvent"
	EventAgreementRejected     = "AgreementRejectedEvent"
	EventAgreementCancelled    = "AgreementCancelledEvent"
	EventAgreementTerminated   = "AgreementTerminatedEvent"
	EventDebitNoteReceived     = "DebitNoteReceivedEvent"
	EventDebitNoteAccepted     = "DebitNoteAcceptedEvent"
	EventDebitNoteRejected     = "DebitNoteRejectedEvent"
	EventDebitNoteCancelled    = "DebitNoteCancelledEvent"
	EventDebitNoteSettled      = "DebitNoteSettledEvent"
	EventDebitNoteFailed       = "DebitNoteFailedEvent"
	EventDebitNotePaymentOk    = "DebitNotePaymentOkEvent"
	EventDebitNotePaymentState = "DebitNotePaymentStatusEvent"
	EventInvoiceReceived       = "InvoiceReceivedEvent"
	EventInvoiceAccepted       = "InvoiceAcceptedEvent"
	EventInvoiceRejected       = "InvoiceRejectedEvent"
	EventInvoiceCancelled      = "InvoiceCancelledEvent"
	EventInvoiceSettled        = "InvoiceSettledEvent"
	EventInvoiceFailed         = "InvoiceFailedEvent"
	EventInvoicePaymentOk      = "InvoicePaymentOkEvent"
	EventInvoicePaymentState   = "InvoicePaymentStatusEvent"
)

// MarketEvent is one element of collectOffers / collectDemands: the union of
// ProposalEvent, ProposalRejectedEvent, PropertyQueryEvent and AgreementEvent,
// told apart by EventType. Only the fields of its type are set.
type MarketEvent struct {
	EventType string    `json:"eventType"`
	EventDate time.Time `json:"eventDate"`
	// ProposalEvent
	Proposal *Proposal `json:"proposal,omitempty"`
	// ProposalRejectedEvent
	ProposalID string  `json:"proposalId,omitempty"`
	Reason     *Reason `json:"reason,omitempty"`
	// PropertyQueryEvent
	PropertyQuery *PropertyQuery `json:"propertyQuery,omitempty"`
	// AgreementEvent
	Agreement *Agreement `json:"agreement,omitempty"`
}

// ProposalEvent is a new Proposal for a subscription.
type ProposalEvent struct {
	EventType string    `json:"eventType"` // "ProposalEvent"
	EventDate time.Time `json:"eventDate"`
	Proposal  Proposal  `json:"proposal"`
}

// NewProposalEvent builds a ProposalEvent with its eventType set.
func NewProposalEvent(at time.Time, p Proposal) ProposalEvent {
	return ProposalEvent{EventType: EventProposal, EventDate: at, Proposal: p}
}

// ProposalRejectedEvent says the other side rejected our Proposal.
type ProposalRejectedEvent struct {
	EventType  string    `json:"eventType"` // "ProposalRejectedEvent"
	EventDate  time.Time `json:"eventDate"`
	ProposalID string    `json:"proposalId"`
	Reason     *Reason   `json:"reason,omitempty"`
}

// NewProposalRejectedEvent builds a ProposalRejectedEvent with its eventType set.
func NewProposalRejectedEvent(at time.Time, proposalID string, reason *Reason) ProposalRejectedEvent {
	return ProposalRejectedEvent{EventType: EventProposalRejected, EventDate: at, ProposalID: proposalID, Reason: reason}
}

// PropertyQuery asks for dynamic properties.
type PropertyQuery struct {
	IssuerProperties  map[string]any `json:"issuerProperties,omitempty"`
	QueryID           string         `json:"queryId,omitempty"`
	QueriedProperties []string       `json:"queriedProperties"`
}

// PropertyQueryEvent carries a PropertyQuery.
type PropertyQueryEvent struct {
	EventType     string        `json:"eventType"` // "PropertyQueryEvent"
	EventDate     time.Time     `json:"eventDate"`
	PropertyQuery PropertyQuery `json:"propertyQuery"`
}

// AgreementEvent (provider side) asks to approve an Agreement.
type AgreementEvent struct {
	EventType string    `json:"eventType"` // "AgreementEvent"
	EventDate time.Time `json:"eventDate"`
	Agreement Agreement `json:"agreement"`
}

// AgreementListEntry is one entry of listAgreements, as yagna serializes it:
// id, timestamp, approvedDate (null until approved) and role (ya-client-model
// model/src/market/agreement.rs AgreementListEntry at the rev yagna pins,
// b4bf2aa, camelCase; built in core/market/src/market.rs list_agreements).
type AgreementListEntry struct {
	ID           string     `json:"id"`
	Timestamp    time.Time  `json:"timestamp"`
	ApprovedDate *time.Time `json:"approvedDate"`
	Role         string     `json:"role"`
}

// AgreementProposal is the body of createAgreement.
type AgreementProposal struct {
	ProposalID string    `json:"proposalId"`
	ValidTo    time.Time `json:"validTo"`
}

// AgreementState is an Agreement's state.
type AgreementState string

// Agreement states.
const (
	AgreementProposalState AgreementState = "Proposal"
	AgreementPending       AgreementState = "Pending"
	AgreementCancelled     AgreementState = "Cancelled"
	AgreementRejected      AgreementState = "Rejected"
	AgreementApproved      AgreementState = "Approved"
	AgreementExpired       AgreementState = "Expired"
	AgreementTerminated    AgreementState = "Terminated"
)

// Agreement is the answer of getAgreement.
type Agreement struct {
	AgreementID        string         `json:"agreementId"`
	Demand             Demand         `json:"demand"`
	Offer              Offer          `json:"offer"`
	ValidTo            time.Time      `json:"validTo"`
	ApprovedDate       *time.Time     `json:"approvedDate,omitempty"`
	State              AgreementState `json:"state"`
	Timestamp          time.Time      `json:"timestamp"`
	AppSessionID       string         `json:"appSessionId,omitempty"`
	ProposedSignature  string         `json:"proposedSignature,omitempty"`
	ApprovedSignature  string         `json:"approvedSignature,omitempty"`
	CommittedSignature string         `json:"committedSignature,omitempty"`
}

// ProviderName is the offer's golem.node.id.name, or "".
func (a Agreement) ProviderName() string {
	s, _ := a.Offer.Properties["golem.node.id.name"].(string)
	return s
}

// AgreementOperationEvent is one element of collectAgreementEvents: the union of
// AgreementApprovedEvent, AgreementRejectedEvent, AgreementCancelledEvent and
// AgreementTerminatedEvent, told apart by EventType.
type AgreementOperationEvent struct {
	EventType   string    `json:"eventType"`
	EventDate   time.Time `json:"eventDate"`
	AgreementID string    `json:"agreementId"`
	Reason      *Reason   `json:"reason,omitempty"`
	// AgreementTerminatedEvent: "Requestor" or "Provider", and a signature.
	Terminator string `json:"terminator,omitempty"`
	Signature  string `json:"signature,omitempty"`
}

// Terminators of an AgreementTerminatedEvent, spelt as yagna serializes
// them (ya-client-model src/market/agreement_event.rs AgreementTerminator:
// serde renames Requestor and Provider as they are, capitalised).
const (
	TerminatorRequestor = "Requestor"
	TerminatorProvider  = "Provider"
)

// ----- Activity API (activity-api.yaml) -----

// CreateActivityRequest is the body of createActivity.
type CreateActivityRequest struct {
	AgreementID     string `json:"agreementId"`
	RequestorPubKey string `json:"requestorPubKey,omitempty"`
}

// CreateActivityResult is the answer of createActivity (newer servers; older
// ones answer a bare JSON string, which the client also accepts).
type CreateActivityResult struct {
	ActivityID  string       `json:"activityId"`
	Credentials *Credentials `json:"credentials,omitempty"`
}

// Credentials of an SGX activity.
type Credentials struct {
	Sgx SgxCredentials `json:"sgx"`
}

// SgxCredentials of an SGX enclave.
type SgxCredentials struct {
	EnclavePubKey   string `json:"enclavePubKey"`
	RequestorPubKey string `json:"requestorPubKey"`
	PayloadHash     string `json:"payloadHash"`
	IasReport       string `json:"iasReport"`
	IasSig          string `json:"iasSig"`
}

// ExeScriptRequest is the body of exec: the script is a JSON array of commands
// serialized into Text.
type ExeScriptRequest struct {
	Text string `json:"text"`
}

// ExeScriptCommand is one command of an ExeScript; exactly one field is set.
type ExeScriptCommand struct {
	Deploy    *DeployCommand   `json:"deploy,omitempty"`
	Start     *StartCommand    `json:"start,omitempty"`
	Run       *RunCommand      `json:"run,omitempty"`
	Transfer  *TransferCommand `json:"transfer,omitempty"`
	Sign      *struct{}        `json:"sign,omitempty"`
	Terminate *struct{}        `json:"terminate,omitempty"`
}

// DeployCommand deploys the image; Net joins the VPNs.
type DeployCommand struct {
	Net   []DeployNetwork   `json:"net,omitempty"`
	Hosts map[string]string `json:"hosts,omitempty"`
	// Volumes is free-form (a list of paths or a map of mounts).
	Volumes  any           `json:"volumes,omitempty"`
	Progress *ProgressArgs `json:"progress,omitempty"`
}

// DeployNetwork is a VPN the activity joins. The spec lists id, ip and mask;
// yagna (ya-client-model) also requires nodeIp, the activity's own address, and
// takes nodes (IP -> node id).
type DeployNetwork struct {
	ID      string            `json:"id"`
	IP      string            `json:"ip"`
	Mask    string            `json:"mask"`
	Gateway string            `json:"gateway,omitempty"`
	NodeIP  string            `json:"nodeIp,omitempty"`
	Nodes   map[string]string `json:"nodes,omitempty"`
}

// ProgressArgs asks for progress events.
type ProgressArgs struct {
	UpdateInterval string `json:"update-interval,omitempty"`
	UpdateStep     *int64 `json:"update-step,omitempty"`
}

// StartCommand starts the deployed image.
type StartCommand struct {
	Args []string `json:"args"`
}

// RunCommand runs a program in the activity.
type RunCommand struct {
	EntryPoint string   `json:"entry_point"`
	Args       []string `json:"args"`
	Capture    *Capture `json:"capture,omitempty"`
}

// TransferCommand copies a file.
type TransferCommand struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Format string `json:"format,omitempty"`
	Depth  *int   `json:"depth,omitempty"`
}

// Capture says how to capture a command's output.
type Capture struct {
	Stdout *CaptureMode `json:"stdout,omitempty"`
	Stderr *CaptureMode `json:"stderr,omitempty"`
}

// CaptureMode is atEnd or stream.
type CaptureMode struct {
	AtEnd  *CaptureAtEnd  `json:"atEnd,omitempty"`
	Stream *CaptureStream `json:"stream,omitempty"`
}

// CaptureAtEnd captures everything, delivered when the command ends.
type CaptureAtEnd struct {
	Format CaptureFormat `json:"format,omitempty"`
}

// CaptureStream captures output as it comes.
type CaptureStream struct {
	Limit  *int          `json:"limit,omitempty"`
	Format CaptureFormat `json:"format,omitempty"`
}

// CaptureFormat is the output encoding. The spec's enum is string/binary; yagna
// also accepts str/bin (its canonical spelling) — a server should accept both.
type CaptureFormat string

// Capture formats, as the spec spells them.
const (
	CaptureString CaptureFormat = "string"
	CaptureBinary CaptureFormat = "binary"
)

// CaptureAtEndString is the usual capture: both streams as strings at the end.
func CaptureAtEndString() *Capture {
	return &Capture{
		Stdout: &CaptureMode{AtEnd: &CaptureAtEnd{Format: CaptureString}},
		Stderr: &CaptureMode{AtEnd: &CaptureAtEnd{Format: CaptureString}},
	}
}

// ExeScript serializes commands into an ExeScriptRequest.
func ExeScript(cmds ...ExeScriptCommand) (ExeScriptRequest, error) {
	b, err := json.Marshal(cmds)
	if err != nil {
		return ExeScriptRequest{}, fmt.Errorf("encoding exe script: %w", err)
	}
	return ExeScriptRequest{Text: string(b)}, nil
}

// Command results.
const (
	ResultOk    = "Ok"
	ResultError = "Error"
)

// ExeScriptCommandResult is one element of getExecBatchResults. Stdout, stderr
// and message may arrive as null; they decode as "".
type ExeScriptCommandResult struct {
	Index           int       `json:"index"`
	EventDate       time.Time `json:"eventDate"`
	Result          string    `json:"result"` // "Ok" or "Error"
	Stdout          string    `json:"stdout,omitempty"`
	Stderr          string    `json:"stderr,omitempty"`
	Message         string    `json:"message,omitempty"`
	IsBatchFinished bool      `json:"isBatchFinished"`
}

// ExeScriptCommandState is one element of GetRunningCommand.
type ExeScriptCommandState struct {
	BatchID  string   `json:"batchId"`
	Command  string   `json:"command"`
	Progress string   `json:"progress,omitempty"`
	Params   []string `json:"params,omitempty"`
}

// StateName is one of an activity's states.
type StateName string

// Activity states.
const (
	StateNew          StateName = "New"
	StateInitialized  StateName = "Initialized"
	StateDeployed     StateName = "Deployed"
	StateReady        StateName = "Ready"
	StateUnresponsive StateName = "Unresponsive"
	StateTerminated   StateName = "Terminated"
)

// ActivityState is the answer of GetActivityState: State is the pair
// (current, next), next nil when no transition is pending.
type ActivityState struct {
	State        [2]*StateName `json:"state"`
	Reason       string        `json:"reason,omitempty"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
}

// NewActivityState builds a state pair; next "" means null.
func NewActivityState(current, next StateName) ActivityState {
	var s ActivityState
	c := current
	s.State[0] = &c
	if next != "" {
		n := next
		s.State[1] = &n
	}
	return s
}

// Current is the current state ("" if missing).
func (s ActivityState) Current() StateName {
	if s.State[0] == nil {
		return ""
	}
	return *s.State[0]
}

// Next is the pending state, "" when none.
func (s ActivityState) Next() StateName {
	if s.State[1] == nil {
		return ""
	}
	return *s.State[1]
}

// ActivityUsage is the answer of GetActivityUsage.
type ActivityUsage struct {
	CurrentUsage []float64 `json:"currentUsage,omitempty"`
	Timestamp    int64     `json:"timestamp"`
}

// ----- Payment API (payment-api.yaml) -----

// PaymentPlatform is either a platform name ("erc20-holesky-tglm") or the
// object {driver, network, token}; Name set means the string form.
type PaymentPlatform struct {
	Name    string
	Driver  string
	Network string
	Token   string
}

// MarshalJSON writes the string form when Name is set, else the object.
func (p PaymentPlatform) MarshalJSON() ([]byte, error) {
	if p.Name != "" {
		return json.Marshal(p.Name)
	}
	type obj struct {
		Driver  string `json:"driver,omitempty"`
		Network string `json:"network,omitempty"`
		Token   string `json:"token,omitempty"`
	}
	return json.Marshal(obj{p.Driver, p.Network, p.Token})
}

// UnmarshalJSON reads either form.
func (p *PaymentPlatform) UnmarshalJSON(b []byte) error {
	*p = PaymentPlatform{}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &p.Name)
	}
	var o struct {
		Driver  string `json:"driver"`
		Network string `json:"network"`
		Token   string `json:"token"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("payment platform: %w", err)
	}
	p.Driver, p.Network, p.Token = o.Driver, o.Network, o.Token
	return nil
}

// Account is a payment account (wallet) of the requestor, as
// getRequestorAccounts lists it: one per platform the identity is initialised
// on (yagna core/payment/src/api/accounts.rs). It says nothing of the funds.
type Account struct {
	Platform string `json:"platform"`
	Address  string `json:"address"`
	Driver   string `json:"driver"`
	Network  string `json:"network"`
	Token    string `json:"token"`
	Send     bool   `json:"send"`
	Receive  bool   `json:"receive"`
}

// Deposit of an allocation.
type Deposit struct {
	ID       string         `json:"id"`
	Contract string         `json:"contract"`
	Validate map[string]any `json:"validate,omitempty"`
}

// NewAllocation is the body of createAllocation (the Allocation schema without
// its readOnly members).
type NewAllocation struct {
	Address         string           `json:"address,omitempty"`
	PaymentPlatform *PaymentPlatform `json:"paymentPlatform,omitempty"`
	TotalAmount     string           `json:"totalAmount"`
	Timeout         *time.Time       `json:"timeout,omitempty"`
	MakeDeposit     bool             `json:"makeDeposit"`
	ExtendTimeout   *int64           `json:"extendTimeout,omitempty"`
	Deposit         *Deposit         `json:"deposit,omitempty"`
	// CreatedTS and UpdatedTS are in every allocation yagna answers
	// (ya-client-model model/src/payment/allocation.rs Allocation created_ts,
	// updated_ts at the rev yagna pins); the spec leaves them out.
	CreatedTS *time.Time `json:"createdTs,omitempty"`
	UpdatedTS *time.Time `json:"updatedTs,omitempty"`
}

// Allocation is the answer of createAllocation / getAllocation.
type Allocation struct {
	AllocationID    string           `json:"allocationId"`
	Address         string           `json:"address,omitempty"`
	PaymentPlatform *PaymentPlatform `json:"paymentPlatform,omitempty"`
	TotalAmount     string           `json:"totalAmount"`
	SpentAmount     string           `json:"spentAmount"`
	RemainingAmount string           `json:"remainingAmount"`
	Timestamp       time.Time        `json:"timestamp"`
	Timeout         *time.Time       `json:"timeout,omitempty"`
	MakeDeposit     bool             `json:"makeDeposit"`
	ExtendTimeout   *int64           `json:"extendTimeout,omitempty"`
	Deposit         *Deposit         `json:"deposit,omitempty"`
	// CreatedTS and UpdatedTS are in every allocation yagna answers
	// (ya-client-model model/src/payment/allocation.rs Allocation created_ts,
	// updated_ts at the rev yagna pins); the spec leaves them out.
	CreatedTS *time.Time `json:"createdTs,omitempty"`
	UpdatedTS *time.Time `json:"updatedTs,omitempty"`
}

// AllocationUpdate is the body of amendAllocation.
type AllocationUpdate struct {
	TotalAmount string     `json:"totalAmount,omitempty"`
	Timeout     *time.Time `json:"timeout,omitempty"`
}

// MarketProperty is one decoration property.
type MarketProperty struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// MarketDecoration is the answer of getDemandDecorations.
type MarketDecoration struct {
	Properties  []MarketProperty `json:"properties"`
	Constraints []string         `json:"constraints"`
}

// DemandDecoration is the name yagna-rest.md uses for MarketDecoration.
type DemandDecoration = MarketDecoration

// InvoiceStatus is the status of an Invoice or DebitNote.
type InvoiceStatus string

// Invoice / debit note statuses.
const (
	StatusIssued    InvoiceStatus = "ISSUED"
	StatusReceived  InvoiceStatus = "RECEIVED"
	StatusAccepted  InvoiceStatus = "ACCEPTED"
	StatusRejected  InvoiceStatus = "REJECTED"
	StatusFailed    InvoiceStatus = "FAILED"
	StatusSettled   InvoiceStatus = "SETTLED"
	StatusCancelled InvoiceStatus = "CANCELLED"
)

// DebitNote is the answer of getDebitNote.
type DebitNote struct {
	DebitNoteID         string        `json:"debitNoteId"`
	IssuerID            string        `json:"issuerId"`
	RecipientID         string        `json:"recipientId"`
	PayeeAddr           string        `json:"payeeAddr"`
	PayerAddr           string        `json:"payerAddr"`
	PaymentPlatform     string        `json:"paymentPlatform"`
	PreviousDebitNoteID string        `json:"previousDebitNoteId,omitempty"`
	Timestamp           time.Time     `json:"timestamp"`
	AgreementID         string        `json:"agreementId"`
	ActivityID          string        `json:"activityId"`
	TotalAmountDue      string        `json:"totalAmountDue"`
	UsageCounterVector  UsageVector   `json:"usageCounterVector,omitempty"`
	PaymentDueDate      *time.Time    `json:"paymentDueDate,omitempty"`
	Status              InvoiceStatus `json:"status"`
}

// UsageVector is a debit note's usageCounterVector: the provider's usage as
// a JSON array of numbers, one per counter of the agreed offer's
// golem.com.usage.vector, in that order (agent/provider/src/payments/payments.rs
// send_debit_note: usage_counter_vector: Some(json!(cost_info.usage)), a
// Vec<f64>). ya-client-model types it as any JSON value
// (model/src/payment/debit_note.rs, Option<serde_json::Value>), so another
// shape decodes to nil rather than failing the whole note: the keeper needs
// the note's id and amount, not its usage.
type UsageVector []float64

// UnmarshalJSON reads an array of numbers; null or any other shape is nil.
func (u *UsageVector) UnmarshalJSON(b []byte) error {
	var v []float64
	if err := json.Unmarshal(b, &v); err != nil {
		*u = nil
		return nil
	}
	*u = v
	return nil
}

// Invoice is the answer of getInvoice.
type Invoice struct {
	InvoiceID       string        `json:"invoiceId"`
	IssuerID        string        `json:"issuerId"`
	RecipientID     string        `json:"recipientId"`
	PayeeAddr       string        `json:"payeeAddr"`
	PayerAddr       string        `json:"payerAddr"`
	PaymentPlatform string        `json:"paymentPlatform"`
	Timestamp       time.Time     `json:"timestamp"`
	AgreementID     string        `json:"agreementId"`
	ActivityIDs     []string      `json:"activityIds,omitempty"`
	Amount          string        `json:"amount"`
	PaymentDueDate  time.Time     `json:"paymentDueDate"`
	Status          InvoiceStatus `json:"status"`
}

// DebitNoteAcceptance is the body of acceptDebitNote.
type DebitNoteAcceptance struct {
	TotalAmountAccepted string `json:"totalAmountAccepted"`
	AllocationID        string `json:"allocationId"`
	AutoAcceptTo        string `json:"autoAcceptTo,omitempty"`
}

// Acceptance is the body of acceptInvoice.
type Acceptance struct {
	TotalAmountAccepted string `json:"totalAmountAccepted"`
	AllocationID        string `json:"allocationId"`
}

// RejectionReason says why a debit note or invoice is rejected.
type RejectionReason string

// Rejection reasons.
const (
	RejectUnsolicitedService RejectionReason = "UNSOLICITED_SERVICE"
	RejectBadService         RejectionReason = "BAD_SERVICE"
	RejectIncorrectAmount    RejectionReason = "INCORRECT_AMOUNT"
)

// Rejection is the body of rejectDebitNote / rejectInvoice.
type Rejection struct {
	RejectionReason     RejectionReason `json:"rejectionReason"`
	TotalAmountAccepted string          `json:"totalAmountAccepted"`
	Message             string          `json:"message,omitempty"`
}

// DriverStatusProperty is a payment driver problem.
type DriverStatusProperty struct {
	Kind           string `json:"kind"`
	Driver         string `json:"driver"`
	Network        string `json:"network,omitempty"`
	NeededGasEst   string `json:"neededGasEst,omitempty"`
	NeededTokenEst string `json:"neededTokenEst,omitempty"`
	Address        string `json:"address,omitempty"`
	ChainID        *int64 `json:"chainId,omitempty"`
}

// DebitNoteEvent is one element of getDebitNoteEvents (all the DebitNote*Event
// variants, told apart by EventType).
type DebitNoteEvent struct {
	EventType   string                `json:"eventType"`
	EventDate   time.Time             `json:"eventDate"`
	DebitNoteID string                `json:"debitNoteId"`
	Rejection   *Rejection            `json:"rejection,omitempty"`
	Property    *DriverStatusProperty `json:"property,omitempty"`
}

// InvoiceEvent is one element of getInvoiceEvents (all the Invoice*Event
// variants, told apart by EventType).
type InvoiceEvent struct {
	EventType string                `json:"eventType"`
	EventDate time.Time             `json:"eventDate"`
	InvoiceID string                `json:"invoiceId"`
	Rejection *Rejection            `json:"rejection,omitempty"`
	Property  *DriverStatusProperty `json:"property,omitempty"`
}

// ----- Net API (net-api.yaml) -----

// NewNetwork is the body of createNetwork. Mask and Gateway are optional; the
// spec's gateway is a string, so "no gateway" is an absent member, not null.
type NewNetwork struct {
	IP      string `json:"ip"`
	Mask    string `json:"mask,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// Network is the answer of createNetwork / getNetwork.
type Network struct {
	ID      string `json:"id"`
	IP      string `json:"ip"`
	Mask    string `json:"mask"`
	Gateway string `json:"gateway"`
}

// Address is one of the requestor's addresses in a network.
type Address struct {
	IP string `json:"ip"`
}

// Node is a node (provider) in a network.
type Node struct {
	ID string `json:"id"`
	IP string `json:"ip"`
}

// ----- Identity and version (identity-api.yaml, version-api.yaml) -----

// Identity is the answer of GET /me.
type Identity struct {
	Identity string `json:"identity"`
	Name     string `json:"name"`
	Role     string `json:"role"`
}

// VersionInfo is one yagna version.
type VersionInfo struct {
	Version     string `json:"version"`
	Name        string `json:"name"`
	Seen        bool   `json:"seen"`
	ReleaseTS   string `json:"releaseTs"`
	InsertionTS string `json:"insertionTs,omitempty"`
	UpdateTS    string `json:"updateTs,omitempty"`
}

// VersionResponse is the answer of GET /version/get.
type VersionResponse struct {
	Current VersionInfo  `json:"current"`
	Pending *VersionInfo `json:"pending,omitempty"`
}
