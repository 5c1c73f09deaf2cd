package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/reconcile"
)

// planBudget holds a deploy plan to the descriptor's budget (budget:
// per_hour, total) before anything is rented: plan exits 1 and deploy
// refuses, as the reconciler refuses a repair (docs/descriptor.md#budget).
func planBudget(ctx context.Context, p *project.Project, mode plan.Mode, pl *plan.Plan) error {
	if mode != plan.Deploy || pl == nil || p == nil || p.App == nil || p.App.Budget == nil {
		return nil
	}
	b := reconcile.Budget{PerHour: p.App.Budget.PerHour, Total: p.App.Budget.Total}
	err := reconcile.PlanOverBudget(ctx, b, pl)
	var refused *reconcile.RefusedError
	if errors.As(err, &refused) {
		return fmt.Errorf("over the descriptor's budget: %s", refused.Reason)
	}
	return err
}
