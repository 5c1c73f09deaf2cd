package plan_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
)

// An output may read a resource a lowering adds (resolve.Options.Implicit);
// when the lowering did not add it, the plan fails naming it, instead of a
// deploy that ends with the output unreported.
func TestOutputOfAResourceTheAppLacksFailsThePlan(t *testing.T) {
	p := &plan.Planner{Adapters: memadapter.New(), Walk: engine.GraphWalk(2)}
	in := plan.Input{App: "app", Mode: plan.Deploy, Desired: chain("v1", "nginx"), State: state.NewDocument("app"),
		Outputs: map[string]any{"url": "${resources.golem-proxy-webb.state.url}"}}
	_, err := p.Plan(context.Background(), in)
	var ns *plan.NoSuchResourceError
	if !errors.As(err, &ns) || ns.Resource != "resources.golem-proxy-webb" {
		t.Fatalf("plan error %v, want the missing resource named", err)
	}
	in.Outputs = map[string]any{"url": "http://${services.web.image}/", "app": "${app.id}"}
	if _, err := p.Plan(context.Background(), in); err != nil {
		t.Fatalf("plan with outputs of existing resources: %v", err)
	}
}
