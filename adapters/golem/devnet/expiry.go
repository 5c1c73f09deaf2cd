package devnet

import (
	"fmt"
	"strconv"
	"time"
)

// How a provider agent ends an agreement on its own, besides unaccepted debit notes
// (agent/provider/src/tasks/task_manager.rs): at the agreement's expiration
// (schedule_expiration: BreakReason::Expired), and when no activity runs on it within the idle
// timeout after its approval or after its last activity was destroyed (schedule_idle_expiration,
// rescheduled on ActivityDestroyed: BreakReason::NoActivity; TaskConfig::idle_agreement_timeout,
// default 90s, agent/provider/src/tasks/config.rs). The reason is GolemReason::new
// (agent/provider/src/market/termination_reason.rs): the BreakReason's Display as message, its
// strum message as golem.provider.code.

// defaultIdleAgreementTimeout is TaskConfig::idle_agreement_timeout's default.
const defaultIdleAgreementTimeout = 90 * time.Second

// expiresAt is when a's provider ends it Expired: golem.srv.comp.expiration of the agreed demand, the
// time after approval divided by the devnet's agreementClock (a speed-up of agreement time only: the
// negotiation's limits stay as they are). Zero when the demand names none.
func (s *Server) expiresAt(a *agreement) time.Time {
	exp, err := expirationOf(a.demandProps)
	if err != nil || a.approved.IsZero() {
		return time.Time{}
	}
	if k := s.cfg.AgreementClock; k > 1 {
		return a.approved.Add(time.Duration(float64(exp.Sub(a.approved)) / k))
	}
	return exp
}

// idleSinceLocked is when a last had no activity running: its approval, or the end of its latest
// activity; zero while one runs. The caller holds s.mu.
func (s *Server) idleSinceLocked(a *agreement) time.Time {
	since := a.approved
	for _, act := range s.activities {
		if act.agreementID != a.id {
			continue
		}
		if act.state != "Terminated" {
			return time.Time{}
		}
		if act.endedAt.After(since) {
			since = act.endedAt
		}
	}
	return since
}

// endAgreementsLocked ends the approved agreements whose provider would end them now: expired, or
// idle past the timeout. It returns the containers to remove; the caller holds s.mu.
func (s *Server) endAgreementsLocked(now time.Time) []string {
	var remove []string
	for _, a := range s.agreements {
		// A provider cut off from the network can send no termination.
		if a.state != "Approved" || a.provider.offline != 0 {
			continue
		}
		if exp := s.expiresAt(a); !exp.IsZero() && !now.Before(exp) {
			agreed, _ := expirationOf(a.demandProps)
			remove = append(remove, s.terminateLocked(a, byProvider, map[string]any{
				"message":             "Agreement expired @ " + chronoUTC(agreed),
				"golem.provider.code": "Expired",
			})...)
			continue
		}
		idle := s.cfg.IdleAgreementTimeout.Duration
		if since := s.idleSinceLocked(a); !since.IsZero() && now.Sub(since) >= idle {
			remove = append(remove, s.terminateLocked(a, byProvider, map[string]any{
				"message":             "No activity created within " + rustSecs(idle),
				"golem.provider.code": "NoActivity",
			})...)
		}
	}
	return remove
}

// chronoUTC writes t as chrono's DateTime<Utc> Display does ("2026-01-02 15:04:05.123 UTC").
func chronoUTC(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.999999999") + " UTC"
}

// rustSecs writes d as Rust's Debug of a std::time::Duration does ("90s", "1.5s").
func rustSecs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// checkClock validates the agreement clock knobs.
func (c Config) checkClock() error {
	if c.AgreementClock != 0 && c.AgreementClock < 1 {
		return fmt.Errorf("devnet config: agreementClock %g: a speed-up factor of agreement time, 1 or more", c.AgreementClock)
	}
	if c.IdleAgreementTimeout.Duration < 0 {
		return fmt.Errorf("devnet config: idleAgreementTimeout %s must not be negative", c.IdleAgreementTimeout)
	}
	return nil
}
