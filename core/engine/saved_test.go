package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/memadapter"
)

// savePlan plans without applying and round-trips the plan through JSON,
// as plan -out and deploy FILE do.
func savePlan(t *testing.T, e *Engine, desired map[string]*plan.Resource) *plan.Plan {
	t.Helper()
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: desired, PlanOnly: true})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	b, err := out.Plan.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	var pl plan.Plan
	if err := json.Unmarshal(b, &pl); err != nil {
		t.Fatalf("reading the saved plan back: %v", err)
	}
	return &pl
}

func TestSavedPlanAppliesExactlyWithoutAsking(t *testing.T) {
	for _, first := range []bool{true, false} {
		ad := memadapter.New()
		e, _ := newEngine(t, ad)
		if !first {
			deploy(t, e, diamond("v1"))
		}
		saved := savePlan(t, e, diamond("v2"))
		asked := false
		_, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v2"), Saved: saved,
			Confirm: func(*plan.Plan) (bool, error) { asked = true; return false, nil }})
		if err != nil {
			t.Fatalf("first deploy %v: applying the saved plan: %v", first, err)
		}
		if asked {
			t.Fatal("a saved plan was confirmed again")
		}
		if v := ad.Objects()["resources.b"]["from_a"]; v != "v2" {
			t.Fatalf("first deploy %v: b has %v, want v2", first, v)
		}
	}
}

func TestSavedPlanIsRefusedWhenStateOrInputsChanged(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	saved := savePlan(t, e, diamond("v2"))

	// Inputs: the descriptor says something else now.
	_, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v3"), Saved: saved})
	var stale *StaleSavedError
	if !errors.As(err, &stale) || !strings.Contains(err.Error(), "descriptor inputs changed") {
		t.Fatalf("changed inputs: %v, want a stale saved plan naming the inputs", err)
	}

	// State: another run changed it since.
	deploy(t, e, diamond("v4"))
	before := len(ad.Log())
	_, err = e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v2"), Saved: saved})
	if !errors.As(err, &stale) || !strings.Contains(err.Error(), "the state changed since it was made") {
		t.Fatalf("changed state: %v, want a stale saved plan naming the state", err)
	}
	if n := len(ad.Log()) - before; n != 0 {
		t.Fatalf("a refused saved plan ran %d actions", n)
	}
	doc, _ := st.Load(context.Background(), "app")
	if got := doc.Resources["resources.a"].Config["value"]; got != "v4" {
		t.Fatalf("state after a refused plan has a=%v, want v4 unchanged", got)
	}
}
