package devnet

import (
	"net/http"
	"sort"
	"time"
)

// BeyondSpecHeader marks an answer that yagna gives on a real network but that the ya-client OpenAPI
// files do not declare (a 408 or 504 where the spec lists neither): a contract checker should not hold it
// against the devnet. Its value says why.
const BeyondSpecHeader = "X-Devnet-Beyond-Spec"

// BeyondSpec tells whether an answer carries BeyondSpecHeader (for openapi.Checker.Exempt).
func BeyondSpec(status int, h http.Header) bool { return h.Get(BeyondSpecHeader) != "" }

// unreachableMessages are yagna's answers when it cannot get one from a provider: its activity API
// forwards state, exec, results and destroy to the provider over GSB and answers 408 {"message":
// "Timeout"} when the provider does not reply in time and 500 with the GSB error when the call fails
// (core/activity/src/api.rs get_activity_state_web, core/activity/src/requestor/control.rs,
// core/activity/src/error.rs); a gateway in front of it answers 504.
var unreachableMessages = map[int]string{
	http.StatusRequestTimeout:      "Timeout",
	http.StatusInternalServerError: "GSB error: GSB failure: Bad request: endpoint address not found",
	http.StatusGatewayTimeout:      "Gateway Timeout",
}

// writeUnreachable answers as yagna does when the provider side cannot be reached.
func writeUnreachable(w http.ResponseWriter, status int, why string) {
	w.Header().Set(BeyondSpecHeader, why)
	writeError(w, status, "%s", unreachableMessages[status])
}

// unreachable answers for a call yagna forwards to the provider of agreement a when that provider is
// offline, and reports whether it did; the caller holds s.mu.
func (s *Server) unreachable(w http.ResponseWriter, agreementID string) bool {
	a := s.agreements[agreementID]
	if a == nil || a.provider.offline == 0 {
		return false
	}
	writeUnreachable(w, a.provider.offline, "provider "+a.provider.name+" is offline (devnet knob)")
	return true
}

// takeExecPollError pops the next exec-poll fault, 0 when there is none.
func (s *Server) takeExecPollError() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults.ExecPollErrors) == 0 {
		return 0
	}
	st := s.faults.ExecPollErrors[0]
	s.faults.ExecPollErrors = s.faults.ExecPollErrors[1:]
	return st
}

// takeAcceptError pops the next accept fault, 0 when there is none; the caller holds s.mu.
func (s *Server) takeAcceptError() int {
	if len(s.faults.AcceptErrors) == 0 {
		return 0
	}
	st := s.faults.AcceptErrors[0]
	s.faults.AcceptErrors = s.faults.AcceptErrors[1:]
	return st
}

// acceptMessages are yagna's answers to an accept that failed.
var acceptMessages = map[int]string{
	http.StatusGatewayTimeout:      "Timeout accepting Debit Note on remote Node.",
	http.StatusInternalServerError: "database is locked",
}

// takeDeployError consumes one deployErrors fault.
func (s *Server) takeDeployError() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.DeployErrors <= 0 {
		return false
	}
	s.faults.DeployErrors--
	return true
}

// ProviderStatus is one provider as the admin API shows it.
type ProviderStatus struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Offline is 0 for a provider online, else what yagna answers for calls that need it: 408 (it does not
	// answer) or 500 (GSB: its node cannot be reached).
	Offline int `json:"offline"`
}

func (s *Server) listProviders(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ProviderStatus{}
	for _, p := range s.providers {
		out = append(out, ProviderStatus{ID: p.id, Name: p.name, Offline: p.offline})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
}

// putProvider takes a provider (by node id or name) offline or brings it back: {"offline": 408|500|0}.
//
// While offline, every call yagna forwards to it (activity state, exec, results, destroy, create,
// agreement terminate and cancel) answers that status, it issues no debit notes, makes no proposals, and
// its activities keep running: the provider is cut off, not dead. Back online after more than
// debitNoteAcceptTimeout, it ends its approved agreements as a real provider agent does when the requestor
// was unreachable for longer than the accept timeout (agent/provider/src/payments/payments.rs,
// BreakReason::RequestorUnreachable).
func (s *Server) putProvider(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Offline int `json:"offline"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if _, ok := unreachableMessages[body.Offline]; body.Offline != 0 && (!ok || body.Offline == http.StatusGatewayTimeout) {
		writeError(w, http.StatusBadRequest, "offline must be 0, 408 or 500, got %d", body.Offline)
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	p := s.providerOr404(w, id)
	if p == nil {
		s.mu.Unlock()
		return
	}
	var remove []string
	now := time.Now()
	was := p.offline
	p.offline = body.Offline
	switch {
	case was == 0 && p.offline != 0:
		p.offlineSince = now
	case was != 0 && p.offline == 0:
		if now.Sub(p.offlineSince) > p.cfg.DebitNoteAcceptTimeout.Duration {
			for _, a := range s.agreements {
				if a.provider == p && a.state == "Approved" {
					remove = append(remove, s.terminateLocked(a, byProvider, map[string]any{
						"message":             "requestor unreachable for longer than " + p.cfg.DebitNoteAcceptTimeout.String(),
						"golem.provider.code": "RequestorUnreachable",
					})...)
				}
			}
		}
		// Its debit note clock starts again: the notes it could not send while cut off are not held
		// against the requestor.
		for _, act := range s.activities {
			if act.providerID == p.id && act.state == "Ready" {
				act.lastNoteAt = now
			}
		}
		for _, d := range s.debitNotes {
			if t := s.agreements[d.agreementID].terms.acceptTimeout; d.provider == p && d.status == "RECEIVED" && t > 0 {
				d.deadline = now.Add(t)
			}
		}
		s.providerFreedLocked(p)
	}
	s.log.Info("provider reachability set", "provider", p.name, "offline", p.offline)
	s.notify()
	st := ProviderStatus{ID: p.id, Name: p.name, Offline: p.offline}
	s.mu.Unlock()
	if len(remove) > 0 {
		s.removeContainers(r.Context(), remove)
	}
	writeJSON(w, http.StatusOK, st)
}
