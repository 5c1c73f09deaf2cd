package apply_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// laterLog is a LaterPersister that logs, in order, how each change was
// recorded ("put", "later", "flush") with the resource's status, and the
// adapter calls between them.
type laterLog struct {
	*docStore
	mu  sync.Mutex
	log []string
}

func (l *laterLog) note(s string) {
	l.mu.Lock()
	l.log = append(l.log, s)
	l.mu.Unlock()
}

func what(r *state.Resource) string {
	if r.Pending != nil && r.Identity == nil {
		return "pending"
	}
	if r.Pending != nil {
		return "identity"
	}
	return string(r.Status)
}

func (l *laterLog) Put(ctx context.Context, r *state.Resource) error {
	l.note("put " + what(r))
	return l.docStore.Put(ctx, r)
}

func (l *laterLog) PutLater(ctx context.Context, r *state.Resource) error {
	l.note("later " + what(r))
	return l.docStore.Put(ctx, r)
}

func (l *laterLog) Flush(context.Context) error {
	l.note("flush")
	return nil
}

type loggedActions struct {
	plan.Adapters
	l *laterLog
}

func (a loggedActions) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	a.l.note("action")
	return a.Adapters.Action(ctx, c, act, stale)
}

// Only the pending operation is made durable before the action is asked
// (its ID tags what the action makes); the identity the action reports and
// the outcome are recorded without waiting, and made durable before Apply
// returns.
func TestOnlyThePendingOperationWaitsForDurability(t *testing.T) {
	f := newFixture()
	want := map[string]*plan.Resource{"resources.a": {Name: "resources.a", Type: "mem", Config: map[string]any{"value": "a"}}}
	pl := f.plan(t, plan.Deploy, want)
	l := &laterLog{docStore: f.store}
	ex := &apply.Executor{Adapters: loggedActions{f.ad, l}, Store: l, Walk: engine.GraphWalk(4)}
	if _, err := ex.Apply(context.Background(), pl); err != nil {
		t.Fatal(err)
	}
	wantLog := []string{"put pending", "action", "later identity", "later " + string(state.StatusActive), "flush"}
	if !slices.Equal(l.log, wantLog) {
		t.Fatalf("writes %q, want %q", l.log, wantLog)
	}
}

// failingFlush is a LaterPersister whose deferred writes never became
// durable.
type failingFlush struct{ *laterLog }

func (f failingFlush) Flush(context.Context) error { return fmt.Errorf("fsync: input/output error") }

func TestAFlushThatFailsFailsTheApply(t *testing.T) {
	f := newFixture()
	want := map[string]*plan.Resource{"resources.a": {Name: "resources.a", Type: "mem", Config: map[string]any{"value": "a"}}}
	pl := f.plan(t, plan.Deploy, want)
	ex := &apply.Executor{Adapters: f.ad, Store: failingFlush{&laterLog{docStore: f.store}}, Walk: engine.GraphWalk(4)}
	_, err := ex.Apply(context.Background(), pl)
	if err == nil || err.Error() != "persisting state: fsync: input/output error" {
		t.Fatalf("apply: %v, want the flush's error", err)
	}
}
