package devnet

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"time"
)

// The provider-side negotiation model, after yagna's provider agent
// (agent/provider/src/market/negotiator): the composite negotiator runs every
// component on (demand, the provider's last proposal); any Reject rejects,
// any component that had to change the provider's proposal leaves the
// negotiation open (Negotiating: the adjusted proposal goes back as a Draft),
// and only an all-Ready step approves an agreement (composite.rs,
// component.rs NegotiatorsPack::negotiate_step).

// Property names the components read (flat form).
const (
	propChosenPlatform = "golem.com.payment.chosen-platform"
	propExpiration     = "golem.srv.comp.expiration"
	propAcceptTimeout  = "golem.com.payment.debit-notes.accept-timeout?"
	propNoteInterval   = "golem.com.scheme.payu.debit-note.interval-sec?"
	propPaymentTimeout = "golem.com.scheme.payu.payment-timeout-sec?"
	propPriceCoeffs    = "golem.com.pricing.model.linear.coeffs"
)

// Negotiation are the provider agent's negotiator settings, with the
// defaults of agent/provider/src/market/negotiator/factory.rs.
type Negotiation struct {
	// MinExpiration / MaxExpiration bound golem.srv.comp.expiration from now
	// (5min / 100years); MaxExpirationWithoutDeadline is the bound when the
	// demand promises no debit-note acceptance deadline (30min).
	MinExpiration                Duration `yaml:"minExpiration"`
	MaxExpiration                Duration `yaml:"maxExpiration"`
	MaxExpirationWithoutDeadline Duration `yaml:"maxExpirationWithoutDeadline"`
	// MinDebitNoteInterval / MaxDebitNoteInterval bound the demand's
	// golem.com.scheme.payu.debit-note.interval-sec? (1s / 24h).
	MinDebitNoteInterval Duration `yaml:"minDebitNoteInterval"`
	MaxDebitNoteInterval Duration `yaml:"maxDebitNoteInterval"`
	// PaymentTimeout is what the offer proposes for
	// golem.com.scheme.payu.payment-timeout-sec? (2min); the demand's value
	// must lie in [MinPaymentTimeout, MaxPaymentTimeout] (1s / 24h), and an
	// expiration of PaymentTimeoutRequiredFrom (10h) or more requires it.
	PaymentTimeout             Duration `yaml:"paymentTimeout"`
	MinPaymentTimeout          Duration `yaml:"minPaymentTimeout"`
	MaxPaymentTimeout          Duration `yaml:"maxPaymentTimeout"`
	PaymentTimeoutRequiredFrom Duration `yaml:"paymentTimeoutRequiredFrom"`
}

// minAcceptTimeout is the lowest debit-note acceptance deadline a provider
// takes or configures (LimitExpiration::min_deadline, builtin/expiration.rs).
const minAcceptTimeout = 5 * time.Second

func (n Negotiation) withDefaults() Negotiation {
	def := func(d *Duration, v time.Duration) {
		if d.Duration <= 0 {
			d.Duration = v
		}
	}
	def(&n.MinExpiration, 5*time.Minute)
	def(&n.MaxExpiration, 100*365*24*time.Hour)
	def(&n.MaxExpirationWithoutDeadline, 30*time.Minute)
	def(&n.MinDebitNoteInterval, time.Second)
	def(&n.MaxDebitNoteInterval, 24*time.Hour)
	def(&n.PaymentTimeout, 2*time.Minute)
	def(&n.MinPaymentTimeout, time.Second)
	def(&n.MaxPaymentTimeout, 24*time.Hour)
	def(&n.PaymentTimeoutRequiredFrom, 10*time.Hour)
	return n
}

// verdict is the outcome of one negotiation step.
type verdict struct {
	// reject is the reason when the provider rejects; final says it will not
	// change its mind (golem.proposal.rejection.is-final).
	reject string
	final  bool
	// offer is the provider's proposal, adjusted to the demand; ready is
	// false when a component had to adjust it (Negotiating).
	offer map[string]any
	ready bool
}

func rejected(final bool, format string, args ...any) verdict {
	return verdict{reject: fmt.Sprintf(format, args...), final: final}
}

// negotiate is one step of provider p's composite negotiator on demand (the
// requestor's properties) against offer (p's last proposal's properties).
func (s *Server) negotiate(p *provider, demand, offer map[string]any, now time.Time) verdict {
	offer = maps.Clone(offer)
	ready := true
	for _, step := range []func(*provider, map[string]any, map[string]any, time.Time) (verdict, bool){
		s.validateDemand, s.limitExpiration, s.noteInterval, s.paymentTimeout, priceNego, s.manifestRules,
	} {
		v, changed := step(p, demand, offer, now)
		if v.reject != "" {
			return v
		}
		if changed {
			ready = false
		}
	}
	return verdict{offer: offer, ready: ready}
}

// validateDemand: the demand must name the payment platform
// (builtin/demand_validation.rs, required field /golem/com/payment/chosen-platform;
// a non-final rejection), and it must be one the provider takes payments on:
// the agreement's payee address is read from the offer's
// golem.com.payment.platform.<chosen>.address (core/payment/src/models/agreement.rs).
func (s *Server) validateDemand(p *provider, demand, _ map[string]any, _ time.Time) (verdict, bool) {
	if s.cfg.Relax.ChosenPlatform {
		return verdict{}, false
	}
	chosen, _ := demand[propChosenPlatform].(string)
	if chosen == "" {
		return rejected(false, "Missing fields: /golem/com/payment/chosen-platform"), false
	}
	if _, ok := p.props["golem.com.payment.platform."+chosen+".address"]; !ok {
		return rejected(true, "no payment account for platform %s (the provider takes %v)", chosen, p.cfg.PaymentPlatforms), false
	}
	return verdict{}, false
}

// seconds reads a whole number of seconds (the provider reads u32:
// pointer_typed::<u32>); ok is false when the key is missing, err set when
// the value is not a non-negative integer.
func seconds(props map[string]any, key string) (d time.Duration, ok bool, err error) {
	v, ok := props[key]
	if !ok {
		return 0, false, nil
	}
	f, isNum := v.(float64)
	if !isNum || f < 0 || f != math.Trunc(f) || f > math.MaxUint32 {
		return 0, true, fmt.Errorf("property %s: %v is not a whole number of seconds", key, v)
	}
	return time.Duration(f) * time.Second, true, nil
}

// expirationOf reads golem.srv.comp.expiration (milliseconds since the epoch).
func expirationOf(props map[string]any) (time.Time, error) {
	v, ok := props[propExpiration]
	if !ok {
		return time.Time{}, fmt.Errorf("Missing expiration key in Proposal")
	}
	f, isNum := v.(float64)
	if !isNum || f != math.Trunc(f) {
		return time.Time{}, fmt.Errorf("expiration %v is not a timestamp in milliseconds", v)
	}
	return time.UnixMilli(int64(f)), nil
}

// limitExpiration is builtin/expiration.rs (LimitExpiration): the expiration
// must lie in [now+min, now+max], where max is MaxExpirationWithoutDeadline
// when the demand promises no debit-note acceptance deadline; a deadline
// above the provider's is rejected (final), one below 5 s too, a lower one is
// taken (the offer adjusted, Negotiating); a demand without one makes the
// provider drop its own.
func (s *Server) limitExpiration(p *provider, demand, offer map[string]any, now time.Time) (verdict, bool) {
	if s.cfg.Relax.PaymentTerms {
		return verdict{}, false
	}
	n := s.cfg.Negotiation
	reqDeadline, reqHas, err := seconds(demand, propAcceptTimeout)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	ourDeadline, ourHas, err := seconds(offer, propAcceptTimeout)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	exp, err := expirationOf(demand)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	maxDelta := n.MaxExpiration.Duration
	if !reqHas {
		maxDelta = n.MaxExpirationWithoutDeadline.Duration
	}
	tooLate := exp.Before(now.Add(n.MinExpiration.Duration))
	tooSoon := exp.After(now.Add(maxDelta))
	if tooLate || tooSoon {
		return rejected(tooLate, "Proposal expires at: %s which is less than %s or more than %s from now",
			exp.UTC().Format(time.RFC3339), n.MinExpiration, maxDelta), false
	}
	switch {
	case reqHas && ourHas:
		switch {
		case reqDeadline > ourDeadline:
			return rejected(true, "DebitNote acceptance deadline should be less than %s.", ourDeadline), false
		case reqDeadline == ourDeadline:
			return verdict{}, false
		case reqDeadline < minAcceptTimeout:
			return rejected(true, "To low DebitNotes timeout: %s", reqDeadline), false
		default:
			offer[propAcceptTimeout] = reqDeadline.Seconds()
			return verdict{}, true
		}
	case !reqHas && ourHas:
		delete(offer, propAcceptTimeout)
		return verdict{}, true
	case !reqHas && !ourHas:
		return verdict{}, false
	default:
		return rejected(true, "Shouldn't be in this state."), false
	}
}

// noteInterval is builtin/note_interval.rs (DebitNoteInterval): a demanded
// interval outside [min, max] is rejected (final), another one taken; a
// demand without one makes the provider drop its own.
func (s *Server) noteInterval(_ *provider, demand, offer map[string]any, _ time.Time) (verdict, bool) {
	if s.cfg.Relax.PaymentTerms {
		return verdict{}, false
	}
	n := s.cfg.Negotiation
	want, has, err := seconds(demand, propNoteInterval)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	ours, ourHas, err := seconds(offer, propNoteInterval)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	if !has {
		if ourHas {
			delete(offer, propNoteInterval)
			return verdict{}, true
		}
		return verdict{}, false
	}
	if !ourHas {
		return rejected(true, "DebitNote interval not found in the Offer"), false
	}
	if want < n.MinDebitNoteInterval.Duration || want > n.MaxDebitNoteInterval.Duration {
		return rejected(true, "Demand DebitNote interval %s not in acceptable range of [%s; %s]", want, n.MinDebitNoteInterval, n.MaxDebitNoteInterval), false
	}
	if want != ours {
		offer[propNoteInterval] = want.Seconds()
		return verdict{}, true
	}
	return verdict{}, false
}

// paymentTimeout is builtin/payment_timeout.rs (PaymentTimeout): an
// expiration in the past is rejected; a demanded timeout outside [min, max]
// is rejected (final), another one taken; without one, an expiration of
// PaymentTimeoutRequiredFrom or more is rejected (mid-agreement payments are
// required), else the provider drops its own.
func (s *Server) paymentTimeout(_ *provider, demand, offer map[string]any, now time.Time) (verdict, bool) {
	if s.cfg.Relax.PaymentTerms {
		return verdict{}, false
	}
	n := s.cfg.Negotiation
	want, has, err := seconds(demand, propPaymentTimeout)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	ours, ourHas, err := seconds(offer, propPaymentTimeout)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	exp, err := expirationOf(demand)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	if !exp.After(now) {
		return rejected(true, "Computation expiration time was set in the past"), false
	}
	if !has {
		if exp.Sub(now) >= n.PaymentTimeoutRequiredFrom.Duration {
			return rejected(true, "Expiration time %s exceeds the %s threshold of enforcing mid-agreement payments but the required property '%s' was not present in the Demand",
				exp.UTC().Format(time.RFC3339), n.PaymentTimeoutRequiredFrom, propPaymentTimeout), false
		}
		if ourHas {
			delete(offer, propPaymentTimeout)
			return verdict{}, true
		}
		return verdict{}, false
	}
	if !ourHas {
		return rejected(true, "DebitNote payment timeout not found in the Offer"), false
	}
	if want < n.MinPaymentTimeout.Duration || want > n.MaxPaymentTimeout.Duration {
		return rejected(true, "Demand DebitNote payment timeout %s not in acceptable range of [%s; %s]", want, n.MinPaymentTimeout, n.MaxPaymentTimeout), false
	}
	if want != ours {
		offer[propPaymentTimeout] = want.Seconds()
		return verdict{}, true
	}
	return verdict{}, false
}

// priceNego is builtin/price.rs (PriceNego): a demand that names prices must
// pay at least the offer's, coefficient by coefficient.
func priceNego(_ *provider, demand, offer map[string]any, _ time.Time) (verdict, bool) {
	d, ok1 := demand[propPriceCoeffs].([]any)
	o, ok2 := offer[propPriceCoeffs].([]any)
	if !ok1 || !ok2 {
		return verdict{}, false
	}
	if len(d) != len(o) {
		return rejected(false, "invalid price vector"), false
	}
	same := true
	for i := range d {
		dv, _ := d[i].(float64)
		ov, _ := o[i].(float64)
		if dv < ov {
			return rejected(true, "%v < %v", d, o), false
		}
		same = same && dv == ov
	}
	if same {
		return verdict{}, false
	}
	offer[propPriceCoeffs] = d
	return verdict{}, true
}

// terms are what an agreement's provider enforces, read from the agreed
// proposals.
type terms struct {
	// acceptTimeout is the debit-note acceptance deadline; 0: none promised
	// (the provider then does not end the agreement over unaccepted notes).
	acceptTimeout time.Duration
	// noteInterval is how often the provider issues debit notes.
	noteInterval time.Duration
	// paymentTimeout is the mid-agreement payment deadline of each debit
	// note (its paymentDueDate); 0: none.
	paymentTimeout time.Duration
}

// termsOf reads the terms of an agreement made from demand and offer; def
// are the devnet's own (used for what the proposals do not say, and for
// everything when the payment rules are relaxed).
func termsOf(demand, offer map[string]any, def terms, relaxed bool) terms {
	if relaxed {
		return def
	}
	t := terms{noteInterval: def.noteInterval}
	if d, ok, err := seconds(offer, propAcceptTimeout); ok && err == nil {
		t.acceptTimeout = d
	}
	if d, ok, err := seconds(demand, propNoteInterval); ok && err == nil && d > 0 {
		t.noteInterval = d
	}
	if d, ok, err := seconds(demand, propPaymentTimeout); ok && err == nil {
		t.paymentTimeout = d
	}
	return t
}

// answerLocked delivers a provider's answer to a counter-proposal on demand d: at once, or after the
// provider kind's answerDelay (its negotiator answers asynchronously, over the network). The caller
// holds s.mu.
func (s *Server) answerLocked(d *demand, p *provider, ev marketEvent) {
	delay := p.cfg.AnswerDelay.Duration
	if delay <= 0 {
		d.events = append(d.events, ev)
		return
	}
	time.AfterFunc(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if d.unsubscribed || s.bgCtx.Err() != nil {
			return
		}
		ev.EventDate = s.now()
		if ev.Proposal != nil {
			ev.Proposal.Timestamp = ev.EventDate
		}
		d.events = append(d.events, ev)
		s.notify()
	})
}

// holdCounter answers a counter-proposal to a provider that never answers one (NoCounterAnswer) as
// yagna does: it holds the call for counterTimeout, then answers 500 with
// CounterProposalError::Timeout wrapped in ProposalError::Send (core/market/src/rest_api/requestor.rs
// counter_proposal, core/market/src/negotiation/error.rs, protocol/negotiation/error.rs). It returns
// whether it answered.
func (s *Server) holdCounter(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	p, ok := s.proposals[r.PathValue("pid")]
	silent := ok && p.fromProvider && p.provider.cfg.NoCounterAnswer
	s.mu.Unlock()
	if !silent {
		return false
	}
	// A requestor that gives up waiting gets the same answer (it reads no more of it).
	select {
	case <-time.After(s.cfg.CounterTimeout.Duration):
	case <-r.Context().Done():
	}
	w.Header().Set(BeyondSpecHeader, "provider "+p.provider.name+" never answers counter-proposals (devnet knob noCounterAnswer)")
	writeError(w, http.StatusInternalServerError, "Failed to send response for Proposal [%s]. Error: Timeout while sending counter Proposal", p.id)
	return true
}
