package spend_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/spend"
	"github.com/gcompose/gcompose/core/state"
)

func TestOfSumsByCurrencyWithTheLedger(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	doc := state.NewDocument("app")
	doc.Resources["db"] = &state.Resource{Name: "db", Spent: &state.Spent{Amount: "0.1", Due: "0.02", PerHour: "0.36", Currency: "EUR", At: at}}
	doc.Resources["web"] = &state.Resource{Name: "web", Spent: &state.Spent{Amount: "0.000000000000000001", Currency: "EUR", At: at}}
	doc.Resources["file"] = &state.Resource{Name: "file"} // reports nothing
	// A removed resource runs no more: its last rate does not count.
	doc.Ledger = []state.Ended{{Resource: "old", Spent: state.Spent{Amount: "0.9", PerHour: "5", Currency: "EUR"}, EndedAt: at}}
	// A refresh's answer is fresher than what the state recorded.
	live := map[string]*state.Spent{"db": {Amount: "0.2", Due: "0", PerHour: "0.36", Currency: "EUR", At: at}}
	rep, err := spend.Of(doc, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Resources) != 2 || rep.Resources[0].Resource != "db" || rep.Resources[0].Amount != "0.2" || len(rep.Ended) != 1 {
		t.Fatalf("rows %+v, ended %+v", rep.Resources, rep.Ended)
	}
	want := spend.Total{Currency: "EUR", Amount: "1.100000000000000001", Due: "0", PerHour: "0.36", Resources: 2, Ended: 1}
	if len(rep.Totals) != 1 || rep.Totals[0] != want {
		t.Fatalf("totals %+v, want [%+v]", rep.Totals, want)
	}
	if c, err := rep.Currency(); c != "EUR" || err != nil {
		t.Fatalf("Currency() = %q, %v", c, err)
	}
}

func TestMixedCurrenciesAreNamed(t *testing.T) {
	doc := state.NewDocument("app")
	doc.Resources["a"] = &state.Resource{Name: "a", Spent: &state.Spent{Amount: "1", Currency: "USD"}}
	doc.Ledger = []state.Ended{{Resource: "b", Spent: state.Spent{Amount: "2", Currency: "EUR"}}}
	rep, err := spend.Of(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Totals) != 2 || rep.Totals[0].Currency != "EUR" || rep.Totals[1].Amount != "1" {
		t.Fatalf("totals %+v", rep.Totals)
	}
	_, err = rep.Currency()
	var me *spend.MixedError
	if !errors.As(err, &me) || err.Error() != "the adapters report costs in several currencies (EUR, USD): one figure cannot add them up" {
		t.Fatalf("Currency() error = %v", err)
	}
}

func TestABadAmountIsRefused(t *testing.T) {
	doc := state.NewDocument("app")
	doc.Resources["a"] = &state.Resource{Name: "a", Spent: &state.Spent{Amount: "lots", Currency: "USD"}}
	if _, err := spend.Of(doc, nil); err == nil || err.Error() != `what a cost: amount "lots" is not a decimal number` {
		t.Fatalf("err = %v", err)
	}
}
