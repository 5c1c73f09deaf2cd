package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/protocol"
)

// The deploy plan is held to the descriptor's budget before anything is
// rented (plan and deploy, cmd/gcompose planBudget): per hour, what runs
// and stays at its agreed price plus each create's and rebuild's estimate;
// total, the new rentals' whole agreements alone (what was spent before
// counts only in the reconciler).
func TestPlanOverBudget(t *testing.T) {
	glm := func(perHour, hours float64, basis string) *protocol.Cost {
		return &protocol.Cost{Currency: "XTS", PerHour: perHour, Hours: hours, Total: perHour * hours, Basis: basis}
	}
	// db runs at 0.5/h and stays; web is created (1/h over 3h); api is
	// rebuilt (its running price 2/h no longer counts, its estimate 0.25/h
	// over 4h does). Steps are in name order, as a plan keeps them.
	pl := &plan.Plan{Steps: []*plan.Step{
		{Resource: "services.api", Op: plan.Rebuild, Cost: glm(0.25, 4, protocol.CostMarket),
			Answer: &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Cost: glm(2, 3, protocol.CostAgreed)}}},
		{Resource: "services.db", Op: plan.NoOp, Answer: &protocol.StateResult{Status: protocol.Valid, Gcompose: &protocol.StateExt{Cost: glm(0.5, 3, protocol.CostAgreed)}}},
		{Resource: "services.web", Op: plan.Create, Cost: glm(1, 3, protocol.CostMarket)},
	}}
	for _, tc := range []struct {
		name   string
		budget Budget
		want   string // in the refusal; "" passes
	}{
		{"no budget", Budget{}, ""},
		{"per hour enough", Budget{PerHour: 1.75}, ""},
		{"per hour below", Budget{PerHour: 1.7}, "the application would cost 1.75 XTS per hour after the deploy (services.api 0.25/h (rebuild, market estimate), services.db 0.5/h, services.web 1/h (create, market estimate)), above budget.per_hour 1.7: nothing rented"},
		{"total enough", Budget{Total: 4}, ""},
		{"total below", Budget{Total: 3.9}, "the new rentals' whole agreements cost 4 XTS (services.api 1 over 4h (rebuild, market estimate), services.web 3 over 3h (create, market estimate)), above budget.total 3.9: nothing rented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := PlanOverBudget(context.Background(), tc.budget, pl)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || !re.Budget || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a budget refusal saying %q", err, tc.want)
			}
		})
	}
}
