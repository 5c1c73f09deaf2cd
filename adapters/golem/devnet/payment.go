package devnet

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"slices"
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
	updated               time.Time // zero until amended
	// timeout is when yagna releases the allocation by itself (schedule_release_allocation,
	// core/payment/src/api/allocations/mod.rs).
	timeout     time.Time
	makeDeposit bool
}

type debitNote struct {
	id, prevID, agreementID, activityID string
	provider                            *provider
	platform, payer                     string
	due                                 *ratAmount
	usage                               []float64
	created                             time.Time
	// deadline is when the provider ends the agreement if the note is still not accepted
	// (agent/provider/src/payments/payments.rs: TrackDeadline at issue + accept timeout); zero when the
	// requestor promised no deadline.
	deadline time.Time
	// paymentDue is set when the agreement has mid-agreement payments.
	paymentDue time.Time
	status     string
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
	api("GET "+paymentPrefix+"/requestorAccounts", s.requestorAccounts)
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

// platform is a payment platform driver-network-token (core/payment/src/api/allocations/platform_triple.rs).
type platform struct{ driver, network, token string }

func (p platform) String() string { return p.driver + "-" + p.network + "-" + p.token }

// networkTokens are yagna's networks with their token (core/model/src/payment.rs NetworkName; Rinkeby is
// refused: "Rinkeby is no longer supported").
var networkTokens = map[string]string{
	"mainnet": "glm", "polygon": "glm",
	"sepolia": "tglm", "goerli": "tglm", "holesky": "tglm", "hoodi": "tglm", "mumbai": "tglm", "amoy": "tglm",
}

// parsePlatform reads "driver-network-token" as yagna does (from_payment_platform_str).
func parsePlatform(name string) (platform, error) {
	parts := strings.Split(name, "-")
	if len(parts) != 3 {
		return platform{}, fmt.Errorf("paymentPlatform must be of the form driver-network-token instead of %s", name)
	}
	return checkPlatform(platform{parts[0], parts[1], parts[2]})
}

func checkPlatform(p platform) (platform, error) {
	if p.driver != "erc20" {
		return p, fmt.Errorf("Invalid driver name %s", p.driver)
	}
	tok, ok := networkTokens[p.network]
	if !ok {
		return p, fmt.Errorf("Invalid network name: %s", p.network)
	}
	if p.token != tok {
		return p, fmt.Errorf("token %s is not the token of network %s (%s)", p.token, p.network, tok)
	}
	return p, nil
}

// defaultTestnet is the platform of an allocation that names none: yagna's default is still Holesky
// (DEFAULT_TESTNET_NETWORK, core/payment/src/api/allocations/mod.rs), while `yagna payment fund` funds
// Hoodi: a requestor that names no platform gets "insufficient funds".
var defaultTestnet = platform{"erc20", "holesky", "tglm"}

// platformOf reads paymentPlatform as a string or as {driver, network, token}, filling what is missing
// as yagna does (from_payment_platform_input: network holesky, or polygon for token glm; driver erc20).
func platformOf(raw json.RawMessage) (platform, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return defaultTestnet, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return parsePlatform(s)
	}
	var o struct{ Driver, Network, Token string }
	if err := json.Unmarshal(raw, &o); err != nil {
		return platform{}, fmt.Errorf("paymentPlatform must be a string or {driver, network, token}")
	}
	p := platform{o.Driver, o.Network, o.Token}
	if p.driver == "" {
		p.driver = "erc20"
	}
	if p.network == "" {
		p.network = "holesky"
		if p.token == "glm" {
			p.network = "polygon"
		}
	}
	if p.token == "" {
		p.token = networkTokens[p.network]
	}
	return checkPlatform(p)
}

// account is one of the requestor's payment accounts.
type account struct {
	platform string
	funds    *ratAmount
}

// reservedLocked is what the live allocations on a platform keep from its account: what they have
// not spent yet. The caller holds s.mu.
func (s *Server) reservedLocked(plat, except string) *ratAmount {
	r := newAmount()
	for _, a := range s.allocations {
		if a.platform == plat && a.id != except {
			r = r.add(a.total.sub(a.spent))
		}
	}
	return r
}

// checkFundsLocked answers false (and writes yagna's 400 problem) when an account cannot cover more
// (ValidateAllocation, core/payment/src/api/allocations/api_error.rs try_from_validation). The caller
// holds s.mu.
func (s *Server) checkFundsLocked(w http.ResponseWriter, body any, plat, address string, more *ratAmount, except string) bool {
	if s.cfg.Relax.Funds {
		return true
	}
	available := newAmount()
	if acc, ok := s.accounts[plat]; ok {
		available = acc.funds
	}
	reserved := s.reservedLocked(plat, except)
	if reserved.add(more).cmp(available) <= 0 {
		return true
	}
	writeProblem(w, http.StatusBadRequest, "/payment-api/v1/allocations/validation-error",
		"/payment-api/v1/allocations/validation-error/insufficient-account-funds",
		"Insufficient funds to create the allocation. Top up your account or release all existing allocations to unlock the funds via `yagna payment release-allocations`",
		map[string]any{"requestedFunds": more.String(), "availableFunds": available.String(), "reservedFunds": reserved.String(),
			"requestBody": body, "paymentPlatform": plat, "address": address})
	return false
}

func (s *Server) requestorAccounts(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, plat := range slices.Sorted(maps.Keys(s.accounts)) {
		p, _ := parsePlatform(plat)
		out = append(out, map[string]any{"platform": plat, "address": s.cfg.Identity, "driver": p.driver, "network": p.network,
			"token": p.token, "send": true, "receive": false})
	}
	writeJSON(w, http.StatusOK, out)
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
	plat, err := platformOf(body.PaymentPlatform)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "/payment-api/v1/allocations/bad-payment-platform", "", "Payment platform doesn't parse",
			map[string]any{"requestBody": body, "parseError": err.Error(), "requestedPaymentPlatform": body.PaymentPlatform})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	address := body.Address
	if address == "" {
		address = s.cfg.Identity
	}
	if !strings.EqualFold(address, s.cfg.Identity) {
		writeProblem(w, http.StatusInternalServerError, "/payment-api/v1/allocations/account-not-registered", "",
			fmt.Sprintf("Account %s not registered for platform %s", address, plat), map[string]any{"requestBody": body, "paymentPlatform": plat.String(), "address": address})
		return
	}
	// yagna initialises the account of the platform before it validates the funds (init_account in
	// create_allocation): after a refused allocation, the account is listed, empty.
	if _, ok := s.accounts[plat.String()]; !ok {
		s.accounts[plat.String()] = &account{platform: plat.String(), funds: newAmount()}
	}
	if !s.checkFundsLocked(w, body, plat.String(), address, total, "") {
		return
	}
	// Without a timeout, yagna keeps an allocation for ten years (core/payment/src/models/allocation.rs).
	timeout := time.Now().UTC().AddDate(10, 0, 0)
	if body.Timeout != nil {
		if !body.Timeout.After(time.Now()) {
			writeProblem(w, http.StatusBadRequest, "/payment-api/v1/allocations/validation-error",
				"/payment-api/v1/allocations/validation-error/timeout-passed", "Requested allocation timeout is in the past",
				map[string]any{"requestedTimeout": body.Timeout.UTC(), "requestBody": body, "paymentPlatform": plat.String(), "address": address})
			return
		}
		timeout = body.Timeout.UTC()
	}
	a := &allocation{id: newID(), address: address, platform: plat.String(), total: total, spent: newAmount(), created: s.now(), timeout: timeout, makeDeposit: body.MakeDeposit}
	s.allocations[a.id] = a
	writeJSON(w, http.StatusCreated, s.allocationJSON(a))
}

func (s *Server) allocationJSON(a *allocation) map[string]any {
	out := map[string]any{
		"allocationId": a.id, "address": a.address, "paymentPlatform": a.platform,
		"totalAmount": a.total.String(), "spentAmount": a.spent.String(), "remainingAmount": a.total.sub(a.spent).String(),
		"timestamp": a.created, "makeDeposit": a.makeDeposit,
		// As yagna's Allocation (ya-client-model model/src/payment/allocation.rs created_ts, updated_ts).
		"createdTs": a.created, "updatedTs": a.created,
	}
	if !a.updated.IsZero() {
		out["updatedTs"] = a.updated
	}
	// Given to the nanosecond, as yagna keeps it.
	out["timeout"] = a.timeout
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
	if id := r.PathValue("id"); s.released[id] {
		// yagna answers 404 {"message":null} for a released allocation: AllocationDao::get filters
		// released ones out (core/payment/src/dao/allocation.rs, .filter(released.eq(false))), so
		// get_allocation's AllocationStatus::Gone → 410 is never reached and NotFound gives
		// response::not_found() (core/payment/src/utils.rs, ErrorMessage { message: None }).
		writeJSON(w, http.StatusNotFound, map[string]any{"message": nil})
		return
	}
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
			writeError(w, http.StatusBadRequest, "New allocation would be smaller than the already spent amount")
			return
		}
		// Only the increase is validated (amend_allocation).
		if inc := t.sub(a.total); inc.r.Sign() > 0 && !s.checkFundsLocked(w, body, a.platform, a.address, inc, "") {
			return
		}
		a.total = t
	}
	if body.Timeout != nil {
		if !body.Timeout.After(time.Now()) {
			writeError(w, http.StatusBadRequest, "New allocation timeout is in the past")
			return
		}
		a.timeout = body.Timeout.UTC()
	}
	a.updated = s.now()
	writeJSON(w, http.StatusOK, s.allocationJSON(a))
}

// releaseExpiredLocked releases the allocations whose timeout has passed, as yagna's release task does;
// the caller holds s.mu.
func (s *Server) releaseExpiredLocked(now time.Time) {
	for id, a := range s.allocations {
		if !now.Before(a.timeout) {
			delete(s.allocations, id)
			s.released[id] = true
			s.log.Info("allocation released at its timeout", "allocation", id, "timeout", a.timeout)
		}
	}
}

func (s *Server) releaseAllocation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := r.PathValue("id"); s.released[id] {
		// AllocationDao::release does not filter released ones: a second release is 410 (release_allocation,
		// AllocationReleaseStatus::Gone, core/payment/src/api/allocations/mod.rs).
		w.Header().Set(BeyondSpecHeader, "yagna answers 410 to the release of a released allocation; the spec lists no 410")
		writeError(w, http.StatusGone, "Allocation %s has been already released", id)
		return
	}
	if a, ok := s.allocationOr404(w, r.PathValue("id")); ok {
		delete(s.allocations, a.id)
		s.released[a.id] = true
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
	if !d.paymentDue.IsZero() {
		out["paymentDueDate"] = d.paymentDue
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
	if out, ok := listPage(w, r, s.debitNotes, func(d *debitNote) time.Time { return d.created }, s.debitNoteJSON); ok {
		writeJSON(w, http.StatusOK, out)
	}
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
		// core/payment/src/api/debit_notes.rs (and invoices.rs): AllocationStatus::NotFound → 400
		// "Allocation {id} not found", a released one included: AllocationDao::get filters released
		// ones out (core/payment/src/dao/allocation.rs), so its Gone → 410 is never reached.
		writeError(w, http.StatusBadRequest, "Allocation %s not found", body.AllocationID)
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
		if acc, ok := s.accounts[alloc.platform]; ok {
			acc.funds = acc.funds.sub(delta)
		}
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
	if st := s.takeAcceptError(); st != 0 {
		w.Header().Set(BeyondSpecHeader, "acceptErrors fault knob")
		writeError(w, st, "%s", acceptMessages[st])
		return
	}
	if !s.settle(w, s.agreements[d.agreementID], body, d.due) {
		return
	}
	// Only this note: yagna accepts notes one by one (core/payment/src/dao/debit_note.rs accept), and the
	// provider tracks the deadline of each (agent/provider/src/payments/payments.rs TrackDeadline).
	d.status = "ACCEPTED"
	s.debitEvents = append(s.debitEvents, paymentEvent{EventType: "DebitNoteAcceptedEvent", EventDate: s.now(), DebitNoteID: d.id})
	s.notify()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) listInvoices(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out, ok := listPage(w, r, s.invoices, func(i *invoice) time.Time { return i.created }, s.invoiceJSON); ok {
		writeJSON(w, http.StatusOK, out)
	}
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
	if st := s.takeAcceptError(); st != 0 {
		w.Header().Set(BeyondSpecHeader, "acceptErrors fault knob")
		writeError(w, st, "%s", strings.Replace(acceptMessages[st], "Debit Note", "Invoice", 1))
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
	// The agreed price, by the offer's usage vector (duration and CPU
	// seconds: the VM keeps one thread busy), the last coefficient the start.
	a := s.agreements[act.agreementID]
	c, _ := a.offer.props[propPriceCoeffs].([]any)
	vector, _ := a.offer.props["golem.com.usage.vector"].([]any)
	total := 0.0
	for i, x := range c {
		f, _ := x.(float64)
		switch {
		case i == len(c)-1:
			total += f
		case i < len(vector) && (vector[i] == "golem.usage.duration_sec" || vector[i] == "golem.usage.cpu_sec"):
			total += f * secs
		}
	}
	due := &ratAmount{}
	due.r.SetFloat64(total)
	// Round to 1e-9 GLM so amounts stay readable.
	f, _ := due.r.Float64()
	due, _ = parseAmount(fmt.Sprintf("%.9f", f))
	act.due = due
	// The usage in the order of the offer's vector (the VM keeps one thread busy: as many CPU seconds as
	// seconds).
	act.usage = make([]float64, len(vector))
	for i, name := range vector {
		if name == "golem.usage.duration_sec" || name == "golem.usage.cpu_sec" {
			act.usage[i] = secs
		}
	}
	return due
}

// issueDebitNoteLocked issues the next debit note of a running activity.
func (s *Server) issueDebitNoteLocked(act *activity, now time.Time) {
	a := s.agreements[act.agreementID]
	due := s.bill(act, now)
	d := &debitNote{id: newID(), prevID: act.lastNote, agreementID: a.id, activityID: act.id, provider: a.provider, platform: a.platform, payer: a.payerAddr,
		due: due, usage: append([]float64(nil), act.usage...), created: s.now(), status: "RECEIVED"}
	if a.terms.acceptTimeout > 0 {
		d.deadline = now.Add(a.terms.acceptTimeout)
	}
	if a.terms.paymentTimeout > 0 {
		// Mid-agreement payments: the note is payable within the agreed payment timeout.
		d.paymentDue = d.created.Add(a.terms.paymentTimeout)
	}
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

// usageVector is a debit note's usageCounterVector as a provider sends it: an array of numbers in the
// order of the offer's golem.com.usage.vector (agent/provider/src/payments/payments.rs send_debit_note:
// json!(cost_info.usage), a Vec<f64>).
func usageVector(u []float64) []float64 {
	if u == nil {
		return []float64{}
	}
	return u
}
