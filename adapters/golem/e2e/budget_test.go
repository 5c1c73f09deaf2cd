package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// TestDeployHeldToTheBudget: the descriptor's budget (per_hour, total) is
// checked by the plan, as the reconciler checks a repair: a plan whose
// estimate goes over it exits 1 naming the budget and the figures, and a
// deploy refuses before anything is made (no allocation, VPN or agreement);
// within the budget the same app deploys. The old plan exited 0 and the
// deploy rented over the budget (only the reconciler read it).
func TestDeployHeldToTheBudget(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{Providers: reconcileProviders(5)})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// Each service rents at 1.08 GLM/h, 3.24 GLM over its 3 h agreement.
	for _, tc := range []struct{ budget, want string }{
		{"per_hour: 1", "above budget.per_hour 1: nothing rented"},
		{"total: 5", "above budget.total 5: nothing rented"},
	} {
		desc := e.webappWith("budget:\n  " + tc.budget + "\n")
		for _, args := range [][]string{{"plan", "-f", desc}, {"deploy", "-f", desc, "--yes"}} {
			out, err := e.gcompose(ctx, args...)
			if err == nil {
				t.Fatalf("%s with budget %s: exit 0\n%s", args[0], tc.budget, out)
			}
			if !strings.Contains(out, "over the descriptor's budget") || !strings.Contains(out, tc.want) {
				t.Errorf("%s with budget %s does not say why:\n%s", args[0], tc.budget, out)
			}
			if s := e.summary(ctx); s.Allocations != 0 || s.Networks != 0 || s.Agreements != 0 || s.Demands != 0 {
				t.Fatalf("%s with budget %s made something: %+v", args[0], tc.budget, s)
			}
		}
	}
	desc := e.webappWith("budget:\n  per_hour: 3\n  total: 7\n")
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 2 {
		t.Fatalf("within the budget: %+v, want 2 agreements", s)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
}
