package apply_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
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
