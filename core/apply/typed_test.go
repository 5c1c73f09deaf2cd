package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// quotaError is an error type an adapter client could return: one that
// names its resource (plan.Addressed).
type quotaError struct{ resource string }

func (e *quotaError) Error() string           { return e.resource + ": " + e.Reason() }
func (e *quotaError) Reason() string          { return "state call: quota exceeded" }
func (e *quotaError) ResourceAddress() string { return e.resource }

// quotaAdapters fails the state calls of one resource with a quotaError.
type quotaAdapters struct {
	*memadapter.Adapter
	failing string
}

func (a *quotaAdapters) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	if c.Name == a.failing {
		return nil, &quotaError{resource: c.Name}
	}
	return a.Adapter.State(ctx, c, desired)
}

// A step that failed planning reaches apply's outcome with its error typed
// (errors.As finds it), its message naming the resource once, and what
// depends on it is not started.
func TestPlanningErrorStaysTyped(t *testing.T) {
	f := newFixture()
	ad := &quotaAdapters{Adapter: f.ad, failing: "resources.c"}
	p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(4)}
	pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), State: f.store.snapshot()})
	if err == nil || pl == nil {
		t.Fatalf("plan: %v, %v; want the plan with c failed, and an error", pl, err)
	}
	var s *plan.Step
	for _, st := range pl.Steps {
		if st.Resource == "resources.c" {
			s = st
		}
	}
	if s == nil || s.Op != plan.Failed {
		t.Fatalf("step of c: %+v", s)
	}
	ex := &apply.Executor{Adapters: ad, Store: f.store, Walk: engine.GraphWalk(4)}
	res, _ := ex.Apply(context.Background(), pl)
	o := res.Outcomes["resources.c"]
	var qe *quotaError
	if o == nil || !errors.As(o.Err, &qe) || qe.resource != "resources.c" {
		t.Fatalf("outcome of c: %+v, want a *quotaError in its chain", o)
	}
	if msg := o.Err.Error(); msg != "state call: quota exceeded" || strings.Contains(msg, "resources.c") {
		t.Fatalf("outcome message %q, want the error without the resource's name (the outcome names it)", msg)
	}
	if _, made := f.ad.Objects()["resources.d"]; made {
		t.Fatal("d, which depends on the failed c, was made")
	}
}
