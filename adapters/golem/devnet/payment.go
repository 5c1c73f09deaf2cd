package devnet

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"sort"
	"strings"
	"time"
)

const paymentPrefix = "/payment-api/v1"

// ratAmount is an exact GLM amount.
type ratAmount struct{ r big.Rat }

func newAmount() *ratAmount { return &ratAmount{} }

func parseAmount(s string) (*ratAmount, error) {
	a := &ratAmount{}
	if _, ok := a.r.SetString(strings.TrimSpace(s)); !ok {
		return nil, fmt.Errorf("amount %q is not a decimal number", s)
	}
	if a.r.Sign() < 0 {
		return nil, fmt.Errorf("amount %q is negative", s)
	}
	return a, nil
}

func (a *ratAmount) String() string {
	s := a.r.FloatString(18)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "" || s == "-" {
		return "0"
	}
	return s
}

func (a *ratAmount) add(b *ratAmount) *ratAmount {
	out := &ratAmount{}
	out.r.Add(&a.r, &b.r)
	return out
}

func (a *ratAmount) sub(b *ratAmount) *ratAmount {
	out := &ratAmount{}
	out.r.Sub(&a.r, &b.r)
	return out
}

func (a *ratAmount) cmp(b *ratAmount) int { return a.r.Cmp(&b.r) }

type allocation struct {
	id, address, platform string
	total, spent          *ratAmount
	created               time.Time
	timeout               *time.Time
	makeDeposit           bool
}

type debitNote struct {
	id, prevID, agreementID, activityID string
	provider                            *provider
	platform, payer                     string
	due                                 *ratAmount
	usage                               []float64
	created                             time.Time
	status                              string
}

type invoice struct {
	id, agreementID string
	activityIDs     []string
	provider        *provider
	platform, payer string
	amount          *ratAmount
	created         time.Time
	status          string
}

type paymentEvent struct {
	EventType   string    `json:"eventType"`
	EventDate   time.Time `json:"eventDate"`
	DebitNoteID string    `json:"debitNoteId,omitempty"`
	InvoiceID   string    `json:"invoiceId,omitempty"`
}

func (s *Server) routePayment(api func(string, http.HandlerFunc)) {
	api("POST "+paymentPrefix+"/allocations", s.createAllocation)
	api("GET "+paymentPrefix+"/allocations", s.listAllocations)
	api("GET "+paymentPrefix+"/allocations/{id}", s.getAllocation)
	api("PUT "+paymentPrefix+"/allocations/{id}", s.amendAllocation)
	api("DELETE "+paymentPrefix+"/allocations/{id}", s.releaseAllocation)
	api("GET "+paymentPrefix+"/demandDecorations", s.demandDecorations)
	api("GET "+paymentPrefix+"/debitNotes", s.listDebitNotes)
	api("GET "+paymentPrefix+"/debitNotes/{id}", s.getDebitNote)
	api("POST "+paymentPrefix+"/debitNotes/{id}/accept", s.acceptDebitNote)
	api("GET "+paymentPrefix+"/debitNoteEvents", s.debitNoteEvents)
	api("GET "+paymentPrefix+"/invoices", s.listInvoices)
	api("GET "+paymentPrefix+"/invoices/{id}", s.getInvoice)
	api("POST "+paymentPrefix+"/invoices/{id}/accept", s.acceptInvoice)
	api("GET "+paymentPrefix+"/invoiceEvents", s.invoiceEvents)
}

type allocationBody struct {
	Address         string          `json:"address"`
	PaymentPlatform json.RawMessage `json:"paymentPlatform"`
	TotalAmount     string          `json:"totalAmount"`
	Timeout         *time.Time      `json:"timeout"`
	MakeDeposit     bool            `json:"makeDeposit"`
}

// platformName reads paymentPlatform as a string or as {driver, network, token}.
func platformName(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "erc20-holesky-tglm", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct{ Driver, Network, Token string }
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("paymentPlatform must be a string or {driver, network, token}")
	}
	if o.Driver == "" {
		o.Driver = "erc20"
	}
	if o.Network == "" {
		o.Network = "holesky"
	}
	if o.Token == "" {
		o.Token = "tglm"
		if o.Network == "polygon" || o.Network == "mainnet" {
			o.Token = "glm"
		}
	}
	return fmt.Sprintf("%s-%s-%s", o.Driver, o.Network, o.Token), nil
}

func (s *Server) createAllocation(w http.ResponseWriter, r *http.Request) {
	var body allocationBody
	if !readJSON(w, r, &body) {
		return
	}
	total, err := parseAmount(body.TotalAmount)
	if err != nil {
		writeError(w, http.StatusBadRequest, "totalAmount: %v", err)
		return
	}
	plat, err := platformName(body.PaymentPlatform)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &allocation{id: newID(), address: body.Address, platform: plat, total: total, spent: newAmount(), created: s.now(), timeout: body.Timeout, makeDeposit: body.MakeDeposit}
	if a.address == "" {
		a.address = s.cfg.Identity
	}
	s.allocations[a.id] = a
	writeJSON(w, http.StatusCreated, s.allocationJSON(a))
}

func (s *Server) allocationJSON(a *allocation) map[string]any {
	out := map[string]any{
		"allocationId": a.id, "address": a.address, "paymentPlatform": a.platform,
		"totalAmount": a.total.String(), "spentAmount": a.spent.String(), "remainingAmount": a.total.sub(a.spent).String(),
		"timestamp": a.created, "makeDeposit": a.makeDeposit,
	}
	if a.timeout != nil {
		out["timeout"] = a.timeout.UTC()
	}
	return out
}

func (s *Server) listAllocations(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*allocation, 0, len(s.allocations))
	for _, a := range s.allocations {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].created.Before(list[j].created) })
	out := []map[string]any{}
	for _, a := range list {
		out = append(out, s.allocationJSON(a))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) allocationOr404(w http.ResponseWriter, id string) (*allocation, bool) {
	return find(w, s.allocations, "allocation", id)
}

func (s *Server) getAllocation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.allocationOr404(w, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, s.allocationJSON(a))
	}
}

func (s *Server) amendAllocation(w http.ResponseWriter, r *http.Request) {
	var body struct {
		TotalAmount string     `json:"totalAmount"`
		Timeout     *time.Time `json:"timeout"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.allocationOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	if body.TotalAmount != "" {
		t, err := parseAmount(body.TotalAmount)
		if err != nil {
			writeError(w, http.StatusBadRequest, "totalAmount: %v", err)
			return
		}
		if t.cmp(a.spent) < 0 {
			writeError(w, http.StatusBadRequest, "totalAmount %s is below the spent amount %s", t, a.spent)
			return
		}
		a.total = t
	}
	if body.Timeout != nil {
		a.timeout = body.Timeout
	}
	writeJSON(w, http.StatusOK, s.allocationJSON(a))
}

func (s *Server) releaseAllocation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.allocationOr404(w, r.PathValue("id")); ok {
		delete(s.allocations, a.id)
		w.WriteHeader(http.StatusOK)
	}
}

func (s *Server) demandDecorations(w http.ResponseWriter, r *http.Request) {
	var ids []string
	for _, v := range r.URL.Query()["allocationIds"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		writeError(w, http.StatusBadRequest, "allocationIds is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	props := []map[string]string{}
	cons := []string{}
	seen := map[string]bool{}
	for _, id := range ids {
		a, ok := s.allocations[id]
		if !ok {
			writeError(w, http.StatusBadRequest, "allocation %s not found", id)
			return
		}
		if seen[a.platform] {
			continue
		}
		seen[a.platform] = true
		key := "golem.com.payment.platform." + a.platform + ".address"
		props = append(props, map[string]string{"key": key, "value": a.address})
		cons = append(cons, "("+key+"=*)")
	}
	props = append(props, map[string]string{"key": "golem.com.payment.protocol.version", "value": "3"})
	cons = append(cons, "(golem.com.payment.protocol.version>1)")
	writeJSON(w, http.StatusOK, map[string]any{"properties": props, "constraints": cons})
}

func (s *Server) debitNoteJSON(d *debitNote) map[string]any {
	out := map[string]any{
		"debitNoteId": d.id, "issuerId": d.provider.id, "recipientId": s.cfg.Identity,
		"payeeAddr": d.provider.id, "payerAddr": d.payer, "paymentPlatform": d.platform,
		"timestamp": d.created, "agreementId": d.agreementID, "activityId": d.activityID,
		"totalAmountDue": d.due.String(), "usageCounterVector": usageVector(d.usage), "status": d.status,
	}
	if d.prevID != "" {
		out["previousDebitNoteId"] = d.prevID
	}
	return out
}

func (s *Server) invoiceJSON(i *invoice) map[string]any {
	return map[string]any{
		"invoiceId": i.id, "issuerId": i.provider.id, "recipientId": s.cfg.Identity,
		"payeeAddr": i.provider.id, "payerAddr": i.payer, "paymentPlatform": i.platform,
		"timestamp": i.created, "agreementId": i.agreementID, "activityIds": i.activityIDs,
		"amount": i.amount.String(), "paymentDueDate": i.created.Add(time.Hour), "status": i.status,
	}
}

func (s *Server) listDebitNotes(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, byCreation(s.debitNotes, func(d *debitNote) time.Time { return d.created }, s.debitNoteJSON))
}

func (s *Server) getDebitNote(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := find(w, s.debitNotes, "debit note", r.PathValue("id"))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.debitNoteJSON(d))
}

type acceptance struct {
	TotalAmountAccepted string `json:"totalAmountAccepted"`
	AllocationID        string `json:"allocationId"`
}

// settle moves an agreement's accepted total to amount, charging the difference to the allocation.
func (s *Server) settle(w http.ResponseWriter, a *agreement, body acceptance, owed *ratAmount) bool {
	amt, err := parseAmount(body.TotalAmountAccepted)
	if err != nil {
		writeError(w, http.StatusBadRequest, "totalAmountAccepted: %v", err)
		return false
	}
	if amt.cmp(owed) != 0 {
		writeError(w, http.StatusBadRequest, "totalAmountAccepted %s differs from the amount due %s", amt, owed)
		return false
	}
	alloc, ok := s.allocations[body.AllocationID]
	if !ok {
		writeError(w, http.StatusBadRequest, "allocation %q not found", body.AllocationID)
		return false
	}
	delta := amt.sub(a.accepted)
	if delta.r.Sign() > 0 {
		if alloc.total.sub(alloc.spent).cmp(delta) < 0 {
			writeError(w, http.StatusBadRequest, "allocation %s has %s left, %s needed", alloc.id, alloc.total.sub(alloc.spent), delta)
			return false
		}
		alloc.spent = alloc.spent.add(delta)
		a.accepted = amt
	}
	return true
}

func (s *Server) acceptDebitNote(w http.ResponseWriter, r *http.Request) {
	var body acceptance
	if !readJSON(w, r, &body) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := find(w, s.debitNotes, "debit note", r.PathValue("id"))
	if !ok {
		return
	}
	if d.status == "ACCEPTED" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if !s.settle(w, s.agreements[d.agreementID], body, d.due) {
		return
	}
	// Accepting a debit note acknowledges the earlier ones of the same activity too.
	for _, o := range s.debitNotes {
		if o.activityID == d.activityID && !o.created.After(d.created) && o.status != "ACCEPTED" {
			o.status = "ACCEPTED"
			s.debitEvents = append(s.debitEvents, paymentEvent{EventType: "DebitNoteAcceptedEvent", EventDate: s.now(), DebitNoteID: o.id})
		}
	}
	s.notify()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) listInvoices(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, byCreation(s.invoices, func(i *invoice) time.Time { return i.created }, s.invoiceJSON))
}

func (s *Server) getInvoice(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := find(w, s.invoices, "invoice", r.PathValue("id"))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.invoiceJSON(i))
}

func (s *Server) acceptInvoice(w http.ResponseWriter, r *http.Request) {
	var body acceptance
	if !readJSON(w, r, &body) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := find(w, s.invoices, "invoice", r.PathValue("id"))
	if !ok {
		return
	}
	if i.status == "ACCEPTED" || i.status == "SETTLED" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if !s.settle(w, s.agreements[i.agreementID], body, i.amount) {
		return
	}
	i.status = "ACCEPTED"
	s.invEvents = append(s.invEvents, paymentEvent{EventType: "InvoiceAcceptedEvent", EventDate: s.now(), InvoiceID: i.id})
	s.notify()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) debitNoteEvents(w http.ResponseWriter, r *http.Request) {
	s.paymentEvents(w, r, func() []paymentEvent { return s.debitEvents })
}

func (s *Server) invoiceEvents(w http.ResponseWriter, r *http.Request) {
	s.paymentEvents(w, r, func() []paymentEvent { return s.invEvents })
}

// paymentEvents serves the persistent payment event lists (filtered by afterTimestamp, long-polled).
func (s *Server) paymentEvents(w http.ResponseWriter, r *http.Request, list func() []paymentEvent) {
	timeout, ok := pollTimeout(w, r)
	if !ok {
		return
	}
	max, ok := maxEvents(w, r)
	if !ok {
		return
	}
	after, ok := afterTimestamp(w, r)
	if !ok {
		return
	}
	events := longPoll(s, r.Context(), timeout, func() ([]paymentEvent, bool) {
		out := []paymentEvent{}
		for _, e := range list() {
			if e.EventDate.After(after) && len(out) < max {
				out = append(out, e)
			}
		}
		return out, len(out) > 0
	})
	writeJSON(w, http.StatusOK, events)
}

// bill updates an activity's amount due up to now (linear pricing: duration, cpu time ~ duration, start).
// The caller holds s.mu.
func (s *Server) bill(act *activity, now time.Time) *ratAmount {
	if act.readySince.IsZero() {
		return act.due
	}
	end := now
	if !act.endedAt.IsZero() {
		end = act.endedAt
	}
	secs := end.Sub(act.readySince).Seconds()
	c := s.agreements[act.agreementID].provider.cfg.Coeffs
	due := &ratAmount{}
	due.r.SetFloat64(c[0]*secs + c[1]*secs + c[2])
	// Round to 1e-9 GLM so amounts stay readable.
	f, _ := due.r.Float64()
	due, _ = parseAmount(fmt.Sprintf("%.9f", f))
	act.due = due
	act.usage = []float64{secs, secs}
	return due
}

// issueDebitNoteLocked issues the next debit note of a running activity.
func (s *Server) issueDebitNoteLocked(act *activity, now time.Time) {
	a := s.agreements[act.agreementID]
	due := s.bill(act, now)
	d := &debitNote{id: newID(), prevID: act.lastNote, agreementID: a.id, activityID: act.id, provider: a.provider, platform: a.platform, payer: a.payerAddr,
		due: due, usage: append([]float64(nil), act.usage...), created: s.now(), status: "RECEIVED"}
	s.debitNotes[d.id] = d
	act.lastNote = d.id
	act.lastNoteAt = now
	s.debitEvents = append(s.debitEvents, paymentEvent{EventType: "DebitNoteReceivedEvent", EventDate: d.created, DebitNoteID: d.id})
	s.notify()
}

// issueInvoiceLocked issues the invoice of a terminated agreement: the total due of its activities.
func (s *Server) issueInvoiceLocked(a *agreement) {
	if a.invoiceID != "" {
		return
	}
	total := newAmount()
	var ids []string
	for _, act := range s.activities {
		if act.agreementID == a.id {
			total = total.add(s.bill(act, time.Now()))
			ids = append(ids, act.id)
		}
	}
	sort.Strings(ids)
	if ids == nil {
		ids = []string{}
	}
	i := &invoice{id: newID(), agreementID: a.id, activityIDs: ids, provider: a.provider, platform: a.platform, payer: a.payerAddr, amount: total, created: s.now(), status: "RECEIVED"}
	s.invoices[i.id] = i
	a.invoiceID = i.id
	s.invEvents = append(s.invEvents, paymentEvent{EventType: "InvoiceReceivedEvent", EventDate: i.created, InvoiceID: i.id})
}

// usageVector names the usage counters (golem.com.usage.vector of the offer); the spec types it as an object.
func usageVector(u []float64) map[string]float64 {
	out := map[string]float64{}
	for i, k := range []string{"golem.usage.duration_sec", "golem.usage.cpu_sec"} {
		if i < len(u) {
			out[k] = u[i]
		}
	}
	return out
}
