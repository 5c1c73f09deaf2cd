package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
)

// notes collects the engine's log.
type notes struct {
	mu sync.Mutex
	l  []string
}

func (n *notes) log(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.l = append(n.l, fmt.Sprintf(format, args...))
}

func (n *notes) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.l, "\n")
}

// Objects of the application found by their labels stop its first deploy
// before anything is written; a plan warns; --force-new-state goes ahead.
func TestFirstDeployRefusedWhenObjectsExist(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	var n notes
	e.Log = n.log
	e.Existing = func(ctx context.Context, app string) ([]ExistingObject, error) {
		return []ExistingObject{{Description: "container gcompose-app-payments (resource payments, running)"}}, nil
	}
	ctx := context.Background()
	_, err := e.Run(ctx, Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1")})
	var ee *ExistingError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "container gcompose-app-payments") || !strings.Contains(err.Error(), "--force-new-state") || !strings.Contains(err.Error(), "gcompose state recover --app app") {
		t.Fatalf("first deploy with objects present: %v", err)
	}
	if d, _ := st.Load(ctx, "app"); d.Lineage != "" || len(ad.Log()) != 0 {
		t.Fatalf("a refused deploy wrote a lineage (%q) or called actions %v", d.Lineage, ad.Log())
	}
	if _, err := e.Run(ctx, Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), PlanOnly: true}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	if !strings.Contains(n.String(), "deploy would refuse") {
		t.Fatalf("plan did not warn: %s", n.String())
	}
	out, err := e.Run(ctx, Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), ForceNewState: true})
	if err != nil || out.Lineage == "" {
		t.Fatalf("forced: %v", err)
	}
	// Not a first deploy any more: nothing is asked.
	e.Existing = func(context.Context, string) ([]ExistingObject, error) { t.Fatal("asked again"); return nil, nil }
	deploy(t, e, diamond("v1"))
}

// A container that says which adapter made it is left to that adapter's
// sweep, when the run asked it: the sweep knows whether the container can
// collide with this run (a Golem keeper of the same yagna) or not (one of
// another yagna on the same machine). What no sweep that answered speaks
// for still stops the first deploy; what the sweep reports does too.
func TestFirstDeployLeavesAnAdaptersContainersToItsSweep(t *testing.T) {
	keeper := ExistingObject{Description: "container gcompose-app-1a2b3c4d-payments (resource payments, running)", Adapter: "mem"}
	for _, tc := range []struct {
		name    string
		sweeps  bool
		objects []ExistingObject
		orphan  bool // the sweep reports an object of the app (another lineage)
		refused bool
	}{
		{"made by an adapter whose sweep answered", true, []ExistingObject{keeper}, false, false},
		{"its sweep reports what can collide", true, []ExistingObject{keeper}, true, true},
		{"made by an adapter that does not sweep", false, []ExistingObject{keeper}, false, true},
		{"made by an adapter this run does not use", true, []ExistingObject{{Description: "container x", Adapter: "gcompose/other:dev"}}, false, true},
		{"made by no adapter it names", true, []ExistingObject{{Description: "container y"}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := memadapter.New()
			ad.Sweeps = tc.sweeps
			e, st := newEngine(t, ad)
			if tc.orphan {
				// Deployed by another state (lineage) of the same app, whose
				// document is not here.
				other, _ := newEngine(t, ad)
				deploy(t, other, map[string]*plan.Resource{"resources.z": {Name: "resources.z", Type: "mem", Config: map[string]any{"value": "z"}}})
			}
			e.Existing = func(context.Context, string) ([]ExistingObject, error) { return tc.objects, nil }
			ctx := context.Background()
			_, err := e.Run(ctx, Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1")})
			var ee *ExistingError
			if refused := errors.As(err, &ee); refused != tc.refused {
				t.Fatalf("first deploy: %v, want refused %v", err, tc.refused)
			}
			if tc.refused {
				if d, _ := st.Load(ctx, "app"); d.Lineage != "" {
					t.Fatalf("a refused deploy wrote lineage %s", d.Lineage)
				}
				t.Logf("refused: %v", err)
			} else if err != nil {
				t.Fatalf("first deploy: %v", err)
			}
		})
	}
}

// A state whose document was lost stops the run; --force-new-state starts
// a new lineage.
func TestMissingDocumentStopsTheRun(t *testing.T) {
	dir := t.TempDir()
	st, err := state.NewFileStore(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ad := memadapter.New()
	e := &Engine{Adapters: ad, Store: st, Parallelism: 4}
	first := deploy(t, e, diamond("v1"))
	deploy(t, e, diamond("v2"))
	if err := os.Remove(st.DocPath("app")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, req := range []Request{
		{App: "app", Mode: plan.Deploy, Desired: diamond("v2")},
		{App: "app", Mode: plan.Deploy, Desired: diamond("v2"), PlanOnly: true, ForceNewState: true},
		{App: "app", Mode: plan.Destroy, ForceNewState: true},
	} {
		if _, err := e.Run(ctx, req); !errors.Is(err, state.ErrMissingDocument) {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	// The objects of the old state are still there: a forced new state
	// must also say it deploys next to them.
	out, err := e.Run(ctx, Request{App: "app", Mode: plan.Deploy, Desired: diamond("v2"), ForceNewState: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Lineage == "" || out.Lineage == first.Lineage {
		t.Fatalf("forced new state: lineage %q (old %q)", out.Lineage, first.Lineage)
	}
}

// An action that fails is recorded as a failed operation: the next run
// says it failed and why, not that it was interrupted.
func TestFailedActionRecordedAsFailed(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	ad.FailActions = map[string]bool{"resources.b": true}
	ctx := context.Background()
	if _, err := e.Run(ctx, Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1")}); err == nil {
		t.Fatal("deploy with a failing action succeeded")
	}
	d, _ := st.Load(ctx, "app")
	p := d.Resources["resources.b"].Pending
	if p == nil || !strings.Contains(p.Failed, "failed on purpose") || p.FailedAt == nil || p.Describe() != "failed create" {
		t.Fatalf("pending after a failed action: %+v", p)
	}
	ad.FailActions = nil
	out := deploy(t, e, diamond("v1"))
	if len(out.Pending) != 1 || out.Pending[0].Pending.Failed == "" {
		t.Fatalf("next run's pending: %+v", out.Pending)
	}
	for _, s := range out.Plan.Steps {
		if s.Resource == "resources.b" && strings.Contains(s.Reason, "interrupted") {
			t.Fatalf("plan reason for the failed create: %q", s.Reason)
		}
	}
	if d, _ := st.Load(ctx, "app"); d.Resources["resources.b"].Pending != nil {
		t.Fatalf("still pending after the retry: %+v", d.Resources["resources.b"].Pending)
	}
}
