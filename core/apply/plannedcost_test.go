package apply_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// estimating is the memadapter as an adapter that estimates costs: a STALE
// answer carries a cost whose hint names the resource and the kind of call
// that made it, and every action records the planned cost it was given.
type estimating struct {
	*memadapter.Adapter

	mu      sync.Mutex
	planned map[string]*protocol.Cost // "resource action" -> Call.PlannedCost
}

func (a *estimating) Describe(ctx context.Context, image, resource string) (plan.Capabilities, error) {
	caps, err := a.Adapter.Describe(ctx, image, resource)
	caps.Estimate = true
	return caps, err
}

func (a *estimating) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	if c.Estimate {
		return &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Cost: costFor(c.Name, "estimate")}}, nil
	}
	res, err := a.Adapter.State(ctx, c, desired)
	if err == nil && res.Status == protocol.Stale {
		if res.Gcompose == nil {
			res.Gcompose = &protocol.StateExt{}
		}
		res.Gcompose.Cost = costFor(c.Name, "state")
	}
	return res, err
}

func costFor(name, call string) *protocol.Cost {
	hint, _ := json.Marshal(map[string]string{"resource": name, "call": call})
	return &protocol.Cost{Currency: "EUR", PerHour: 1, Total: 3, Hours: 3, Basis: protocol.CostMarket, Hint: hint}
}

func (a *estimating) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	a.mu.Lock()
	a.planned[c.Name+" "+act.Name] = c.PlannedCost
	a.mu.Unlock()
	return a.Adapter.Action(ctx, c, act, stale)
}

// TestActionsGetThePlannedCost: each create action is handed the cost its
// step was planned with, the adapter's hint intact, whether the state call
// answered it (a config known at plan time) or the estimate call did (one
// known only after apply), also from a plan saved as JSON and read back
// (deploy FILE.plan); a delete, which no estimate covers, gets none.
func TestActionsGetThePlannedCost(t *testing.T) {
	f := newFixture()
	ad := &estimating{Adapter: f.ad, planned: map[string]*protocol.Cost{}}
	run := func(mode plan.Mode, want map[string]*plan.Resource) {
		t.Helper()
		pl, err := (&plan.Planner{Adapters: ad, Walk: engine.GraphWalk(4)}).Plan(context.Background(),
			plan.Input{App: "app", Mode: mode, Desired: want, State: f.store.snapshot()})
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		saved, err := json.Marshal(pl)
		if err != nil {
			t.Fatal(err)
		}
		var back plan.Plan
		if err := json.Unmarshal(saved, &back); err != nil {
			t.Fatal(err)
		}
		back.Prior = pl.Prior // not saved: bound to the state when applied
		ex := &apply.Executor{Adapters: ad, Store: f.store, Walk: engine.GraphWalk(4)}
		if _, err := ex.Apply(context.Background(), &back); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	want := diamond("v1")
	run(plan.Deploy, want)
	for name := range want {
		got := ad.planned[name+" create"]
		// b reads a's output: known only after apply, estimated apart.
		call := "state"
		if name == "resources.b" {
			call = "estimate"
		}
		var hint map[string]string
		if got == nil || json.Unmarshal(got.Hint, &hint) != nil || hint["resource"] != name || hint["call"] != call || got.Total != 3 {
			t.Errorf("%s create was given planned cost %+v, want the %s call's with its hint", name, got, call)
		}
	}
	clear(ad.planned)
	run(plan.Destroy, nil)
	for k, c := range ad.planned {
		if c != nil {
			t.Errorf("%s was given planned cost %+v; a delete has none", k, c)
		}
	}
	if len(ad.planned) != len(want) {
		t.Errorf("destroy ran %d actions, want %d", len(ad.planned), len(want))
	}
}
