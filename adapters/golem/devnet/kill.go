package devnet

import (
	"net/http"
	"sort"
	"time"
)

// KillMode is how a killed provider goes away.
type KillMode string

const (
	// KillShutdown is a provider agent stopped the ordinary way (SIGINT or
	// SIGTERM to ya-provider, a host shutting down): it withdraws its offers
	// and breaks every agreement it runs with BreakReason::Shutdown, which
	// kills their exe-units, terminates the agreements on the market
	// (terminator Provider, reason {"message": "Shutting down Provider",
	// "golem.provider.code": "Shutdown"}) and sends their invoices. Then its
	// node is gone. yagna: agent/provider/src/main.rs (a signal sends
	// Shutdown), provider_agent.rs (Handler<Shutdown>: the market, then the
	// task manager), market/provider_market.rs (Handler<Shutdown>:
	// Unsubscribe), tasks/task_manager.rs (Handler<Shutdown>: BreakAgreement
	// {reason: BreakReason::Shutdown} for every active agreement;
	// Handler<BreakAgreement>: the runner, the market and payments are told),
	// market/termination_reason.rs (BreakReason::Shutdown), payments/
	// payments.rs (Handler<AgreementBroken>: the agreement is closed and
	// invoiced).
	KillShutdown KillMode = "shutdown"
	// KillCrash is a provider that vanished without a word (kill -9, power
	// or network lost for good): its exe-units die with it, nothing is
	// terminated, and every call yagna forwards to it fails as for a node
	// it cannot reach (500, GSB "endpoint address not found":
	// core/activity/src/error.rs). Its agreements stay Approved in the
	// requestor's yagna.
	KillCrash KillMode = "crash"
)

// KillResult is the answer of POST /devnet/v1/providers/{id}/kill.
type KillResult struct {
	ID   string   `json:"id"`
	Name string   `json:"name"`
	Mode KillMode `json:"mode"`
	// Agreements the provider terminated (shutdown) or abandoned (crash),
	// and the activities whose containers died with it.
	Agreements []string `json:"agreements"`
	Activities []string `json:"activities"`
}

func (s *Server) routeKill(handle func(string, func(http.ResponseWriter, *http.Request))) {
	handle("POST "+AdminPrefix+"/providers/{id}/kill", s.killProvider)
}

// killProvider kills a provider (by node id or name): {"mode": "shutdown"} (the default) or "crash".
// Afterwards it answers nothing, as a node that is gone: every call yagna forwards to it answers 500
// (GSB), it makes no proposals and issues no debit notes, exactly as PUT /providers/{id} {"offline":
// 500} does. PUT {"offline": 0} starts it again with no agreement of its own (a crashed one's old
// agreements end as RequestorUnreachable once it has been gone longer than their accept timeout).
func (s *Server) killProvider(w http.ResponseWriter, r *http.Request) {
	body := struct {
		Mode KillMode `json:"mode"`
	}{Mode: KillShutdown}
	if r.ContentLength != 0 && !readJSON(w, r, &body) {
		return
	}
	if body.Mode == "" {
		body.Mode = KillShutdown
	}
	if body.Mode != KillShutdown && body.Mode != KillCrash {
		writeError(w, http.StatusBadRequest, "mode must be %q or %q, got %q", KillShutdown, KillCrash, body.Mode)
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	p := s.providerOr404(w, id)
	if p == nil {
		s.mu.Unlock()
		return
	}
	if p.offline != 0 {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "provider %s is offline or dead already: PUT %s/providers/%s {\"offline\": 0} starts it again", p.name, AdminPrefix, p.name)
		return
	}
	// Gone first, so that nothing below hands it a new demand.
	p.offline, p.offlineSince = http.StatusInternalServerError, time.Now()
	res := KillResult{ID: p.id, Name: p.name, Mode: body.Mode, Agreements: []string{}, Activities: []string{}}
	var containers []string
	for _, a := range s.agreements {
		if a.provider != p || a.state != "Approved" {
			continue
		}
		res.Agreements = append(res.Agreements, a.id)
		for _, act := range s.activities {
			if act.agreementID == a.id && act.state != "Terminated" {
				res.Activities = append(res.Activities, act.id)
			}
		}
		if body.Mode == KillShutdown {
			containers = append(containers, s.terminateLocked(a, byProvider, map[string]any{
				"message":             "Shutting down Provider",
				"golem.provider.code": "Shutdown",
			})...)
			// The provider invoices what ran before its process ends, whatever
			// invoiceDelay says (that knob delays invoices of providers that live on).
			s.issueInvoiceLocked(a)
			continue
		}
		// A crash: the exe-units die with the node and nobody tells the
		// requestor, whose yagna keeps the activity alive and asks the node
		// (which no longer answers) for its state. Without its container the
		// liveness check leaves it alone.
		for _, act := range s.activities {
			if act.agreementID == a.id && act.state != "Terminated" && act.containerID != "" {
				s.bill(act, time.Now())
				containers = append(containers, act.containerID)
				act.containerID = ""
			}
		}
	}
	sort.Strings(res.Agreements)
	sort.Strings(res.Activities)
	s.notify()
	s.mu.Unlock()
	s.log.Info("provider killed", "provider", p.name, "mode", body.Mode, "agreements", len(res.Agreements))
	if len(containers) > 0 {
		s.removeContainers(r.Context(), containers)
	}
	writeJSON(w, http.StatusOK, res)
}
