package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/spend"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// Budget caps what the application may spend, in the currency its adapters
// report costs in (one: a budget refuses when they report several); zero
// is no cap.
type Budget struct {
	// PerHour caps the application's cost per hour once the replacement
	// runs: the agreed prices of what runs plus the replacement's estimate.
	PerHour float64 `json:"per_hour,omitempty"`
	// Total caps what the application has spent plus the replacement's
	// whole agreement (its estimate over the agreement's expiration).
	Total float64 `json:"total,omitempty"`
}

// IsZero reports a budget with no cap.
func (b Budget) IsZero() bool { return b.PerHour <= 0 && b.Total <= 0 }

// Or is b with each cap it leaves unset taken from o: flags (b) win over
// the descriptor (o).
func (b Budget) Or(o Budget) Budget {
	if b.PerHour <= 0 {
		b.PerHour = o.PerHour
	}
	if b.Total <= 0 {
		b.Total = o.Total
	}
	return b
}

// Spend is what an application has cost so far, in one currency.
type Spend struct {
	// Currency the adapters report in ("" when none reports spend).
	Currency string `json:"currency"`
	// Total is the sum of what the adapters report paid or accepted (for
	// Golem: each agreement's accepted invoice, or else its activities'
	// last accepted debit notes), the state's ledger of removed resources
	// included.
	Total float64 `json:"total"`
	// ByResource splits Total by resource.
	ByResource map[string]float64 `json:"by_resource"`
	// Due is what was asked and not accepted yet.
	Due float64 `json:"due"`
}

// Spender reads what the application has spent. Nil in Config: what the
// adapters report (AdapterSpend).
type Spender interface {
	Spent(ctx context.Context, doc *state.Document, refresh *plan.Plan) (*Spend, error)
}

// AdapterSpend is what the adapters report spent: their answers to the
// refresh (fresher than the state's record), what the state recorded for
// the others, and the state's ledger; summed by core/spend. An
// application whose adapters report in several currencies has no one
// figure: an error says so.
func AdapterSpend(doc *state.Document, refresh *plan.Plan) (*Spend, error) {
	rep, err := spend.Of(doc, spend.Live(refresh, time.Now()))
	if err != nil {
		return nil, err
	}
	cur, err := rep.Currency()
	if err != nil {
		return nil, err
	}
	sp := &Spend{Currency: cur, ByResource: map[string]float64{}}
	for _, r := range slices.Concat(rep.Resources, rep.Ended) {
		sp.ByResource[r.Resource] += spend.Float(r.Amount)
	}
	for _, t := range rep.Totals {
		sp.Total, sp.Due = spend.Float(t.Amount), spend.Float(t.Due)
	}
	return sp, nil
}

// rates are the cost per hour of each resource that runs at its agreed
// price, from a refresh: what its adapter reported with a VALID state.
func rates(refresh *plan.Plan) map[string]*protocol.Cost {
	out := map[string]*protocol.Cost{}
	for _, s := range refresh.Steps {
		if a := s.Answer; a != nil && a.Status == protocol.Valid && a.Gcompose != nil && a.Gcompose.Cost != nil {
			out[s.Resource] = a.Gcompose.Cost
		}
	}
	return out
}

// priceOf sums the agreed rates by currency, for the metrics.
func priceOf(r map[string]*protocol.Cost) map[string]float64 {
	sum := map[string]float64{}
	for _, c := range r {
		sum[c.Currency] += c.PerHour
	}
	return sum
}

// currencyOf is the one currency of the costs a budget check counts: the
// running rates and the repair's estimates. "" when there are none.
func currencyOf(running map[string]*protocol.Cost, repair *plan.Plan) (string, error) {
	seen := map[string]bool{}
	for _, c := range running {
		seen[c.Currency] = true
	}
	for _, s := range repair.Steps {
		if s.Cost != nil {
			seen[s.Cost.Currency] = true
		}
	}
	cs := sortedNames(seen)
	if len(cs) > 1 {
		return "", &spend.MixedError{Currencies: cs}
	}
	if len(cs) == 1 {
		return cs[0], nil
	}
	return "", nil
}

// checkBudget refuses a repair whose replacements would take the
// application over its budget. spent is asked only when a total is set.
//
// A knock-on planned as a possible rebuild (its inputs are known only at
// apply) has no estimate of its own. Per hour it counts at the price it
// runs at, which is right whether it is rebuilt or not. Against the total
// it counts as a new rental at its current agreement's whole cost, although
// it often turns out unchanged: whether it is rebuilt is decided at apply,
// after this check, and nothing checks the budget again then, so counting
// it only when sure would let a repair rent past a cap; counting it can
// refuse a repair that would have fit, which says so with the figures and
// is undone by raising the cap.
func checkBudget(ctx context.Context, b Budget, refresh, repair *plan.Plan, spent func(context.Context) (*Spend, error)) error {
	return budgetCheck(ctx, b, refresh, repair, "the repair", spent)
}

// PlanOverBudget refuses a deploy plan whose rate goes over budget.per_hour
// (what runs and stays at its agreed price, plus each create's and
// rebuild's estimate) or whose new rentals' whole agreements alone go over
// budget.total: what the plan can know of the budget, checked before
// anything is rented (what was spent before counts only in the reconciler,
// which reads it from the payments). pl serves as its own refresh: its
// unchanged steps hold the state answers with their agreed prices.
func PlanOverBudget(ctx context.Context, b Budget, pl *plan.Plan) error {
	return budgetCheck(ctx, b, pl, pl, "the deploy", nil)
}

// budgetCheck is checkBudget for a plan applied after what: spent may be
// nil (nothing known spent: the new rentals alone are held to the total).
func budgetCheck(ctx context.Context, b Budget, refresh, repair *plan.Plan, after string, spent func(context.Context) (*Spend, error)) error {
	if b.IsZero() {
		return nil
	}
	running := rates(refresh)
	cur, err := currencyOf(running, repair)
	if err != nil {
		return &RefusedError{Budget: true, Reason: fmt.Sprintf("%v, and a budget counts one: nothing rented", err)}
	}
	rate, whole := 0.0, 0.0
	var parts, rented []string
	names := map[string]bool{}
	for n := range running {
		names[n] = true
	}
	for _, s := range repair.Steps {
		names[s.Resource] = true
	}
	for _, n := range sortedNames(names) {
		s := repair.Step(n)
		if s == nil || !s.Op.Changes() {
			if c := running[n]; c != nil {
				rate += c.PerHour
				parts = append(parts, fmt.Sprintf("%s %s/h", n, amount(c.PerHour)))
			}
			continue
		}
		c, why := s.Cost, s.Op.Verb()+" estimate"
		switch {
		case c != nil && c.Basis != "":
			why = s.Op.Verb() + ", " + c.Basis + " estimate"
		case c == nil:
			c, why = running[n], "knock-on, may "+s.Op.Verb()+": at its current price"
		}
		if c == nil {
			continue
		}
		rate += c.PerHour
		parts = append(parts, fmt.Sprintf("%s %s/h (%s)", n, amount(c.PerHour), why))
		if s.Op == plan.Create || s.Op == plan.Rebuild {
			whole += c.Total
			rented = append(rented, fmt.Sprintf("%s %s over %gh (%s)", n, amount(c.Total), c.Hours, why))
		}
	}
	if b.PerHour > 0 && rate > b.PerHour {
		return &RefusedError{Budget: true, Reason: fmt.Sprintf("the application would cost %s %s per hour after %s (%s), above budget.per_hour %s: nothing rented",
			amount(rate), cur, after, strings.Join(parts, ", "), amount(b.PerHour))}
	}
	if b.Total > 0 && whole > b.Total && spent == nil {
		return &RefusedError{Budget: true, Reason: fmt.Sprintf("the new rentals' whole agreements cost %s %s (%s), above budget.total %s: nothing rented",
			amount(whole), cur, strings.Join(rented, ", "), amount(b.Total))}
	}
	if b.Total > 0 && whole > 0 && spent != nil {
		sp, err := spent(ctx)
		if err != nil {
			return &RefusedError{Budget: true, Reason: fmt.Sprintf("budget.total is %s %s but what the application has spent cannot be read (%v): nothing rented", amount(b.Total), cur, err)}
		}
		if sp.Currency != "" && cur != "" && sp.Currency != cur {
			return &RefusedError{Budget: true, Reason: fmt.Sprintf("what the application has spent is in %s, its rentals cost %s, and a budget counts one currency: nothing rented", sp.Currency, cur)}
		}
		// What providers asked and was not accepted yet is spent as well:
		// the payments keeper accepts it.
		so := sp.Total + sp.Due
		if so+whole > b.Total {
			return &RefusedError{Budget: true, Reason: fmt.Sprintf("spent %s %s (%s accepted, %s due) + the new rentals' whole agreements %s (%s) = %s, above budget.total %s: nothing rented",
				amount(so), cur, amount(sp.Total), amount(sp.Due), amount(whole), strings.Join(rented, ", "), amount(so+whole), amount(b.Total))}
		}
	}
	return nil
}

// amount formats an amount without float noise.
func amount(f float64) string {
	s := fmt.Sprintf("%.6f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
