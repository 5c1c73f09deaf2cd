package devnet

import (
	"fmt"
	"net/http"

	"github.com/docker/docker/api/types/container"
)

// AdminPrefix is where the devnet's own (non-yagna) endpoints live: fault knobs and a summary.
const AdminPrefix = "/devnet/v1"

func (s *Server) routeAdmin(handle func(string, func(http.ResponseWriter, *http.Request))) {
	handle("GET "+AdminPrefix+"/faults", s.getFaults)
	handle("PUT "+AdminPrefix+"/faults", s.putFaults)
	handle("POST "+AdminPrefix+"/activities/{id}/kill", s.killActivity)
	handle("GET "+AdminPrefix+"/summary", s.summary)
	handle("GET "+AdminPrefix+"/info", s.info)
	handle("GET "+AdminPrefix+"/providers", s.listProviders)
	handle("PUT "+AdminPrefix+"/providers/{id}", s.putProvider)
	handle("PUT "+AdminPrefix+"/providers/{id}/offer", s.putOffer)
	s.routeKill(handle)
}

func (s *Server) getFaults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.faults)
}

// putFaults replaces the fault knobs: {"rejectProposals": bool, "rejectAgreements": bool, "slow": "250ms"}.
func (s *Server) putFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if !readJSON(w, r, &f) {
		return
	}
	if err := f.check(); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	s.log.Info("faults set", "faults", fmt.Sprintf("%+v", f))
	writeJSON(w, http.StatusOK, f)
}

// killActivity kills an activity's container behind the requestor's back (SIGKILL): the activity then
// shows as Terminated.
func (s *Server) killActivity(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	act, ok := s.activityOr404(w, r.PathValue("id"))
	var cid string
	if ok {
		cid = act.containerID
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	if cid == "" {
		writeError(w, http.StatusConflict, "activity %s has no container (not deployed)", act.id)
		return
	}
	if err := s.docker.ContainerKill(r.Context(), cid, "KILL"); err != nil {
		writeError(w, http.StatusInternalServerError, "killing container of activity %s: %v", act.id, err)
		return
	}
	_ = s.docker.ContainerStop(r.Context(), cid, container.StopOptions{})
	s.refreshLiveness(r.Context(), act)
	w.WriteHeader(http.StatusNoContent)
}

// Summary counts what is alive: what a test checks after a destroy.
type Summary struct {
	// Demands are the live demands of apps; the market watcher's (marked
	// gcompose.offer-watcher, adapters/golem/service/watch.go) are Watched:
	// they outlive an app by design, and end when the watcher stops.
	Demands     int `json:"demands"`
	Watched     int `json:"watched"`
	Agreements  int `json:"agreements"`  // Approved ones
	Activities  int `json:"activities"`  // not Terminated
	Allocations int `json:"allocations"` // not released
	Networks    int `json:"networks"`
	Providers   int `json:"providers"`
	// PendingAgreements are confirmed agreements the provider has not approved yet: they hold its
	// capacity until approved, cancelled or expired.
	PendingAgreements int `json:"pendingAgreements"`
	// UnpaidInvoices are invoices received and not accepted: money a provider is still owed.
	UnpaidInvoices int `json:"unpaidInvoices"`
}

func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sm := Summary{Allocations: len(s.allocations), Networks: len(s.networks), Providers: len(s.providers)}
	for _, d := range s.demands {
		switch {
		case d.unsubscribed:
		case d.props["gcompose.offer-watcher"] == true:
			sm.Watched++
		default:
			sm.Demands++
		}
	}
	for _, a := range s.agreements {
		switch a.state {
		case "Approved":
			sm.Agreements++
		case "Pending":
			sm.PendingAgreements++
		}
	}
	for _, a := range s.activities {
		if a.state != "Terminated" {
			sm.Activities++
		}
	}
	for _, i := range s.invoices {
		if i.status == "RECEIVED" {
			sm.UnpaidInvoices++
		}
	}
	writeJSON(w, http.StatusOK, sm)
}

// Info is the devnet's answer to GET /devnet/v1/info: the explicit sign that the yagna at an URL is this
// devnet (a real yagna answers 404 there), and the Docker engine whose local images are its payloads, so
// that a client builds a payload's image (build:) on that very engine or says it cannot.
type Info struct {
	// Kind is always "gcompose-devnet".
	Kind string `json:"kind"`
	// EngineID is the ID the engine answers in GET /info (docker info's ID).
	EngineID string `json:"engine_id"`
}

// InfoKind is Info.Kind.
const InfoKind = "gcompose-devnet"

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	in, err := s.docker.Info(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "asking the Docker engine who it is: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, Info{Kind: InfoKind, EngineID: in.ID})
}
