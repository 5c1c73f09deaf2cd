package main

import (
	"maps"
	"math"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/core/state"
)

func TestTallyCost(t *testing.T) {
	doc := &state.Document{App: "shop", Lineage: "l1", Resources: map[string]*state.Resource{
		"services.db":  {Name: "services.db", Status: state.StatusActive, Identity: map[string]any{"price": map[string]any{"glm_per_hour": 0.36}}},
		"services.web": {Name: "services.web", Status: state.StatusActive},
	}}
	note := func(ag, act, amt string, st yagna.InvoiceStatus) yagna.DebitNote {
		return yagna.DebitNote{DebitNoteID: ag + act + amt, AgreementID: ag, ActivityID: act, TotalAmountDue: amt, Status: st}
	}
	acc, rec := yagna.StatusAccepted, yagna.StatusReceived
	for _, tc := range []struct {
		name     string
		mine     map[string]string
		notes    []yagna.DebitNote
		invoices []yagna.Invoice
		want     map[string]costRow
	}{
		{"the last accepted note of each activity counts; what is asked beyond it is due",
			map[string]string{"a1": "services.db"},
			[]yagna.DebitNote{note("a1", "x", "0.1", acc), note("a1", "x", "0.2", acc), note("a1", "x", "0.3", rec), note("a1", "y", "0.05", acc)},
			nil,
			map[string]costRow{"services.db": {Agreements: 1, Accepted: 0.25, Due: 0.1, PerHour: 0.36}}},
		{"an accepted invoice covers the whole agreement",
			map[string]string{"a1": "services.db"},
			[]yagna.DebitNote{note("a1", "x", "0.2", acc), note("a1", "x", "0.3", rec)},
			[]yagna.Invoice{{InvoiceID: "i1", AgreementID: "a1", Amount: "0.35", Status: yagna.StatusSettled}},
			map[string]costRow{"services.db": {Agreements: 1, Accepted: 0.35, PerHour: 0.36}}},
		{"an invoice not accepted yet is due beyond the accepted notes",
			map[string]string{"a1": "services.db"},
			[]yagna.DebitNote{note("a1", "x", "0.2", acc)},
			[]yagna.Invoice{{InvoiceID: "i1", AgreementID: "a1", Amount: "0.4", Status: rec}},
			map[string]costRow{"services.db": {Agreements: 1, Accepted: 0.2, Due: 0.2, PerHour: 0.36}}},
		{"a replaced rental counts towards its resource; others' agreements do not count",
			map[string]string{"a1": "services.db", "a2": "services.db", "a3": "services.web"},
			[]yagna.DebitNote{note("a1", "x", "0.5", acc), note("a2", "z", "0.1", acc), note("a3", "w", "0.7", acc), note("other", "o", "9", acc)},
			[]yagna.Invoice{{InvoiceID: "i9", AgreementID: "other", Amount: "9", Status: acc}},
			map[string]costRow{"services.db": {Agreements: 2, Accepted: 0.6, PerHour: 0.36}, "services.web": {Agreements: 1, Accepted: 0.7}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := tally("shop", doc, tc.mine, tc.notes, tc.invoices)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Resources) != len(tc.want) {
				t.Fatalf("rows %+v, want %+v", rep.Resources, tc.want)
			}
			var total costRow
			for _, r := range rep.Resources {
				w, ok := tc.want[r.Resource]
				if !ok || r.Agreements != w.Agreements || !near(r.Accepted, w.Accepted) || !near(r.Due, w.Due) || !near(r.PerHour, w.PerHour) {
					t.Fatalf("row %+v, want %+v", r, w)
				}
				total.Agreements += w.Agreements
				total.Accepted += w.Accepted
			}
			if rep.Total.Agreements != total.Agreements || !near(rep.Total.Accepted, total.Accepted) {
				t.Fatalf("total %+v, want %+v", rep.Total, total)
			}
		})
	}
	if _, err := tally("shop", doc, map[string]string{"a1": "services.db"}, []yagna.DebitNote{note("a1", "x", "lots", acc)}, nil); err == nil {
		t.Fatal("a note whose amount is not a number was added up")
	}
}

// TestLedgerOf: the agreements the state records, by resource: each
// service's history (as the state's JSON holds it) and the agreement it
// runs on, which a state written before there was a history lists alone.
func TestLedgerOf(t *testing.T) {
	doc := &state.Document{App: "shop", Resources: map[string]*state.Resource{
		"services.db": {Name: "services.db", Identity: map[string]any{"agreement_id": "a3", "agreements": []any{"a1", "a2", "a3"}}},
		// Rebuilding: the delete cleared the agreement, the history stays.
		"services.web":   {Name: "services.web", Identity: map[string]any{"agreement_id": "", "agreements": []any{"w1"}}},
		"services.old":   {Name: "services.old", Identity: map[string]any{"agreement_id": "o1"}},
		"resources.file": {Name: "resources.file", Identity: map[string]any{"path": "a.txt"}},
	}}
	want := map[string]string{"a1": "services.db", "a2": "services.db", "a3": "services.db", "w1": "services.web", "o1": "services.old"}
	if got := ledgerOf(doc); !maps.Equal(got, want) {
		t.Fatalf("ledgerOf = %v, want %v", got, want)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
