package devnet

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/container"
)

// providerLoop is the providers' side of the running agreements: it issues debit notes for running
// activities, terminates agreements whose debit notes go unaccepted past the timeout, that expired or
// on which no activity runs (expiry.go), and notices dead activity containers.
func (s *Server) providerLoop() {
	defer s.bg.Done()
	tick := time.NewTicker(s.tickInterval())
	defer tick.Stop()
	lastLiveness := time.Time{}
	for {
		select {
		case <-s.bgCtx.Done():
			return
		case now := <-tick.C:
			if now.Sub(lastLiveness) >= time.Second {
				lastLiveness = now
				s.checkLiveness(s.bgCtx)
			}
			s.paymentsTick(now)
		}
	}
}

func (s *Server) tickInterval() time.Duration {
	d := min(s.cfg.DebitNoteInterval.Duration, s.cfg.DebitNoteAcceptTimeout.Duration) / 10
	return max(min(d, time.Second), 20*time.Millisecond)
}

func (s *Server) checkLiveness(ctx context.Context) {
	s.mu.Lock()
	var acts []*activity
	for _, a := range s.activities {
		if a.containerID != "" && a.state != "Terminated" {
			acts = append(acts, a)
		}
	}
	s.mu.Unlock()
	if len(acts) == 0 {
		return
	}
	// One list of this instance's containers, not an inspect per activity every second: 30 running
	// activities made 30 engine calls a second beside the deploys. An activity whose container the list
	// does not show running (or created, not started yet) is inspected, which says why it died.
	alive := map[string]bool{}
	cs, err := s.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: s.instanceFilter()})
	if err != nil {
		alive = nil
	}
	for _, c := range cs {
		if c.State == "running" || c.State == "created" {
			alive[c.ID] = true
		}
	}
	for _, a := range acts {
		s.mu.Lock()
		cid := a.containerID
		s.mu.Unlock()
		if alive == nil || !alive[cid] {
			s.refreshLiveness(ctx, a)
		}
	}
}

func (s *Server) paymentsTick(now time.Time) {
	s.mu.Lock()
	var remove []string
	for _, act := range s.activities {
		// A provider cut off from the network can send no debit note.
		if act.state == "Ready" && now.Sub(act.lastNoteAt) >= s.agreements[act.agreementID].terms.noteInterval && s.agreements[act.agreementID].provider.offline == 0 {
			s.issueDebitNoteLocked(act, now)
		}
	}
	s.approvePendingLocked(now)
	s.releaseExpiredLocked(now)
	remove = append(remove, s.endAgreementsLocked(now)...)
	for _, a := range s.agreements {
		if a.state == "Terminated" && a.invoiceID == "" && now.Sub(a.ended) >= s.faults.InvoiceDelay.Duration && a.provider.offline == 0 {
			s.issueInvoiceLocked(a)
			s.notify()
		}
		if (a.state == "Proposal" || a.state == "Pending") && now.After(a.validTo) {
			a.state = "Expired"
			s.providerFreedLocked(a.provider)
		}
		// A requestor that promised no acceptance deadline is not held to one.
		if a.state != "Approved" || a.provider.offline != 0 || a.terms.acceptTimeout <= 0 {
			continue
		}
		for _, d := range s.debitNotes {
			if d.agreementID == a.id && d.status == "RECEIVED" && !d.deadline.IsZero() && now.After(d.deadline) {
				remove = append(remove, s.terminateLocked(a, byProvider, map[string]any{
					"message":             "debit note " + d.id + " not accepted within " + a.terms.acceptTimeout.String(),
					"golem.provider.code": "DebitNotesDeadline",
				})...)
				break
			}
		}
	}
	s.mu.Unlock()
	if len(remove) > 0 {
		s.removeContainers(s.bgCtx, remove)
	}
}
