package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/memadapter"
)

// Errors stay typed through Run: a caller (the CLI, a reconciler) matches
// what refused a plan or failed a resource with errors.As, never by
// parsing a message.
func TestRunErrorsStayTyped(t *testing.T) {
	t.Run("protected, at plan time", func(t *testing.T) {
		ad := memadapter.New()
		ad.Rebuild = []string{"value"}
		e, _ := newEngine(t, ad)
		want := diamond("v1")
		want["resources.c"].Protect = true
		deploy(t, e, want)
		want = diamond("v1")
		want["resources.c"].Protect = true
		want["resources.c"].Config["value"] = "c2"
		_, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: want})
		var pe *plan.ProtectedError
		if !errors.As(err, &pe) || pe.Resource != "resources.c" || pe.Op != plan.Rebuild {
			t.Fatalf("error %v, want a *plan.ProtectedError for resources.c", err)
		}
	})
	t.Run("inconsistent with the approved plan, at apply time", func(t *testing.T) {
		ad := memadapter.New()
		e, _ := newEngine(t, ad)
		deploy(t, e, diamond("v1"))
		// b reads a's output, so it is asked again at apply: approved as
		// an update, by then its adapter wants a rebuild.
		confirm := func(pl *plan.Plan) (bool, error) {
			if s := pl.Step("resources.b"); s == nil || s.Op != plan.Update {
				t.Errorf("approved %+v for resources.b, want an update", s)
			}
			ad.Rebuild = []string{"from_a"}
			return true, nil
		}
		_, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v2"), Confirm: confirm})
		var inc *plan.Inconsistent
		if !errors.As(err, &inc) || inc.Resource != "resources.b" || inc.Approved != plan.Update || inc.Actual != plan.Rebuild {
			t.Fatalf("error %v, want a *plan.Inconsistent for resources.b (update approved, rebuild wanted)", err)
		}
	})
}
