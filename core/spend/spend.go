// Package spend sums what an application has cost, from what its adapters
// report (protocol.Spent, recorded with each resource as state.Spent) and
// the state's ledger of removed resources. Adapters own the accounting: a
// Golem adapter counts debit notes, another its cloud's bill; this package
// only adds their figures up, by currency, and never assumes one.
package spend

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// Row is what one resource has cost: a deployed one (Ended zero) or one
// of the ledger.
type Row struct {
	Resource string `json:"resource"`
	Type     string `json:"type,omitempty"`
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
	Due      string `json:"due,omitempty"`
	PerHour  string `json:"per_hour,omitempty"`
	Covers   string `json:"covers,omitempty"`
	Items    int    `json:"items,omitempty"`
	// At is when its adapter reported the figures.
	At time.Time `json:"at"`
	// Ended is when gcompose removed it (ledger rows only).
	Ended *time.Time `json:"ended,omitempty"`
}

// Total is the sum of the rows in one currency.
type Total struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
	Due      string `json:"due"`
	PerHour  string `json:"per_hour"`
	// Resources counts the deployed rows, Ended the ledger's.
	Resources int `json:"resources"`
	Ended     int `json:"ended"`
}

// Report is what an application has cost.
type Report struct {
	App     string `json:"app"`
	Lineage string `json:"lineage"`
	// Resources are the deployed resources whose adapters report spend,
	// by name.
	Resources []Row `json:"resources"`
	// Ended are the ledger's rows, oldest first.
	Ended []Row `json:"ended"`
	// Totals by currency, in currency order.
	Totals []Total `json:"totals"`
}

// Of sums doc's spend: each resource's recorded Spent, replaced by a
// fresher one from live (a refresh's answers, by resource) when given, and
// the ledger.
func Of(doc *state.Document, live map[string]*state.Spent) (*Report, error) {
	rep := &Report{App: doc.App, Lineage: doc.Lineage, Resources: []Row{}, Ended: []Row{}, Totals: []Total{}}
	for _, name := range doc.Names() {
		res := doc.Resources[name]
		sp := res.Spent
		if l := live[name]; l != nil {
			sp = l
		}
		if sp != nil {
			rep.Resources = append(rep.Resources, rowOf(name, res.Type, sp, nil))
		}
	}
	for _, e := range doc.Ledger {
		at := e.EndedAt
		rep.Ended = append(rep.Ended, rowOf(e.Resource, e.Type, &e.Spent, &at))
	}
	type sums struct {
		amount, due, perHour *big.Rat
		t                    Total
	}
	by := map[string]*sums{}
	add := func(r Row) error {
		s := by[r.Currency]
		if s == nil {
			s = &sums{amount: new(big.Rat), due: new(big.Rat), perHour: new(big.Rat), t: Total{Currency: r.Currency}}
			by[r.Currency] = s
		}
		for _, f := range []struct {
			sum *big.Rat
			v   string
		}{{s.amount, r.Amount}, {s.due, r.Due}, {s.perHour, r.PerHour}} {
			v, err := Parse(f.v)
			if err != nil {
				return fmt.Errorf("what %s cost: %w", r.Resource, err)
			}
			f.sum.Add(f.sum, v)
		}
		if r.Ended != nil {
			s.t.Ended++
		} else {
			s.t.Resources++
		}
		return nil
	}
	for _, r := range slices.Concat(rep.Resources, rep.Ended) {
		if err := add(r); err != nil {
			return nil, err
		}
	}
	for _, c := range sortedKeys(by) {
		s := by[c]
		s.t.Amount, s.t.Due, s.t.PerHour = Format(s.amount), Format(s.due), Format(s.perHour)
		rep.Totals = append(rep.Totals, s.t)
	}
	return rep, nil
}

// rowOf is a resource's row; a removed one (ended) runs no more, so its
// last rate is not a rate.
func rowOf(name, typ string, sp *state.Spent, ended *time.Time) Row {
	if ended != nil {
		c := *sp
		c.PerHour = ""
		sp = &c
	}
	return Row{Resource: name, Type: typ, Currency: sp.Currency, Amount: sp.Amount, Due: sp.Due, PerHour: sp.PerHour,
		Covers: sp.Covers, Items: sp.Items, At: sp.At, Ended: ended}
}

// Currency is the one currency rep's adapters report in: "" when none
// reports, an error naming them when they report several (a budget or a
// total counts one).
func (rep *Report) Currency() (string, error) {
	switch len(rep.Totals) {
	case 0:
		return "", nil
	case 1:
		return rep.Totals[0].Currency, nil
	}
	var cs []string
	for _, t := range rep.Totals {
		cs = append(cs, t.Currency)
	}
	return "", &MixedError{Currencies: cs}
}

// MixedError says the adapters report in several currencies, which no
// single figure adds up.
type MixedError struct{ Currencies []string }

func (e *MixedError) Error() string {
	return fmt.Sprintf("the adapters report costs in several currencies (%s): one figure cannot add them up", strings.Join(e.Currencies, ", "))
}

// Live is what a plan's state answers report spent, by resource: fresher
// than what the state recorded at the last deploy.
func Live(pl *plan.Plan, at time.Time) map[string]*state.Spent {
	out := map[string]*state.Spent{}
	if pl == nil {
		return out
	}
	for _, s := range pl.Steps {
		if s.Answer != nil && s.Answer.Gcompose != nil && s.Answer.Gcompose.Spent != nil {
			out[s.Resource] = FromProtocol(s.Answer.Gcompose.Spent, at)
		}
	}
	return out
}

// FromProtocol is an adapter's report as the state records it.
func FromProtocol(sp *protocol.Spent, at time.Time) *state.Spent {
	if sp == nil {
		return nil
	}
	return &state.Spent{Amount: sp.Amount, Currency: sp.Currency, Due: sp.Due, PerHour: sp.PerHour, Covers: sp.Covers, Items: sp.Items, At: at.UTC()}
}

// Parse reads a decimal amount ("" is 0).
func Parse(s string) (*big.Rat, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return new(big.Rat), nil
	}
	v, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("amount %q is not a decimal number", s)
	}
	return v, nil
}

// Format writes an amount to 18 decimals (the finest unit of the tokens
// adapters report in), without trailing zeros: sums stay exact.
func Format(v *big.Rat) string {
	s := strings.TrimRight(v.FloatString(18), "0")
	return strings.TrimSuffix(s, ".")
}

// Float is an amount for a metric or a budget comparison.
func Float(s string) float64 {
	v, err := Parse(s)
	if err != nil {
		return 0
	}
	f, _ := v.Float64()
	return f
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
