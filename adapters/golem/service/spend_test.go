package service

import (
	"fmt"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

func TestTally(t *testing.T) {
	note := func(ag, act, amt string, st yagna.InvoiceStatus) yagna.DebitNote {
		return yagna.DebitNote{DebitNoteID: ag + act + amt, AgreementID: ag, ActivityID: act, TotalAmountDue: amt, Status: st}
	}
	acc, rec := yagna.StatusAccepted, yagna.StatusReceived
	for _, tc := range []struct {
		name        string
		mine        []string
		notes       []yagna.DebitNote
		invoices    []yagna.Invoice
		amount, due string
		items       int
	}{
		{"the last accepted note of each activity counts; what is asked beyond it is due",
			[]string{"a1"},
			[]yagna.DebitNote{note("a1", "x", "0.1", acc), note("a1", "x", "0.2", acc), note("a1", "x", "0.3", rec), note("a1", "y", "0.05", acc)},
			nil, "0.25", "0.1", 1},
		{"an accepted invoice covers the whole agreement",
			[]string{"a1"},
			[]yagna.DebitNote{note("a1", "x", "0.2", acc), note("a1", "x", "0.3", rec)},
			[]yagna.Invoice{{InvoiceID: "i1", AgreementID: "a1", Amount: "0.35", Status: yagna.StatusSettled}},
			"0.35", "", 1},
		{"an invoice not accepted yet is due beyond the accepted notes",
			[]string{"a1"},
			[]yagna.DebitNote{note("a1", "x", "0.2", acc)},
			[]yagna.Invoice{{InvoiceID: "i1", AgreementID: "a1", Amount: "0.4", Status: rec}},
			"0.2", "0.2", 1},
		{"a replaced rental counts; other resources' agreements do not",
			[]string{"a1", "a2"},
			[]yagna.DebitNote{note("a1", "x", "0.5", acc), note("a2", "z", "0.1", acc), note("a3", "w", "0.7", acc), note("other", "o", "9", acc)},
			[]yagna.Invoice{{InvoiceID: "i9", AgreementID: "other", Amount: "9", Status: acc}},
			"0.6", "", 2},
		{"amounts stay exact to the wei",
			[]string{"a1"},
			[]yagna.DebitNote{note("a1", "x", "0.000000000000000001", acc), note("a1", "y", "0.1", acc)},
			nil, "0.100000000000000001", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mine := map[string]bool{}
			for _, a := range tc.mine {
				mine[a] = true
			}
			sp, err := tally(mine, tc.notes, tc.invoices)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Amount != tc.amount || sp.Due != tc.due || sp.Items != tc.items || sp.Currency != "GLM" {
				t.Fatalf("spent %+v, want amount %s, due %q, %d agreement(s)", sp, tc.amount, tc.due, tc.items)
			}
		})
	}
	if _, err := tally(map[string]bool{"a1": true}, []yagna.DebitNote{note("a1", "x", "lots", acc)}, nil); err == nil {
		t.Fatal("a note whose amount is not a number was added up")
	}
}

// TestAgreementsOf: the agreement a service runs on and its history; a
// rebuild in progress (the delete cleared the agreement) keeps the history.
func TestAgreementsOf(t *testing.T) {
	for _, tc := range []struct {
		id   Identity
		want map[string]bool
	}{
		{Identity{AgreementID: "a3", Agreements: []string{"a1", "a2", "a3"}}, map[string]bool{"a1": true, "a2": true, "a3": true}},
		{Identity{Agreements: []string{"w1"}}, map[string]bool{"w1": true}},
		{Identity{AgreementID: "o1"}, map[string]bool{"o1": true}},
		{Identity{}, map[string]bool{}},
	} {
		if got := agreementsOf(tc.id); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("agreementsOf(%+v) = %v, want %v", tc.id, got, tc.want)
		}
	}
}
