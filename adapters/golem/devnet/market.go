package devnet

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/constraint"
)

const marketPrefix = "/market-api/v1"

// provider is one simulated provider node with its single offer.
type provider struct {
	id, name    string
	offerID     string
	cfg         ProviderConfig
	props       map[string]any
	constraints string
	created     time.Time
	// offline is what yagna answers for calls forwarded to it while it is cut off (0: online).
	offline      int
	offlineSince time.Time
	// offers counts the offers made (PriceStep raises the price after each);
	// lastProps are the properties of the latest (nil before the first).
	offers    int
	lastProps map[string]any
	// coeffs are the offer's pricing coefficients now (Coeffs until PUT
	// /devnet/v1/providers/{id}/offer changes them; offers.go).
	coeffs []float64
	// withdrawn is an offer unsubscribed (offers.go): no proposals, and a
	// counter of one of its proposals fails as yagna's does.
	withdrawn bool
}

type demand struct {
	id           string
	props        map[string]any
	constraints  string
	created      time.Time
	events       []marketEvent
	unsubscribed bool
}

type proposal struct {
	id           string
	demandID     string
	fromProvider bool
	provider     *provider
	// offerID is the provider's offer the proposal came from (a provider's
	// proposals only).
	offerID     string
	props       map[string]any
	constraints string
	state       string
	prevID      string
	created     time.Time
}

type agreement struct {
	id          string
	demand      *demand
	offer       *proposal // the provider's proposal the agreement was made from
	demandProps map[string]any
	demandCons  string
	provider    *provider
	state       string
	validTo     time.Time
	created     time.Time
	approved    time.Time
	terminator  string
	reason      map[string]any
	platform    string
	payerAddr   string
	terms       terms
	session     string     // the appSessionId given at confirm
	accepted    *ratAmount // total of accepted debit notes/invoice
	invoiceID   string
	confirmed   time.Time // when the requestor confirmed it
	ended       time.Time // when it was terminated (the invoice follows InvoiceDelay later)
}

type reasonJSON map[string]any

type proposalJSON struct {
	Properties     map[string]any `json:"properties"`
	Constraints    string         `json:"constraints"`
	ProposalID     string         `json:"proposalId"`
	IssuerID       string         `json:"issuerId"`
	State          string         `json:"state"`
	Timestamp      time.Time      `json:"timestamp"`
	PrevProposalID string         `json:"prevProposalId,omitempty"`
}

type marketEvent struct {
	EventType  string        `json:"eventType"`
	EventDate  time.Time     `json:"eventDate"`
	Proposal   *proposalJSON `json:"proposal,omitempty"`
	ProposalID string        `json:"proposalId,omitempty"`
	Reason     reasonJSON    `json:"reason,omitempty"`
}

// party is who ended an agreement; only byRequestor and byProvider exist, so no other terminator can
// be reported.
type party struct{ name string }

var (
	byRequestor = party{"Requestor"}
	byProvider  = party{"Provider"}
)

type agreementEvent struct {
	EventType   string     `json:"eventType"`
	EventDate   time.Time  `json:"eventDate"`
	AgreementID string     `json:"agreementId"`
	Terminator  string     `json:"terminator,omitempty"`
	Signature   *string    `json:"signature,omitempty"`
	Reason      reasonJSON `json:"reason,omitempty"`
}

func (s *Server) initProviders() error {
	now := time.Now().UTC()
	for _, pc := range s.cfg.Providers {
		for i := 0; i < pc.Count; i++ {
			name := pc.Name
			if pc.Count > 1 {
				name = fmt.Sprintf("%s-%d", pc.Name, i)
			}
			id := nodeID("provider/" + s.cfg.Instance + "/" + name)
			p := &provider{id: id, name: name, offerID: newID(), cfg: pc, created: now, coeffs: slices.Clone(pc.Coeffs)}
			p.props = map[string]any{
				"golem.inf.cpu.architecture":            "x86_64",
				"golem.inf.cpu.cores":                   float64(pc.Cores),
				"golem.inf.cpu.threads":                 float64(pc.Threads),
				"golem.inf.mem.gib":                     pc.MemGib,
				"golem.inf.storage.gib":                 pc.StorageGib,
				"golem.runtime.name":                    pc.Runtime,
				"golem.runtime.version":                 "0.4.2",
				"golem.runtime.capabilities":            toAnyList(pc.Capabilities),
				"golem.node.id.name":                    name,
				"golem.node.debug.subnet":               pc.Subnet,
				"golem.srv.caps.multi-activity":         true,
				"golem.activity.caps.transfer.protocol": []any{},
				"golem.com.pricing.model":               "linear",
				// As a real provider publishes them: the usage vector in the order of its preset's
				// usage_coeffs, a BTreeMap (agent/provider/src/config/presets.rs Preset), so cpu_sec before
				// duration_sec, and the start price last (payments/pricing.rs LinearPricingOffer::build).
				propPriceCoeffs:          offerCoeffs(pc.Coeffs),
				"golem.com.usage.vector": []any{"golem.usage.cpu_sec", "golem.usage.duration_sec"},
				"golem.com.scheme":       "payu",
				// What the negotiator components put in the offer (fill_template of
				// builtin/expiration.rs, note_interval.rs, payment_timeout.rs).
				propNoteInterval:                     math.Round(s.cfg.DebitNoteInterval.Seconds()),
				propPaymentTimeout:                   math.Round(s.cfg.Negotiation.PaymentTimeout.Seconds()),
				propAcceptTimeout:                    math.Round(pc.DebitNoteAcceptTimeout.Seconds()),
				"golem.com.payment.protocol.version": "3",
				"golem.node.net.is-public":           true,
			}
			if slices.Contains(pc.Capabilities, "manifest-support") {
				// agent/provider/src/provider_agent.rs build_service_info
				p.props["golem.srv.caps.payload-manifest"] = true
			}
			for _, plat := range pc.PaymentPlatforms {
				p.props["golem.com.payment.platform."+plat+".address"] = id
			}
			for k, v := range pc.Properties {
				p.props[k] = v
			}
			p.constraints = pc.Constraints
			if p.constraints == "" {
				// A real offer's constraints (docs/provider/installing-exeunit.md): the demand must expire
				// after the offer was made, and name the subnet.
				p.constraints = fmt.Sprintf("(&(golem.srv.comp.expiration>%d)(golem.node.debug.subnet=%s))", now.UnixMilli(), pc.Subnet)
			}
			if _, err := constraint.ParseOrEmpty(p.constraints); err != nil {
				return fmt.Errorf("devnet config: provider %s: %w", name, err)
			}
			s.providers = append(s.providers, p)
		}
	}
	return nil
}

func toAnyList(l []string) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

// flatten turns nested JSON objects into flat dotted keys (yagna accepts both) and json.Number into float64.
func flatten(in map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(joinKey(prefix, k), e)
			}
		default:
			out[prefix] = normalize(x)
		}
	}
	for k, v := range in {
		walk(k, v)
	}
	return out
}

func joinKey(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

func (s *Server) routeMarket(api func(string, http.HandlerFunc)) {
	api("GET "+marketPrefix+"/offers", s.listOffers)
	api("GET "+marketPrefix+"/demands", s.listDemands)
	api("POST "+marketPrefix+"/demands", s.subscribeDemand)
	api("DELETE "+marketPrefix+"/demands/{sub}", s.unsubscribeDemand)
	api("GET "+marketPrefix+"/demands/{sub}/events", s.collectOffers)
	api("GET "+marketPrefix+"/demands/{sub}/proposals/{pid}", s.getProposalOffer)
	api("POST "+marketPrefix+"/demands/{sub}/proposals/{pid}", s.counterProposal)
	api("POST "+marketPrefix+"/demands/{sub}/proposals/{pid}/reject", s.rejectProposal)
	api("GET "+marketPrefix+"/agreements", s.listAgreements)
	api("POST "+marketPrefix+"/agreements", s.createAgreement)
	api("GET "+marketPrefix+"/agreements/{id}", s.getAgreement)
	api("POST "+marketPrefix+"/agreements/{id}/confirm", s.confirmAgreement)
	api("POST "+marketPrefix+"/agreements/{id}/wait", s.waitForApproval)
	api("POST "+marketPrefix+"/agreements/{id}/cancel", s.cancelAgreement)
	api("POST "+marketPrefix+"/agreements/{id}/terminate", s.terminateAgreement)
	// GET, as yagna serves it (core/market/src/rest_api/common.rs get_agreement_terminate_reason);
	// market-api.yaml says POST (adapters/golem/openapi errata).
	api("GET "+marketPrefix+"/agreements/{id}/terminate/reason", s.terminateReason)
	api("GET "+marketPrefix+"/agreementEvents", s.collectAgreementEvents)
}

// listOffers lists every simulated provider's offer (the provider-side view, handy for debugging): the
// latest one made, with the price it had (PriceStep).
func (s *Server) listOffers(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, p := range s.providers {
		if !p.withdrawn {
			out = append(out, s.offerJSON(p))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) offerJSON(p *provider) map[string]any {
	props := p.props
	if p.lastProps != nil {
		props = p.lastProps
	}
	return map[string]any{"offerId": p.offerID, "providerId": p.id, "properties": props, "constraints": p.constraints, "timestamp": p.created}
}

func (s *Server) demandJSON(d *demand, props map[string]any, cons string) map[string]any {
	return map[string]any{"demandId": d.id, "requestorId": s.cfg.Identity, "properties": props, "constraints": cons, "timestamp": d.created}
}

func (s *Server) listDemands(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, d := range s.sortedDemands() {
		if !d.unsubscribed {
			out = append(out, s.demandJSON(d, d.props, d.constraints))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) sortedDemands() []*demand {
	out := make([]*demand, 0, len(s.demands))
	for _, d := range s.demands {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) })
	return out
}

type demandOfferBase struct {
	Properties  map[string]any `json:"properties"`
	Constraints *string        `json:"constraints"`
}

func (s *Server) readDemand(w http.ResponseWriter, r *http.Request) (map[string]any, string, bool) {
	props, cons, _, ok := s.readDemandTyped(w, r)
	return props, cons, ok
}

// unsignedProps are the demand properties a provider's negotiator reads as u32 (u64 for the expiration)
// with ProposalView::pointer_typed, a serde deserialization (agent/provider/src/market/negotiator/builtin/
// expiration.rs, note_interval.rs, payment_timeout.rs read_duration).
var unsignedProps = []string{propAcceptTimeout, propNoteInterval, propPaymentTimeout, propExpiration}

// mistypedUnsigned lists the unsignedProps of flattened raw properties (json.Number kept) that serde
// would not read as an unsigned integer: 120.0, 1.2e2 or -1 (serde_json refuses a float for u32). The
// negotiator component then fails with an error rather than a rejection, and the provider logs it and
// never answers the proposal (agent/provider/src/market/provider_market.rs process_proposal's
// map_err(...)?, dispatch_events only logs the error).
func mistypedUnsigned(raw map[string]any) []string {
	var bad []string
	for _, k := range unsignedProps {
		n, ok := raw[k].(json.Number)
		if !ok {
			continue
		}
		if _, err := strconv.ParseUint(n.String(), 10, 64); err != nil {
			bad = append(bad, k+"="+n.String())
		}
	}
	return bad
}

// flattenRaw flattens properties keeping json.Number as written.
func flattenRaw(in map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				walk(joinKey(prefix, k), e)
			}
			return
		}
		out[prefix] = v
	}
	for k, v := range in {
		walk(k, v)
	}
	return out
}

// readDemandTyped is readDemand with the unsigned properties a provider could not read (mistypedUnsigned).
func (s *Server) readDemandTyped(w http.ResponseWriter, r *http.Request) (map[string]any, string, []string, bool) {
	var body demandOfferBase
	if !readJSON(w, r, &body) {
		return nil, "", nil, false
	}
	if body.Properties == nil || body.Constraints == nil {
		writeError(w, http.StatusBadRequest, "a demand needs properties and constraints")
		return nil, "", nil, false
	}
	if _, err := constraint.ParseOrEmpty(*body.Constraints); err != nil {
		writeError(w, http.StatusBadRequest, "invalid constraints: %v", err)
		return nil, "", nil, false
	}
	return flatten(body.Properties), *body.Constraints, mistypedUnsigned(flattenRaw(body.Properties)), true
}

// matches is the two-way match: the demand's constraints against the offer's properties and the offer's
// constraints against the demand's properties.
func (s *Server) matches(p *provider, props map[string]any, cons string) bool {
	ok, err := constraint.Matches(props, cons, p.props, p.constraints)
	return err == nil && ok
}

func (s *Server) subscribeDemand(w http.ResponseWriter, r *http.Request) {
	props, cons, ok := s.readDemand(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &demand{id: newID(), props: props, constraints: cons, created: s.now()}
	s.demands[d.id] = d
	for _, p := range s.providers {
		if !s.busy(p) {
			s.proposeLocked(p, d)
		}
	}
	s.log.Info("demand subscribed", "demand", d.id, "proposals", len(d.events))
	s.notify()
	writeJSON(w, http.StatusCreated, d.id)
}

// offerCoeffs turns the configured coefficients (per duration second, per CPU second, start) into the
// offer's golem.com.pricing.model.linear.coeffs, in the order of its usage vector (cpu_sec,
// duration_sec) and the start price last.
func offerCoeffs(c []float64) []any { return []any{c[1], c[0], c[2]} }

// proposeLocked sends d an Initial proposal from p's offer if they match both ways.
func (s *Server) proposeLocked(p *provider, d *demand) {
	if d.unsubscribed || p.offline != 0 || p.withdrawn || !s.matches(p, d.props, d.constraints) {
		return
	}
	props := p.props
	if len(p.cfg.PriceStep) == 3 {
		// This offer's price: the base plus one step per offer made before.
		props = maps.Clone(p.props)
		c := make([]float64, 3)
		for i := range c {
			c[i] = p.coeffs[i] + float64(p.offers)*p.cfg.PriceStep[i]
		}
		props[propPriceCoeffs] = offerCoeffs(c)
	}
	p.offers++
	p.lastProps = props
	pr := &proposal{id: newID(), demandID: d.id, fromProvider: true, provider: p, offerID: p.offerID, props: props, constraints: p.constraints, state: "Initial", created: s.now()}
	s.proposals[pr.id] = pr
	d.events = append(d.events, marketEvent{EventType: "ProposalEvent", EventDate: pr.created, Proposal: s.proposalJSON(pr)})
}

// providerFreedLocked re-publishes a provider's offer once it has capacity again (an agreement ended):
// every live demand it matches gets a new Initial proposal, as a requestor keeping its demand expects.
func (s *Server) providerFreedLocked(p *provider) {
	if s.busy(p) {
		return
	}
	for _, d := range s.sortedDemands() {
		s.proposeLocked(p, d)
	}
	s.notify()
}

func (s *Server) proposalJSON(p *proposal) *proposalJSON {
	issuer := s.cfg.Identity
	if p.fromProvider {
		issuer = p.provider.id
	}
	return &proposalJSON{Properties: p.props, Constraints: p.constraints, ProposalID: p.id, IssuerID: issuer, State: p.state, Timestamp: p.created, PrevProposalID: p.prevID}
}

func (s *Server) unsubscribeDemand(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.demands[r.PathValue("sub")]
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "demand subscription %s not found", r.PathValue("sub"))
	case d.unsubscribed:
		writeBare(w, http.StatusGone) // already unsubscribed; the spec declares no body
	default:
		d.unsubscribed = true
		d.events = nil
		s.notify()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) liveDemand(w http.ResponseWriter, id string) (*demand, bool) {
	d, ok := s.demands[id]
	if !ok || d.unsubscribed {
		writeError(w, http.StatusNotFound, "demand subscription %s not found", id)
		return nil, false
	}
	return d, true
}

func (s *Server) collectOffers(w http.ResponseWriter, r *http.Request) {
	timeout, ok := pollTimeout(w, r)
	if !ok {
		return
	}
	max, ok := maxEvents(w, r)
	if !ok {
		return
	}
	id := r.PathValue("sub")
	s.mu.Lock()
	_, ok = s.liveDemand(w, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	gone := false
	events := longPoll(s, r.Context(), timeout, func() ([]marketEvent, bool) {
		d := s.demands[id]
		if d.unsubscribed {
			gone = true
			return nil, true
		}
		n := min(max, len(d.events))
		if n == 0 {
			return []marketEvent{}, false
		}
		out := append([]marketEvent(nil), d.events[:n]...)
		d.events = d.events[n:]
		return out, true
	})
	if gone {
		writeError(w, http.StatusNotFound, "demand subscription %s does not exist (unsubscribed)", id)
		return
	}
	writeJSON(w, http.StatusOK, events)
}

// proposalIn finds a proposal of a live demand; it writes 404 when either is missing.
func (s *Server) proposalIn(w http.ResponseWriter, r *http.Request) (*demand, *proposal, bool) {
	d, ok := s.liveDemand(w, r.PathValue("sub"))
	if !ok {
		return nil, nil, false
	}
	p, ok := s.proposals[r.PathValue("pid")]
	if !ok || p.demandID != d.id {
		writeError(w, http.StatusNotFound, "proposal %s not found in subscription %s", r.PathValue("pid"), d.id)
		return nil, nil, false
	}
	return d, p, true
}

func (s *Server) getProposalOffer(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, p, ok := s.proposalIn(w, r)
	if !ok {
		return
	}
	if p.state == "Rejected" {
		writeBare(w, http.StatusGone) // rejected; the spec declares no body
		return
	}
	writeJSON(w, http.StatusOK, s.proposalJSON(p))
}

func (s *Server) counterProposal(w http.ResponseWriter, r *http.Request) {
	props, cons, mistyped, ok := s.readDemandTyped(w, r)
	if !ok || s.holdCounter(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, p, ok := s.proposalIn(w, r)
	if !ok {
		return
	}
	if !p.fromProvider {
		writeError(w, http.StatusBadRequest, "proposal %s is our own; counter the provider's proposals", p.id)
		return
	}
	if p.state == "Rejected" || p.state == "Expired" || p.state == "Accepted" {
		writeBare(w, http.StatusGone) // the spec declares no body
		return
	}
	if s.offerGoneLocked(w, p) {
		return
	}
	p.state = "Draft"
	counter := &proposal{id: newID(), demandID: d.id, props: props, constraints: cons, state: "Draft", prevID: p.id, created: s.now()}
	s.proposals[counter.id] = counter
	prov := p.provider
	switch {
	case len(mistyped) > 0:
		// The provider's negotiator cannot read them: it logs an error and never answers (mistypedUnsigned).
		s.log.Info("provider cannot read the counter-proposal and does not answer it", "provider", prov.name, "properties", mistyped)
	case s.faults.RejectProposals:
		counter.state = "Rejected"
		s.answerLocked(d, prov, marketEvent{EventType: "ProposalRejectedEvent", EventDate: s.now(), ProposalID: counter.id,
			Reason: reasonJSON{"message": "provider rejects proposals (devnet fault knob rejectProposals)"}})
	case s.busy(prov):
		counter.state = "Rejected"
		s.answerLocked(d, prov, marketEvent{EventType: "ProposalRejectedEvent", EventDate: s.now(), ProposalID: counter.id,
			Reason: reasonJSON{"message": fmt.Sprintf("No capacity available. Reached Agreements limit: %d", prov.cfg.MaxAgreements), "golem.proposal.rejection.is-final": false}})
	case !s.matches(prov, props, cons):
		counter.state = "Rejected"
		s.answerLocked(d, prov, marketEvent{EventType: "ProposalRejectedEvent", EventDate: s.now(), ProposalID: counter.id,
			Reason: reasonJSON{"message": "counter-proposal does not match the offer any more"}})
	default:
		v := s.negotiate(prov, props, p.props, time.Now())
		if v.reject != "" {
			counter.state = "Rejected"
			s.log.Info("provider rejects a counter-proposal", "provider", prov.name, "reason", v.reject)
			s.answerLocked(d, prov, marketEvent{EventType: "ProposalRejectedEvent", EventDate: s.now(), ProposalID: counter.id,
				Reason: reasonJSON{"message": v.reject, "golem.proposal.rejection.is-final": v.final}})
			break
		}
		// The provider answers with its proposal adjusted to the demand (composite.rs ReactToProposal).
		answer := &proposal{id: newID(), demandID: d.id, fromProvider: true, provider: prov, offerID: p.offerID, props: v.offer, constraints: prov.constraints, state: "Draft", prevID: counter.id, created: s.now()}
		s.proposals[answer.id] = answer
		s.answerLocked(d, prov, marketEvent{EventType: "ProposalEvent", EventDate: answer.created, Proposal: s.proposalJSON(answer)})
	}
	s.notify()
	writeJSON(w, http.StatusOK, counter.id) // 200, as yagna (core/market/src/rest_api/requestor.rs counter_proposal)
}

func (s *Server) rejectProposal(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, p, ok := s.proposalIn(w, r)
	if !ok {
		return
	}
	if p.state == "Rejected" {
		writeBare(w, http.StatusGone) // already rejected; the spec declares no body
		return
	}
	p.state = "Rejected"
	s.notify()
	w.WriteHeader(http.StatusNoContent)
}

type agreementProposal struct {
	ProposalID string `json:"proposalId"`
	ValidTo    string `json:"validTo"`
}

func (s *Server) createAgreement(w http.ResponseWriter, r *http.Request) {
	var body agreementProposal
	if !readJSON(w, r, &body) {
		return
	}
	if body.ProposalID == "" || body.ValidTo == "" {
		writeError(w, http.StatusBadRequest, "proposalId and validTo are required")
		return
	}
	validTo, err := time.Parse(time.RFC3339Nano, body.ValidTo)
	if err != nil {
		writeError(w, http.StatusBadRequest, "validTo must be an RFC 3339 date-time: %v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.proposals[body.ProposalID]
	if !ok || !p.fromProvider {
		writeError(w, http.StatusNotFound, "proposal %s not found (an agreement is made from a provider's proposal)", body.ProposalID)
		return
	}
	switch p.state {
	case "Initial":
		// 400 AgreementError::NoNegotiations (core/market/src/negotiation/requestor.rs create_agreement,
		// rest_api/error.rs).
		writeError(w, http.StatusBadRequest, "Can't create Agreement for Proposal [%s]. No negotiation with Provider took place. (You should counter Proposal at least one time)", p.id)
		return
	case "Accepted":
		writeError(w, http.StatusConflict, "Can't create second Agreement for Proposal [%s].", p.id) // AgreementError::ProposalAlreadyAccepted
		return
	case "Rejected":
		writeError(w, http.StatusBadRequest, "Can't create Agreement for rejected Proposal [%s].", p.id) // AgreementError::ProposalRejected
		return
	case "Expired":
		writeError(w, http.StatusGone, "proposal %s is %s", p.id, p.state)
		return
	}
	d := s.demands[p.demandID]
	counter := s.proposals[p.prevID]
	if counter == nil {
		writeError(w, http.StatusBadRequest, "Can't create Agreement for Proposal [%s]. No negotiation with Provider took place. (You should counter Proposal at least one time)", p.id)
		return
	}
	p.state = "Accepted"
	a := &agreement{id: newID(), demand: d, offer: p, demandProps: counter.props, demandCons: counter.constraints, provider: p.provider,
		state: "Proposal", validTo: validTo, created: s.now(), accepted: newAmount()}
	a.platform, a.payerAddr = choosePlatform(p.provider, counter.props, s.cfg.Identity)
	a.terms = termsOf(counter.props, p.props, terms{acceptTimeout: p.provider.cfg.DebitNoteAcceptTimeout.Duration, noteInterval: s.cfg.DebitNoteInterval.Duration}, s.cfg.Relax.PaymentTerms)
	s.agreements[a.id] = a
	s.notify()
	writeJSON(w, http.StatusOK, a.id) // 200, as yagna (core/market/src/rest_api/requestor.rs create_agreement)
}

// choosePlatform picks the payment platform: golem.com.payment.chosen-platform, else the first platform of
// the provider for which the demand carries an address.
func choosePlatform(p *provider, demandProps map[string]any, identity string) (platform, payer string) {
	if c, ok := demandProps["golem.com.payment.chosen-platform"].(string); ok && c != "" {
		platform = c
	}
	if platform == "" {
		for _, plat := range p.cfg.PaymentPlatforms {
			if _, ok := demandProps["golem.com.payment.platform."+plat+".address"]; ok {
				platform = plat
				break
			}
		}
	}
	if platform == "" {
		platform = p.cfg.PaymentPlatforms[0]
	}
	payer = identity
	if a, ok := demandProps["golem.com.payment.platform."+platform+".address"].(string); ok && a != "" {
		payer = a
	}
	return platform, payer
}

func (s *Server) agreementJSON(a *agreement) map[string]any {
	out := map[string]any{
		"agreementId": a.id,
		"demand":      s.demandJSON(a.demand, a.demandProps, a.demandCons),
		"offer":       map[string]any{"offerId": a.provider.offerID, "providerId": a.provider.id, "properties": a.offer.props, "constraints": a.offer.constraints, "timestamp": a.offer.created},
		"validTo":     a.validTo.UTC(),
		"state":       a.state,
		"timestamp":   a.created,
	}
	if !a.approved.IsZero() {
		out["approvedDate"] = a.approved
	}
	if a.session != "" {
		out["appSessionId"] = a.session
	}
	return out
}

func (s *Server) agreementOr404(w http.ResponseWriter, id string) (*agreement, bool) {
	return find(w, s.agreements, "agreement", id)
}

func (s *Server) getAgreement(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.agreementOr404(w, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, s.agreementJSON(a))
	}
}

// listAgreements lists the agreements, filtered as yagna does (core/market/src/db/dao/agreement.rs list):
// the appSessionId given at confirm exactly, the state, creation after/before.
func (s *Server) listAgreements(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state, session := q.Get("state"), q.Get("appSessionId")
	var after, before time.Time
	for k, t := range map[string]*time.Time{"afterDate": &after, "beforeDate": &before} {
		if v := q.Get(k); v != "" {
			x, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, "%s must be an RFC 3339 date-time, got %q", k, v)
				return
			}
			*t = x
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []*agreement
	for _, a := range s.agreements {
		if (state != "" && a.state != state) || (session != "" && a.session != session) ||
			(!after.IsZero() && !a.created.After(after)) || (!before.IsZero() && !a.created.Before(before)) {
			continue
		}
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].created.Before(list[j].created) })
	out := []map[string]any{}
	for _, a := range list {
		// yagna's AgreementListEntry: id, timestamp, approvedDate (null until approved), role (ya-client-model
		// model/src/market/agreement.rs at the rev yagna pins; core/market/src/market.rs list_agreements).
		e := map[string]any{"id": a.id, "timestamp": a.created, "approvedDate": nil, "role": "Requestor"}
		if !a.approved.IsZero() {
			e["approvedDate"] = a.approved
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) confirmAgreement(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agreementOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	if a.state != "Proposal" {
		writeError(w, http.StatusGone, "agreement %s is not in Proposal state: %s", a.id, a.state)
		return
	}
	// Stored with the agreement (core/market/src/db/dao/agreement.rs update_session).
	a.session = r.URL.Query().Get("appSessionId")
	// The simulated provider decides at once: every negotiator component must be ready with the
	// agreement's demand and offer, or negotiations are not finished (composite.rs ReactToAgreement).
	busy := s.busy(a.provider)
	v := s.negotiate(a.provider, a.demandProps, a.offer.props, time.Now())
	switch {
	case s.faults.RejectAgreements || busy || v.reject != "" || !v.ready:
		a.state = "Rejected"
		switch {
		case busy:
			a.reason = map[string]any{"message": "provider is busy (no free capacity for another agreement)"}
		case s.faults.RejectAgreements:
			a.reason = map[string]any{"message": "provider rejects agreements (devnet fault knob rejectAgreements)"}
		case v.reject != "":
			a.reason = map[string]any{"message": v.reject, "golem.proposal.rejection.is-final": v.final}
		default:
			a.reason = map[string]any{"message": "Negotiations aren't finished.", "golem.proposal.rejection.is-final": false}
		}
		s.log.Info("provider rejects an agreement", "provider", a.provider.name, "reason", a.reason["message"])
		s.agrEvents = append(s.agrEvents, agreementEvent{EventType: "AgreementRejectedEvent", EventDate: s.now(), AgreementID: a.id, Reason: a.reason})
	default:
		if s.faults.ApprovalDelay.Duration > 0 {
			// The provider decides later (approvePendingLocked); meanwhile the agreement holds its capacity.
			a.state = "Pending"
			a.confirmed = time.Now()
		} else {
			s.approveLocked(a)
		}
	}
	s.notify()
	w.WriteHeader(http.StatusNoContent)
}

// approveLocked approves a confirmed agreement; the caller holds s.mu.
func (s *Server) approveLocked(a *agreement) {
	a.state = "Approved"
	a.approved = s.now()
	s.agrEvents = append(s.agrEvents, agreementEvent{EventType: "AgreementApprovedEvent", EventDate: a.approved, AgreementID: a.id})
}

// approvePendingLocked approves the Pending agreements whose approvalDelay has passed; the caller holds
// s.mu.
func (s *Server) approvePendingLocked(now time.Time) {
	for _, a := range s.agreements {
		if a.state == "Pending" && !a.confirmed.IsZero() && now.Sub(a.confirmed) >= s.faults.ApprovalDelay.Duration && a.provider.offline == 0 {
			s.approveLocked(a)
			s.notify()
		}
	}
}

// busy reports whether a provider has no capacity for another agreement; the caller holds s.mu.
func (s *Server) busy(p *provider) bool {
	n := 0
	for _, a := range s.agreements {
		if a.provider == p && (a.state == "Pending" || a.state == "Approved") {
			n++
		}
	}
	return n >= p.cfg.MaxAgreements
}

func (s *Server) waitForApproval(w http.ResponseWriter, r *http.Request) {
	timeout, ok := pollTimeout(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	_, ok = s.agreementOr404(w, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	state := longPoll(s, r.Context(), timeout, func() (string, bool) {
		st := s.agreements[id].state
		return st, st != "Pending"
	})
	switch state {
	case "Approved":
		w.WriteHeader(http.StatusNoContent)
	case "Pending":
		writeError(w, http.StatusRequestTimeout, "agreement %s not approved within %s", id, timeout)
	// core/market/src/negotiation/requestor.rs wait_for_approval, rest_api/error.rs WaitForApprovalError:
	// Proposal (not confirmed) and Terminated are 400; Expired, Rejected and Cancelled 410.
	case "Proposal":
		writeError(w, http.StatusBadRequest, "Agreement [%s] should be confirmed, before waiting for approval.", id)
	case "Terminated":
		writeError(w, http.StatusBadRequest, "Agreement [%s] terminated.", id)
	default:
		writeError(w, http.StatusGone, "%s", state)
	}
}

func (s *Server) cancelAgreement(w http.ResponseWriter, r *http.Request) {
	// The reason given is kept in the AgreementCancelledEvent, as yagna's does
	// (core/market/src/db/dao/agreement.rs cancel: create_event with the reason, Owner::Requestor).
	var reason reasonJSON
	if r.ContentLength != 0 {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err == nil && body != nil {
			reason = body
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agreementOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	if a.state != "Proposal" && a.state != "Pending" {
		writeError(w, http.StatusGone, "agreement %s is %s", a.id, a.state)
		return
	}
	// yagna tells the provider first (core/market/src/negotiation/requestor.rs cancel_agreement).
	if a.state == "Pending" && a.provider.offline != 0 {
		w.Header().Set(BeyondSpecHeader, "provider "+a.provider.name+" is offline (devnet knob)")
		writeError(w, http.StatusInternalServerError, "Protocol error while cancelling Agreement [%s]: %s", a.id, unreachableMessages[http.StatusInternalServerError])
		return
	}
	a.state = "Cancelled"
	s.agrEvents = append(s.agrEvents, agreementEvent{EventType: "AgreementCancelledEvent", EventDate: s.now(), AgreementID: a.id, Reason: reason})
	s.providerFreedLocked(a.provider)
	s.notify()
	w.WriteHeader(http.StatusOK) // as yagna: HttpResponse::Ok().finish() (core/market/src/rest_api/requestor.rs cancel_agreement)
}

func (s *Server) terminateAgreement(w http.ResponseWriter, r *http.Request) {
	reason := map[string]any{}
	if r.ContentLength != 0 {
		var body map[string]any
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&body); err == nil && body != nil {
			reason = body
		}
	}
	if _, ok := reason["message"]; !ok {
		reason["message"] = "terminated by the requestor"
	}
	s.mu.Lock()
	a, ok := s.agreementOr404(w, r.PathValue("id"))
	if !ok {
		s.mu.Unlock()
		return
	}
	// core/market/src/db/model/agreement.rs check_transition, rest_api/error.rs: from Proposal 409, from
	// any other state but Approved 410.
	switch a.state {
	case "Proposal":
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "agreement %s can not be terminated yet (%s)", a.id, a.state)
		return
	case "Approved":
	default:
		s.mu.Unlock()
		writeError(w, http.StatusGone, "%s", a.state)
		return
	}
	// yagna propagates the termination to the provider before recording it, and answers 500 when that
	// fails (core/market/src/negotiation/common.rs terminate_agreement, rest_api/error.rs
	// ProtocolTerminate): the agreement stays Approved.
	if a.provider.offline != 0 {
		s.mu.Unlock()
		w.Header().Set(BeyondSpecHeader, "provider "+a.provider.name+" is offline (devnet knob)")
		writeError(w, http.StatusInternalServerError, "Protocol error while terminating Agreement [%s]: %s", a.id, unreachableMessages[http.StatusInternalServerError])
		return
	}
	containers := s.terminateLocked(a, byRequestor, reason)
	s.mu.Unlock()
	s.removeContainers(r.Context(), containers)
	w.WriteHeader(http.StatusOK) // as yagna: HttpResponse::Ok().finish() (core/market/src/rest_api/common.rs terminate_agreement)
}

// terminateLocked ends an approved agreement: its activities become Terminated, the provider issues the
// invoice. It returns the containers to remove (outside the lock). by is the party that ended
// it, "Requestor" or "Provider", spelt as yagna serializes it (ya-client-model
// src/market/agreement_event.rs AgreementTerminator; core/market/src/db/model/agreement_events.rs
// into_client maps the event's issuer, the Owner that terminated, to it).
func (s *Server) terminateLocked(a *agreement, by party, reason map[string]any) []string {
	terminator := by.name
	a.state = "Terminated"
	a.terminator = terminator
	a.reason = reason
	sig := "devnet-signature"
	s.agrEvents = append(s.agrEvents, agreementEvent{EventType: "AgreementTerminatedEvent", EventDate: s.now(), AgreementID: a.id, Terminator: terminator, Signature: &sig, Reason: reason})
	var containers []string
	for _, act := range s.activities {
		if act.agreementID != a.id || act.state == "Terminated" {
			continue
		}
		s.bill(act, time.Now())
		msg, _ := reason["message"].(string)
		act.terminate("agreement terminated by the "+strings.ToLower(terminator), msg)
		if act.containerID != "" {
			containers = append(containers, act.containerID)
		}
	}
	a.ended = time.Now()
	if s.faults.InvoiceDelay.Duration <= 0 {
		s.issueInvoiceLocked(a)
	}
	s.providerFreedLocked(a.provider)
	s.log.Info("agreement terminated", "agreement", a.id, "by", terminator, "reason", reason["message"])
	s.notify()
	return containers
}

func (s *Server) terminateReason(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agreementOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	for _, e := range s.agrEvents {
		if e.AgreementID == a.id && e.EventType == "AgreementTerminatedEvent" {
			writeJSON(w, http.StatusOK, e)
			return
		}
	}
	// core/market/src/negotiation/common.rs get_terminate_reason: NotTerminated, a 400
	// (rest_api/error.rs), worded as negotiation/error.rs words it.
	writeError(w, http.StatusBadRequest, "Agreement [%s] not terminated yet.", a.id)
}

func (s *Server) collectAgreementEvents(w http.ResponseWriter, r *http.Request) {
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
	session := r.URL.Query().Get("appSessionId")
	events := longPoll(s, r.Context(), timeout, func() ([]agreementEvent, bool) {
		out := []agreementEvent{}
		for _, e := range s.agrEvents {
			if session != "" && s.agreements[e.AgreementID].session != session {
				continue
			}
			if e.EventDate.After(after) && len(out) < max {
				out = append(out, e)
			}
		}
		return out, len(out) > 0
	})
	writeJSON(w, http.StatusOK, events)
}
