package service

import (
	"fmt"
	"math"
	"time"
)

// Payment terms a counter-proposal promises. Like yapapi's MarketStrategy
// (yapapi/strategy/base.py respond_to_provider_offer), the adapter copies
// what the provider's offer proposes, clamped to what the app's payments
// keeper can meet; a provider whose terms the keeper cannot meet is skipped
// with the reason, rather than sent a counter-proposal its negotiator would
// reject (agent/provider/src/market/negotiator/builtin/expiration.rs,
// note_interval.rs, payment_timeout.rs).
const (
	PropAcceptTimeout  = "golem.com.payment.debit-notes.accept-timeout?"
	PropNoteInterval   = "golem.com.scheme.payu.debit-note.interval-sec?"
	PropPaymentTimeout = "golem.com.scheme.payu.payment-timeout-sec?"
)

const (
	// MinAcceptTimeout is the shortest debit-note acceptance deadline the
	// keeper promises: it accepts a note as soon as yagna's event long poll
	// returns it, and providers take no deadline below 5 s themselves
	// (LimitExpiration::min_deadline, builtin/expiration.rs).
	MinAcceptTimeout = 5 * time.Second
	// maxExpirationWithoutDeadline is the longest expiration a provider takes
	// from a requestor that promises no acceptance deadline
	// (max_agreement_expiration_without_deadline, negotiator/factory.rs).
	maxExpirationWithoutDeadline = 30 * time.Minute
	// MidAgreementFrom is the expiration from which mid-agreement payments are
	// negotiated (yapapi MIN_EXPIRATION_FOR_MID_AGREEMENT_PAYMENTS, 5 h);
	// providers require them from 10 h (payment_timeout_required_duration).
	MidAgreementFrom = 5 * time.Hour
	// MinNoteInterval is the shortest debit-note interval agreed to (yapapi
	// DEFAULT_DEBIT_NOTE_INTERVAL_SEC).
	MinNoteInterval = time.Minute
	// MinPaymentTimeout / MaxPaymentTimeout bound the mid-agreement payment
	// timeout promised: yagna pays accepted notes in batch cycles (testnet
	// every 5 min + 4 min, mainnet 24 h + 1 h: core/payment/src/dao/cycle.rs),
	// so a shorter promise cannot be kept; yapapi promises at least 5 h
	// (DEFAULT_PAYMENT_TIMEOUT_SEC) and providers take at most 24 h
	// (max_payment_timeout, negotiator/factory.rs).
	MinPaymentTimeout = 5 * time.Hour
	MaxPaymentTimeout = 24 * time.Hour
	// maxNoteInterval is the providers' default upper bound (24 h).
	maxNoteInterval = 24 * time.Hour
)

// offerSeconds reads a property of seconds from an offer.
func offerSeconds(props map[string]any, key string) (time.Duration, bool) {
	f, ok := props[key].(float64)
	if !ok || f < 0 || f != math.Trunc(f) {
		return 0, false
	}
	return time.Duration(f) * time.Second, true
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return max(lo, min(d, hi))
}

// Terms returns the payment properties of a counter-proposal to an offer
// with these properties, for an agreement that expires after expiration; an
// error says why the keeper cannot meet the offer's terms.
func Terms(offer map[string]any, expiration time.Duration) (map[string]any, error) {
	out := map[string]any{}
	deadline, has := offerSeconds(offer, PropAcceptTimeout)
	switch {
	case !has && expiration > maxExpirationWithoutDeadline:
		return nil, fmt.Errorf("the offer takes no debit-note acceptance deadline, so no agreement longer than %s (this one expires after %s)", maxExpirationWithoutDeadline, expiration)
	case has && deadline < MinAcceptTimeout:
		return nil, fmt.Errorf("the offer wants debit notes accepted within %s; the payments keeper promises no less than %s", deadline, MinAcceptTimeout)
	case has:
		// The provider's deadline is the longest it takes: the easiest to meet.
		out[PropAcceptTimeout] = int64(deadline.Seconds())
	}
	interval, hasInterval := offerSeconds(offer, PropNoteInterval)
	if expiration < MidAgreementFrom || !hasInterval {
		// No mid-agreement payments: the provider drops its own values.
		return out, nil
	}
	out[PropNoteInterval] = int64(clamp(interval, MinNoteInterval, maxNoteInterval).Seconds())
	if timeout, ok := offerSeconds(offer, PropPaymentTimeout); ok {
		out[PropPaymentTimeout] = int64(clamp(timeout, MinPaymentTimeout, MaxPaymentTimeout).Seconds())
	}
	return out, nil
}
