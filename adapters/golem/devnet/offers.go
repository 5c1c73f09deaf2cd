package devnet

import (
	"maps"
	"net/http"
	"slices"
)

// A provider's offer changes as a real provider agent's does: its owner
// edits the preset's prices, or stops offering. The agent then unsubscribes
// its offer and, for a new price, subscribes a new one
// (agent/provider/src/market/provider_market.rs: on a preset change the
// offers are unsubscribed and subscribed anew). What a requestor sees of it is
// yagna's:
//
//   - a new offer reaches every live demand it matches as a new Initial
//     ProposalEvent (core/market/src/negotiation/requestor.rs
//     proposal_receiver_thread, generate_proposal), from a new offer id;
//   - an unsubscribed offer sends no event at all: the requestor events are
//     ProposalEvent, ProposalRejectedEvent and PropertyQueryEvent
//     (ya-client model/src/market/event.rs RequestorEvent), none for an
//     offer's end, and the matcher only stops matching it
//     (core/market/src/matcher/store.rs unsubscribe_offer);
//   - a counter-proposal to a proposal of an unsubscribed offer fails with
//     400 "Subscription [<offer id>] was already unsubscribed."
//     (core/market/src/negotiation/common.rs validate_proposal →
//     store.get_offer → QueryOfferError::Unsubscribed →
//     ProposalValidationError::Unsubscribed, BadRequest in
//     core/market/src/rest_api/error.rs).
//
// So a requestor that keeps a demand learns of a withdrawn offer only by
// countering it or by subscribing a demand anew (the matcher matches a new
// demand against the live offers only).

// OfferChange is the body of PUT /devnet/v1/providers/{id}/offer.
type OfferChange struct {
	// Withdrawn unsubscribes the provider's offer (true) or subscribes it
	// again (false).
	Withdrawn bool `json:"withdrawn"`
	// Coeffs, when set, are the new offer's pricing coefficients (GLM per
	// duration second, per CPU second, start; as ProviderConfig.Coeffs).
	Coeffs []float64 `json:"coeffs,omitempty"`
}

// OfferStatus is a provider's offer as PUT .../offer answers it.
type OfferStatus struct {
	Provider  string    `json:"provider"`
	OfferID   string    `json:"offerId"`
	Withdrawn bool      `json:"withdrawn"`
	Coeffs    []float64 `json:"coeffs"`
}

// putOffer changes a provider's offer: a new price is a new offer (a new
// id, proposed to every live demand it matches), a withdrawal unsubscribes
// it without a word to the requestors.
func (s *Server) putOffer(w http.ResponseWriter, r *http.Request) {
	var body OfferChange
	if !readJSON(w, r, &body) {
		return
	}
	if body.Coeffs != nil && len(body.Coeffs) != 3 {
		writeError(w, http.StatusBadRequest, "coeffs must be 3 numbers (per duration second, per CPU second, start), got %d", len(body.Coeffs))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.providerOr404(w, r.PathValue("id"))
	if p == nil {
		return
	}
	republish := !body.Withdrawn && (p.withdrawn || (body.Coeffs != nil && !slices.Equal(body.Coeffs, p.coeffs)))
	if body.Coeffs != nil {
		p.coeffs = slices.Clone(body.Coeffs)
		p.props = maps.Clone(p.props)
		p.props[propPriceCoeffs] = offerCoeffs(p.coeffs)
		p.lastProps = nil
	}
	switch {
	case body.Withdrawn && !p.withdrawn:
		p.withdrawn = true
		s.log.Info("offer withdrawn (unsubscribed)", "provider", p.name, "offer", p.offerID)
	case republish:
		p.withdrawn = false
		p.offerID = newID()
		p.offers = 0
		s.log.Info("offer subscribed anew", "provider", p.name, "offer", p.offerID, "coeffs", p.coeffs)
		if !s.busy(p) {
			for _, d := range s.sortedDemands() {
				s.proposeLocked(p, d)
			}
		}
		s.notify()
	}
	writeJSON(w, http.StatusOK, OfferStatus{Provider: p.name, OfferID: p.offerID, Withdrawn: p.withdrawn, Coeffs: p.coeffs})
}

// offerGoneLocked answers a counter-proposal to a proposal of an offer the
// provider unsubscribed (withdrawn, or replaced by a new one) as yagna does,
// and says whether it did.
func (s *Server) offerGoneLocked(w http.ResponseWriter, p *proposal) bool {
	if p.offerID == "" || (p.offerID == p.provider.offerID && !p.provider.withdrawn) {
		return false
	}
	writeError(w, http.StatusBadRequest, "Subscription [%s] was already unsubscribed.", p.offerID)
	return true
}
