package apply_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// resending reports its whole identity again each time it learns one more
// part of it, as the Golem service adapter does (the agreement, then the
// address, then the activity), then returns it all once more.
type resending struct{ plan.Adapters }

func (a resending) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	out, err := a.Adapters.Action(ctx, c, act, stale)
	if err != nil || out.Identity == nil || c.ReportIdentity == nil {
		return out, err
	}
	id := maps.Clone(out.Identity)
	id["agreement"], id["pending"], id["price"] = "ag-1", true, 0.4 // id was reported already
	c.ReportIdentity(maps.Clone(id))
	id["price"] = 0.5 // the same keys, one value changed
	c.ReportIdentity(maps.Clone(id))
	id["activity"], id["pending"] = "act-1", false
	c.ReportIdentity(maps.Clone(id))
	out.Identity = id
	return out, nil
}

// Each identity event names what that report added or changed: the same
// whole list on every line (printed twice per Golem service by make demo)
// said nothing new, and a report that changes nothing is no event.
func TestIdentityEventsNameWhatChanged(t *testing.T) {
	f := newFixture()
	want := map[string]*plan.Resource{"resources.a": {Name: "resources.a", Type: "mem", Config: map[string]any{"value": "a"}}}
	pl := f.plan(t, plan.Deploy, want)
	var mu sync.Mutex
	var got []string
	ex := &apply.Executor{Adapters: resending{f.ad}, Store: f.store, Walk: engine.GraphWalk(4), Observer: func(ev apply.Event) {
		if ev.Phase == apply.PhaseIdentity {
			mu.Lock()
			got = append(got, ev.Message)
			mu.Unlock()
		}
	}}
	if _, err := ex.Apply(context.Background(), pl); err != nil {
		t.Fatal(err)
	}
	wantEvents := []string{"recorded id", "recorded agreement, pending, price", "recorded price", "recorded activity, pending"}
	if !slices.Equal(got, wantEvents) {
		t.Fatalf("identity events %q, want %q", got, wantEvents)
	}
	if id := f.store.snapshot().Resources["resources.a"].Identity; id["activity"] != "act-1" || id["price"] != 0.5 || id["pending"] != false {
		t.Fatalf("recorded identity %v", id)
	}
}

// puts logs every record written, in order, as the store received it.
type puts struct {
	docStore
	log []*state.Resource
}

func (p *puts) Put(ctx context.Context, r *state.Resource) error {
	p.mu.Lock()
	p.log = append(p.log, r.Clone())
	p.mu.Unlock()
	return p.docStore.Put(ctx, r)
}

// withAnswer returns the identity with the action's answer instead of
// reporting it while the action runs (a one-shot adapter's identity line,
// an adapter that learns it at the end), answers the state it leaves when
// asked (answer), and fails the action after making the object when fail.
type withAnswer struct {
	plan.Adapters
	answer, fail bool

	mu        sync.Mutex
	persisted []map[string]any // the identity each state call was told
}

func (a *withAnswer) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	a.mu.Lock()
	if c.Persisted != nil {
		a.persisted = append(a.persisted, maps.Clone(c.Persisted.Identity))
	}
	a.mu.Unlock()
	return a.Adapters.State(ctx, c, desired)
}

func (a *withAnswer) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	c.ReportIdentity = nil // nothing streamed
	out, err := a.Adapters.Action(ctx, c, act, stale)
	if err != nil {
		return out, err
	}
	out.Identity = map[string]any{"id": "i-1"}
	if a.fail {
		return out, errors.New("made it, then failed")
	}
	if a.answer && c.AnswerState != "" {
		if out.State, err = a.Adapters.State(ctx, c, c.AnswerState); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Identity that comes with an action's answer is recorded in the line of
// what follows the action without another call to the adapter (its
// outcome, its failure), not in a line of its own; when another call comes
// first (the verifying state call), it is recorded before that call.
func TestIdentityWithTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name         string
		answer, fail bool
		// what each record written says: p pending, i identity, f failed, a active
		want []string
	}{
		{"answered", true, false, []string{"p", "a i"}},
		{"verified", false, false, []string{"p", "p i", "a i"}},
		{"failed", true, true, []string{"p", "p i f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			st := &puts{docStore: docStore{doc: f.store.doc}}
			f.store = &st.docStore
			want := map[string]*plan.Resource{"resources.a": {Name: "resources.a", Type: "mem", Config: map[string]any{"value": "a"}}}
			pl := f.plan(t, plan.Deploy, want)
			ad := &withAnswer{Adapters: f.ad, answer: tc.answer, fail: tc.fail}
			var events []string
			var mu sync.Mutex
			ex := &apply.Executor{Adapters: ad, Store: st, Walk: engine.GraphWalk(4), Observer: func(ev apply.Event) {
				if ev.Phase == apply.PhaseIdentity {
					mu.Lock()
					events = append(events, ev.Message)
					mu.Unlock()
				}
			}}
			_, err := ex.Apply(context.Background(), pl)
			if (err != nil) != tc.fail {
				t.Fatalf("apply: %v", err)
			}
			var got []string
			for _, r := range st.log {
				var w []string
				switch {
				case r.Pending != nil:
					w = append(w, "p")
				case r.Status == state.StatusActive:
					w = append(w, "a")
				}
				if r.Identity["id"] == "i-1" {
					w = append(w, "i")
				}
				if r.Pending != nil && r.Pending.Failed != "" {
					w = append(w, "f")
				}
				got = append(got, strings.Join(w, " "))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("records written %q, want %q", got, tc.want)
			}
			if !slices.Equal(events, []string{"recorded id"}) {
				t.Errorf("identity events %q, want one", events)
			}
			if !tc.answer && !tc.fail {
				// The verifying state call was told the identity it was
				// recorded with.
				if n := len(ad.persisted); n == 0 || ad.persisted[n-1]["id"] != "i-1" {
					t.Errorf("the verifying state call was told identity %v", ad.persisted)
				}
			}
		})
	}
}
