package devnet

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// listPage is how yagna lists debit notes and invoices (GET /debitNotes, /invoices): those dated
// strictly after afterTimestamp, oldest first, at most maxItems of them
// (core/payment/src/dao/debit_note.rs and invoice.rs get_for_node_id: timestamp.gt(after),
// order_by(timestamp.asc()), limit(max_items)). ok is false after a 400 for a malformed parameter.
func listPage[T any](w http.ResponseWriter, r *http.Request, m map[string]T, created func(T) time.Time, render func(T) map[string]any) ([]map[string]any, bool) {
	after, ok := afterTimestamp(w, r)
	if !ok {
		return nil, false
	}
	limit := -1
	if q := r.URL.Query().Get("maxItems"); q != "" {
		n, err := strconv.ParseUint(q, 10, 32)
		if err != nil {
			writeError(w, http.StatusBadRequest, "maxItems must be a non-negative integer, got %q", q)
			return nil, false
		}
		limit = int(n)
	}
	all := make([]T, 0, len(m))
	for _, v := range m {
		all = append(all, v)
	}
	sort.Slice(all, func(i, j int) bool { return created(all[i]).Before(created(all[j])) })
	out := []map[string]any{}
	for _, v := range all {
		if limit >= 0 && len(out) == limit {
			break
		}
		if created(v).After(after) {
			out = append(out, render(v))
		}
	}
	return out, true
}

// seedHistory gives the requestor a past: n debit notes of an agreement that ended long ago, settled
// (ACCEPTED), dated before now, as on a node that has run apps for months.
func (s *Server) seedHistory(n int) {
	if n <= 0 || len(s.providers) == 0 {
		return
	}
	p := s.providers[0]
	start := time.Now().UTC().Add(-time.Duration(n) * time.Minute)
	agreement, activity := "history-"+newID(), "history-"+newID()
	prev := ""
	for i := range n {
		d := &debitNote{id: newID(), prevID: prev, agreementID: agreement, activityID: activity, provider: p,
			platform: p.cfg.PaymentPlatforms[0], payer: s.cfg.Identity, due: mustAmount(fmt.Sprintf("%d", i+1)),
			usage: []float64{float64(60 * (i + 1)), float64(60 * (i + 1))}, created: start.Add(time.Duration(i) * time.Minute), status: "ACCEPTED"}
		s.debitNotes[d.id] = d
		prev = d.id
	}
}

func mustAmount(s string) *ratAmount {
	a, err := parseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}
