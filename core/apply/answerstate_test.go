package apply_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// answering is the memadapter as an adapter offering action_state: an
// action asked for the state (Call.AnswerState) ends with what State would
// answer. Every STALE answer gets a "prepare" action first (a no-op), so
// that a step has two actions of which only the last may be asked. stale
// makes the answered state STALE (a broken adapter).
type answering struct {
	*memadapter.Adapter
	stale bool

	mu    sync.Mutex
	asked map[string]string // "resource action" -> AnswerState
}

func (a *answering) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	res, err := a.Adapter.State(ctx, c, desired)
	if err == nil && res.Status == protocol.Stale {
		res.Actions = append([]protocol.ActionSpec{{Name: "prepare"}}, res.Actions...)
	}
	return res, err
}

func (a *answering) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	a.mu.Lock()
	a.asked[c.Name+" "+act.Name] = c.AnswerState
	a.mu.Unlock()
	out := &plan.ActionOutcome{}
	if act.Name != "prepare" {
		var err error
		if out, err = a.Adapter.Action(ctx, c, act, stale); err != nil {
			return out, err
		}
	}
	if c.AnswerState == "" {
		return out, nil
	}
	st, err := a.Adapter.State(ctx, c, c.AnswerState)
	if err != nil {
		return out, err
	}
	a.Adapter.StateCalls.Add(-1) // made inside the action: not a state call
	st.Gcompose = &protocol.StateExt{Identity: map[string]any{"answered": true}}
	if a.stale {
		st = &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "create"}}}
	}
	out.State = st
	return out, nil
}

// TestActionAnswersState: an adapter whose last action answers the state
// is not asked again (no verify call, no verify event), only the last
// action of a step is asked, with the desired presence of the run, and
// what it answered is recorded as the verify answer would be (outputs,
// identity, operation cleared); a STALE answer fails the resource as a
// STALE verify answer does.
func TestActionAnswersState(t *testing.T) {
	f := newFixture()
	ad := &answering{Adapter: f.ad, asked: map[string]string{}}
	var mu sync.Mutex
	var phases []apply.Phase
	observe := func(ev apply.Event) { mu.Lock(); phases = append(phases, ev.Phase); mu.Unlock() }
	run := func(mode plan.Mode, want map[string]*plan.Resource) (*apply.Result, error) {
		t.Helper()
		pl, err := (&plan.Planner{Adapters: ad, Walk: engine.GraphWalk(4)}).Plan(context.Background(),
			plan.Input{App: "app", Mode: mode, Desired: want, State: f.store.snapshot()})
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		ex := &apply.Executor{Adapters: ad, Store: f.store, Walk: engine.GraphWalk(4), Observer: observe}
		return ex.Apply(context.Background(), pl)
	}
	want := diamond("v1")
	if _, err := run(plan.Deploy, want); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if n := f.ad.StateCalls.Load(); n != 4 {
		t.Errorf("state calls %d, want 4 (planning only, no verify)", n)
	}
	for _, p := range phases {
		if p == apply.PhaseVerify {
			t.Errorf("a verify event, with no verify call")
		}
	}
	wantAsked := map[string]string{}
	for name := range want {
		wantAsked[name+" prepare"], wantAsked[name+" create"] = "", protocol.Present
	}
	if !maps.Equal(ad.asked, wantAsked) {
		t.Errorf("actions asked for the state: %v, want the last of each step, for present: %v", ad.asked, wantAsked)
	}
	doc := f.store.snapshot()
	for name := range want {
		r := doc.Resources[name]
		if r == nil || r.Status != state.StatusActive || r.Pending != nil || r.Identity["answered"] != true || r.State["id"] != name {
			t.Errorf("%s recorded %+v; want Active, no pending operation, the answered identity and outputs", name, r)
		}
	}
	if got := f.ad.Objects()["resources.b"]["from_a"]; got != "v1" {
		t.Errorf("b read a's output %v from the answered state, want v1", got)
	}

	// Destroy: the last action is asked for the absent state.
	clear(ad.asked)
	f.ad.StateCalls.Store(0)
	if _, err := run(plan.Destroy, nil); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	for k, v := range ad.asked {
		if strings.HasSuffix(k, " delete") != (v == protocol.Absent) {
			t.Errorf("destroy: %s asked for %q", k, v)
		}
	}
	if n := f.ad.StateCalls.Load(); n != 4 || len(f.store.snapshot().Resources) != 0 {
		t.Errorf("destroy: %d state calls (want 4), %d resources left", n, len(f.store.snapshot().Resources))
	}

	// An action that answers STALE: the adapter is broken, as with a
	// STALE verify answer; the operation stays pending.
	ad.stale = true
	res, err := run(plan.Deploy, map[string]*plan.Resource{"resources.x": {Name: "resources.x", Type: "mem", Config: map[string]any{"value": "x"}}})
	if !apply.IsFailed(err) || !strings.Contains(res.Outcomes["resources.x"].Err.Error(), "answered STALE again after its actions ran") {
		t.Fatalf("deploy with a STALE answer: %v", err)
	}
	if r := f.store.snapshot().Resources["resources.x"]; r == nil || r.Pending == nil || r.Status == state.StatusActive {
		t.Errorf("resources.x recorded %+v after a STALE answer; want its operation pending", r)
	}
}
